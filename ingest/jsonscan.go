package ingest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// MaxJSONDepth is the deepest nesting of JSON objects and arrays a JSON
// request may have; a deeper one is rejected before it is decoded (the
// decoder recurses once per level, as pdata's did; the limit and the
// reasoning below are pdata's path's, kept so that both accept the same
// requests). pdata's
// JSON decoder recurses once per level with no limit of its own: an
// attribute value nested three million levels deep (84 MB, 190 KB gzipped)
// overflows the goroutine stack, which kills the process.
//
// Real OTLP/JSON nests far less. A span attribute's value is an object at
// level 10 ({ resourceSpans [ { scopeSpans [ { spans [ { attributes [ {
// value {), an event's or a link's at level 12, and each level of AnyValue
// nesting adds 3 (arrayValue { values [ {) or 4 (kvlistValue { values [ {
// value {). 64 leaves room for 13 kvlist levels inside an event attribute,
// where instrumentation seldom goes beyond 2 or 3.
const MaxJSONDepth = 64

// MaxJSONElements bounds what one JSON request can make pdata allocate: a
// request with more commas and '[' bytes than this (counted everywhere,
// strings included) is rejected before pdata sees it. Every element pdata
// appends to a list consumes one of these bytes, and an element costs at
// most about 250 bytes (measured: a span, `{}` in a spans array, with its
// share of the list's growth), so no request can cost more than about
// 0.5 GiB of pdata structures (and 0.35 GiB of graph.Span if the elements
// are all spans), plus its strings, which its size bounds (MaxRequestSize).
// Without the limit, 256 MiB of `{},` would cost over 20 GiB. Realistic
// requests use about 27 per span (spans with 8 to 15 attributes), so the
// limit still admits some 70,000 spans in one request, several times a
// collector's default batch of 8192.
//
// Bytes inside strings count too because pdata's decoder, after an error
// (which it reports only at the end), may read a string's contents as
// structure (see jsonScanner).
const MaxJSONElements = 1 << 21

// jsonScanner checks the syntax of JSON, enforcing MaxJSONDepth, fast and
// without allocating. It is resumable: the input may be given in chunks cut
// anywhere. The JSON lines reader runs it as it reads, to find where
// requests end; AppendRequest, on a request the decoder rejected, to say
// what is wrong with it. The decoder (jsondec.go) checks the same syntax
// itself, so that it accepts nothing the scanner rejects.
//
// It is strict about structure (brackets match, keys are strings, commas
// and colons where they belong, true, false and null spelt out) and lenient
// inside strings (escapes and control characters are left to the decoder):
// a string ends at the first quote not escaped by a backslash, as in
// jsoniter, pdata's JSON decoder.
//
// What follows is why it was enough in front of pdata's decoder, which is
// still the tests' reference (appendJSONPdata). Counting brackets outside strings would not be enough. jsoniter does not
// stop at an error: it records it and carries on, and some of its error
// paths (a string where an object belongs, an escaped string after an
// earlier error, a trace id holding an escaped quote) leave it reading a
// string's contents as structure, and from there out of step with this
// scanner: its strings are the bytes seen here between strings, and its
// object keys too. Checked strictly, those bytes can only be punctuation,
// numbers, true, false and null, never a field name that makes pdata
// recurse (arrayValue, values, …), so out of step pdata only unwinds. In
// step, its nesting follows the brackets counted here, which must match:
// a ']' closing a '{' would leave pdata a level deeper than the count.
type jsonScanner struct {
	state  uint8  // what may come next: js*
	tok    uint8  // token cut by the end of the previous chunk: tok*
	esc    bool   // a string's backslash ended the previous chunk
	lit    string // the rest of the literal being read
	litAt  int64  // where the literal starts
	litC   byte   // and its first byte
	depth  int    // open containers
	arrays uint64 // bit d-1 set: the container at depth d is an array
	off    int64  // bytes scanned before the current chunk

	fault   uint8 // what went wrong: fault*; faultNone while all is well
	faultAt int64 // offset of the offending byte
	faultC  byte  // the offending byte
}

// Scanner states: what the next token may be.
const (
	jsValue      uint8 = iota // a value: at the top, after ':', after ',' in an array
	jsValueOrEnd              // a value or ']' (after '[')
	jsKeyOrEnd                // a key or '}' (after '{')
	jsKey                     // a key (after ',' in an object)
	jsColon                   // ':' (after a key)
	jsNext                    // ',' or the end of the container (after a value)
	jsDone                    // the top-level value is complete: only whitespace may follow
)

