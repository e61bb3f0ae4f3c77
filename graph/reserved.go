package graph

import "unicode/utf8"

// MaxNameLen is the longest name, in bytes, that a span brings into the
// analysis: a service, version, span, operation or peer name longer than
// this is cut by CapName at the edge (package ingest), so that one
// request cannot turn a 10 KiB name into a 20 KiB root API key in every
// rollup row, label and page. 256 bytes is above every name real
// instrumentation writes (DNS and Kubernetes names stop at 253 bytes,
// routes are templates) and keeps an API key ("service operation")
// within 513 bytes.
const MaxNameLen = 256

// Reserved names: what the analysis counts names past a window's caps
// under (analysis.Limits). They begin with '⟨' (U+27E8), which CapName
// takes off every ingested name, so that no service, operation or root API
// a span names can be mistaken for one of them.
const (
	// OtherAPI is the root API of the traces whose own root API was past
	// its window's cap (or whose root service was).
	OtherAPI = "⟨other APIs⟩"
	// OtherService names the services past their window's cap.
	OtherService = "⟨other services⟩"
	// OtherOperation names the operations of folded services, and those
	// past the window's cap of operations.
	OtherOperation = "⟨other operations⟩"
	// OtherVersion names the service versions past the window's cap.
	OtherVersion = "⟨other versions⟩"
)

// reservedLead is the first rune of every reserved name, and what
// CapName replaces it with when an ingested name begins with it.
const (
	reservedLead = "⟨"
	leadSubst    = "<"
)

// truncMark ends a cut name: an ellipsis, then 8 hexadecimal digits of a
// hash of the whole name, so that names which differ only past the cut
// stay distinct (cutting changes how a name reads, not what is counted
// under it).
const (
	truncMark    = "…"
	truncHashLen = 8
)

// IsReserved reports whether s is (or begins like) a reserved name: one
// the analysis made, never one a span carried.
func IsReserved(s string) bool {
	return len(s) >= len(reservedLead) && s[:len(reservedLead)] == reservedLead
}

// NeedsCap reports whether CapName changes s: it is longer than
// MaxNameLen, or begins with the reserved names' first rune. It is the
// cheap test that keeps CapName off the common path.
func NeedsCap(s string) bool {
	return len(s) > MaxNameLen || IsReserved(s)
}

// CapName appends to dst the name s as the analysis keeps it, and
// reports whether it was cut. A name beginning with '⟨' gets '<' in its
// place. A name still longer than MaxNameLen bytes keeps its longest
// prefix that ends on a UTF-8 character boundary and fits with the mark:
// "…" and 8 hexadecimal digits of the FNV-1a hash of the whole name. The
// result is at most MaxNameLen bytes, exactly MaxNameLen when the cut
// falls on a boundary (always, for ASCII). Call it when NeedsCap(s).
func CapName(dst []byte, s string) ([]byte, bool) {
	if IsReserved(s) {
		s = leadSubst + s[len(reservedLead):] // rare: the copy does not matter
	}
	if len(s) <= MaxNameLen {
		return append(dst, s...), false
	}
	n := MaxNameLen - len(truncMark) - truncHashLen
	// Back off to the start of a character: at most 3 continuation bytes
	// (10xxxxxx) precede it in valid UTF-8; invalid input stops there too.
	for k := 0; k < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); k++ {
		n--
	}
	dst = append(dst, s[:n]...)
	dst = append(dst, truncMark...)
	h := fnv32(s)
	const hexDigits = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(h>>uint(shift))&0xf])
	}
	return dst, true
}

// fnv32 is the 32-bit FNV-1a hash of s.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