// Tokens that can be cut by the end of a chunk.
const (
	tokNone uint8 = iota
	tokKey
	tokString
	tokNumber
	tokLiteral
)

// Faults.
const (
	faultNone uint8 = iota
	faultUnexpected
	faultAfterEnd
	faultTooDeep
)

// reset makes s ready for a new request.
func (s *jsonScanner) reset() { *s = jsonScanner{} }

// done reports whether a complete JSON value has been scanned (and nothing
// but whitespace after it).
func (s *jsonScanner) done() bool { return s.state == jsDone && s.fault == faultNone }

// failed reports whether the input seen so far cannot be a valid request.
func (s *jsonScanner) failed() bool { return s.fault != faultNone }

// Byte classes, outside strings (quotes are handled before classes).
const (
	cBad uint8 = iota
	cSpace
	cOpenObject
	cOpenArray
	cCloseObject
	cCloseArray
	cComma
	cColon
	cNumber
	cLiteral
)

var jsonClass = func() (t [256]uint8) {
	for _, c := range []byte(" \t\r\n") {
		t[c] = cSpace
	}
	t['{'], t['['], t['}'], t[']'], t[','], t[':'] = cOpenObject, cOpenArray, cCloseObject, cCloseArray, cComma, cColon
	t['-'] = cNumber
	for c := '0'; c <= '9'; c++ {
		t[c] = cNumber
	}
	t['t'], t['f'], t['n'] = cLiteral, cLiteral, cLiteral
	return t
}()

// scan checks the next chunk. It returns false once the input is known to
// be invalid (see failed); later calls then do nothing.
//
// It is the hot loop of JSON decoding, written for speed: the state lives in
// locals, bytes outside strings are classified by a table, and strings are
// skipped 8 bytes at a time.
func (s *jsonScanner) scan(b []byte) bool {
	if s.fault != faultNone {
		return false
	}
	i, n := 0, len(b)
	if s.tok != tokNone {
		if i = s.resume(b); i < 0 {
			s.off += int64(n)
			return s.fault == faultNone
		}
	}
	state, depth, arrays := s.state, s.depth, s.arrays
	fault := faultNone
loop:
	for i < n {
		c := b[i]
		if c == '"' {
			// Strings first, outside the switch: they are most of the
			// tokens, and the byte after a key is nearly always ':'.
			key := state == jsKeyOrEnd || state == jsKey
			if !key && state != jsValue && state != jsValueOrEnd {
				fault = faultUnexpected
				break loop
			}
			j, esc := stringEnd(b, i+1)
			if esc {
				s.esc = true // the escaped byte is the first of the next chunk
			}
			if j == n {
				s.state, s.depth, s.arrays = state, depth, arrays
				s.tok = tokString
				if key {
					s.tok = tokKey
				}
				s.off += int64(n)
				return true
			}
			i, state = afterString(b, j+1, key, depth)
			continue
		}
		switch jsonClass[c] {
		case cSpace:
			i++
		case cOpenObject, cOpenArray:
			if state, arrays, fault = open(c, state, depth, arrays); fault != faultNone {
				break loop
			}
			depth++
			i++
		case cCloseObject, cCloseArray:
			if state, fault = closing(c, state, depth, arrays); fault != faultNone {
				break loop
			}
			depth--
			i++
		case cComma:
			if state, fault = afterComma(state, depth, arrays); fault != faultNone {
				break loop
			}
			i++
		case cColon:
			if state != jsColon {
				fault = faultUnexpected
				break loop
			}
			state = jsValue
			i++
		case cNumber, cLiteral:
			if state != jsValue && state != jsValueOrEnd {
				fault = faultUnexpected
				break loop
			}
			s.state, s.depth, s.arrays = state, depth, arrays
			j := s.scalar(b, i)
			if j < 0 {
				s.off += int64(n)
				return s.fault == faultNone
			}
			i = j
			state, depth, arrays = s.state, s.depth, s.arrays
		default:
			fault = faultUnexpected
			break loop
		}
	}
	s.state, s.depth, s.arrays = state, depth, arrays
	if fault != faultNone {
		if fault == faultUnexpected && state == jsDone {
			fault = faultAfterEnd
		}
		return s.fail(fault, i, b[i])
	}
	s.off += int64(n)
	return true
}

// afterString returns where scanning goes on after a string that ends
// at b[i-1], and the state: a key's colon taken at once when it follows,
// else what may come after a key or a value at depth.
func afterString(b []byte, i int, key bool, depth int) (int, uint8) {
	switch {
	case key:
		if i < len(b) && b[i] == ':' {
			return i + 1, jsValue
		}
		return i, jsColon
	case depth == 0:
		return i, jsDone
	default:
		return i, jsNext
	}
}

// afterComma checks that a comma may come in state, and returns the state
// after it: a value in an array, else a key.
func afterComma(state uint8, depth int, arrays uint64) (uint8, uint8) {
	if state != jsNext {
		return state, faultUnexpected
	}
	if arrays>>(depth-1)&1 == 1 {
		return jsValue, faultNone
	}
	return jsKey, faultNone
}

// open checks that c ('{' or '[') may open a container at depth in state,
// and returns the state after it and the containers' kinds with it.
func open(c byte, state uint8, depth int, arrays uint64) (uint8, uint64, uint8) {
	if state != jsValue && state != jsValueOrEnd {
		return state, arrays, faultUnexpected
	}
	if depth == MaxJSONDepth {
		return state, arrays, faultTooDeep
	}
	if c == '[' {
		return jsValueOrEnd, arrays | 1<<depth, faultNone
	}
	return jsKeyOrEnd, arrays &^ (1 << depth), faultNone
}

// closing checks that c ('}' or ']') may close the container at depth in
// state, and returns the state after it.
func closing(c byte, state uint8, depth int, arrays uint64) (uint8, uint8) {
	if depth == 0 {
		return state, faultUnexpected
	}
	inArray := arrays>>(depth-1)&1 == 1
	if inArray != (c == ']') || state != jsNext && state != jsValueOrEnd && state != jsKeyOrEnd ||
		state == jsValueOrEnd && !inArray || state == jsKeyOrEnd && inArray {
		return state, faultUnexpected
	}
	if depth == 1 {
		return jsDone, faultNone
	}
	return jsNext, faultNone
}

// scalar reads the number or literal starting at b[i] (the scanner's
// state saved, the value allowed there) and returns the index after it,
// or -1 when b ends first (the token continues in the next chunk) or it
// is invalid (s.fault says).
func (s *jsonScanner) scalar(b []byte, i int) int {
	c := b[i]
	if jsonClass[c] == cNumber {
		s.tok = tokNumber
	} else {
		s.tok, s.litAt, s.litC = tokLiteral, s.off+int64(i), c
		switch c {
		case 't':
			s.lit = "rue"
		case 'f':
			s.lit = "alse"
		default:
			s.lit = "ull"
		}
	}
	s.off += int64(i + 1)
	j := s.resume(b[i+1:])
	s.off -= int64(i + 1)
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// stringEnd returns the index of the quote that ends the string whose
// bytes begin at b[j], skipping 8 bytes at a time, or len(b) when b ends
// first; esc reports that b ends just after a backslash (the byte it
// escapes is the first of the next chunk).
func stringEnd(b []byte, j int) (end int, esc bool) {
	n := len(b)
	for {
		if j+8 <= n {
			w := binary.LittleEndian.Uint64(b[j:])
			q := w ^ lsb*'"'
			e := w ^ lsb*'\\'
			// A byte of q or e is zero where w has a quote or a
			// backslash; the lowest byte this flags is exact (borrows
			// only travel upwards).
			m := ((q-lsb)&^q | (e-lsb)&^e) & msb
			if m == 0 {
				j += 8
				continue
			}
			j += bits.TrailingZeros64(m) >> 3
		} else {
			for j < n && b[j] != '"' && b[j] != '\\' {
				j++
			}
			if j == n {
				return n, false
			}
		}
		if b[j] == '"' {
			return j, false
		}
		// A backslash escapes the byte after it, whatever it is.
		if j+1 == n {
			return n, true
		}
		j += 2
	}
}

// resume finishes the token s.tok, cut by the end of the previous chunk (or
// just begun: numbers and literals, which are rare in OTLP/JSON, are read
// here), at the start of b. It returns the index in b just past the token,
// or -1 if b ends first or the token is invalid (s.fault set).
func (s *jsonScanner) resume(b []byte) int {
	i, n := 0, len(b)
	switch s.tok {
	case tokKey, tokString:
		if i = s.skipString(b, 0); i < 0 {
			return -1
		}
		s.endString()
		return i
	case tokNumber:
		// Numbers are checked loosely (a run of number bytes): pdata
		// rejects a malformed one, and such a run cannot spell a field
		// name.
		for i < n && isNumberByte(b[i]) {
			i++
		}
		if i == n {
			return -1
		}
	case tokLiteral:
		for ; len(s.lit) > 0 && i < n; i++ {
			if b[i] != s.lit[0] {
				// Say where the word starts: "unexpected 't'" for "this".
				s.fault, s.faultAt, s.faultC = faultUnexpected, s.litAt, s.litC
				return -1
			}
			s.lit = s.lit[1:]
		}
		if len(s.lit) > 0 {
			return -1
		}
	}
	s.tok = tokNone
	s.afterValue()
	return i
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// afterValue moves on after a complete value.
func (s *jsonScanner) afterValue() {
	if s.depth == 0 {
		s.state = jsDone
	} else {
		s.state = jsNext
	}
}

// endString moves on after a string's closing quote.
func (s *jsonScanner) endString() {
	if s.tok == tokKey {
		s.state = jsColon
	} else {
		s.afterValue()
	}
	s.tok = tokNone
}

// skipString skips string content starting at b[i] and returns the index
// just past the closing quote, or -1 if b ends first. A backslash escapes
// the byte after it, whatever it is, as in jsoniter.
func (s *jsonScanner) skipString(b []byte, i int) int {
	if s.esc {
		if i >= len(b) {
			return -1
		}
		s.esc = false
		i++
	}
	for {
		j := quoteOrBackslash(b, i)
		if j < 0 {
			return -1
		}
		if b[j] == '"' {
			return j + 1
		}
		if j+1 == len(b) {
			s.esc = true
			return -1
		}
		i = j + 2
	}
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// quoteOrBackslash returns the index of the first '"' or '\\' in b at or
// after i, or -1. It looks at 8 bytes at a time: most of a request's bytes
// are inside strings.
func quoteOrBackslash(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q := w ^ lsb*'"'
		e := w ^ lsb*'\\'
		// A byte of q or e is zero where w has a quote or a backslash; the
		// lowest byte this flags is exact (borrows only travel upwards).
		if m := ((q-lsb)&^q | (e-lsb)&^e) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' {
			return i
		}
	}
	return -1
}

func (s *jsonScanner) fail(f uint8, i int, c byte) bool {
	s.fault, s.faultAt, s.faultC = f, s.off+int64(i), c
	return false
}

// problem says what is wrong, without where: the caller knows how to say
// where (s.faultAt is an offset from the start of the request).
func (s *jsonScanner) problem() error {
	switch s.fault {
	case faultTooDeep:
		return newKindError(ErrLimit, nil, fmt.Sprintf("JSON nested deeper than %d levels", MaxJSONDepth))
	case faultAfterEnd:
		return fmt.Errorf("unexpected %s after the end of the JSON request (one request per line)", quoteByte(s.faultC))
	case faultUnexpected:
		return fmt.Errorf("unexpected %s", quoteByte(s.faultC))
	}
	return nil
}

// incomplete says what is missing at the end of the input (when !s.done()).
func (s *jsonScanner) incomplete() string {
	switch {
	case s.tok == tokKey || s.tok == tokString:
		return "ends inside a string"
	case s.depth > 0:
		return fmt.Sprintf("ends with %s unclosed", plural(s.depth, "bracket"))
	case s.state == jsValue && s.tok == tokNone:
		return "is empty" // nothing but whitespace
	}
	return "ends inside a value"
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// countElements returns the number of ',' and '[' bytes in b (see
// MaxJSONElements).
func countElements(b []byte) int {
	return bytes.Count(b, comma) + bytes.Count(b, openBracket)
}

var (
	comma       = []byte{','}
	openBracket = []byte{'['}
)

// elementsError is the error for a request over MaxJSONElements.
func elementsError() error {
	return newKindError(ErrLimit, nil, fmt.Sprintf("JSON request has more than %d elements (commas and '['): split it into smaller requests", MaxJSONElements))
}

// checkJSON checks one whole JSON request (see jsonScanner).
func checkJSON(b []byte) error {
	if countElements(b) > MaxJSONElements {
		return elementsError()
	}
	var s jsonScanner
	if !s.scan(b) {
		if s.fault == faultTooDeep {
			return fmt.Errorf("%w at offset %d", s.problem(), s.faultAt)
		}
		return fmt.Errorf("invalid JSON: %w at offset %d", s.problem(), s.faultAt)
	}
	if !s.done() {
		return fmt.Errorf("invalid JSON: the request %s", s.incomplete())
	}
	return nil
}
