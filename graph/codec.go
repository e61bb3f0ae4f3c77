package graph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/stormradius/stormradius/graph/wire"
)

// traceCodecVersion is the first byte of an encoded trace; a sampled
// trace (a weight above 1, or sampling flags) is written as
// traceCodecSampled, with its weight and flags after its own flags, so
// that the facts of unsampled traces stay as they always were.
const (
	traceCodecVersion = 1
	traceCodecSampled = 2
)

// maxDecodedRecords bounds the hops, calls, attempts and roots one encoded
// trace may declare, so a corrupt length cannot allocate without limit.
const maxDecodedRecords = 1 << 24

// ErrCorruptTrace is returned (wrapped) by DecodeTrace for data that is not
// an encoded trace.
var ErrCorruptTrace = errors.New("corrupt encoded trace")

// AppendBinary appends the compact binary form of t to b: everything an
// analysis reads (hops, calls, attempts, roots, the root API), not the
// spans. Stores keep it beside a trace's results, so that the trace can be
// evaluated again, against a window state that changed, without reading and
// assembling its spans. Names are written once per trace; times as deltas.
// A TraceEncoder does the same with less garbage when encoding many.
func (t *Trace) AppendBinary(b []byte) []byte {
	// An encoder of the pool: a fresh one's name table (a map and a
	// cache of recordNameCache slots, ~7 KB) was most of the garbage of
	// storing a record (store.NewRecord: ~1 GB per 100,000 traces).
	e := encoders.Get().(*TraceEncoder)
	b = e.Append(b, t)
	encoders.Put(e)
	return b
}

// encoders are the TraceEncoders AppendBinary reuses.
var encoders = sync.Pool{New: func() any { return new(TraceEncoder) }}

// TraceEncoder encodes traces as AppendBinary does, reusing its name
// table from one trace to the next. The zero value is ready; it is not
// safe for concurrent use.
type TraceEncoder struct {
	names nameTable
	idx   []uint32 // the names' numbers, in the order the records use them
}

// Append appends the binary form of t to b.
func (e *TraceEncoder) Append(b []byte, t *Trace) []byte {
	nt := &e.names
	nt.reset(recordNameCache)
	name := nt.of
	name("") // name 0: none
	// Intern first, so the table precedes the records that use it.
	api := uint64(name(t.APIName))
	idx := e.idx[:0]
	for i := range t.Hops {
		h := &t.Hops[i]
		idx = append(idx, name(h.Service), name(h.Operation), name(h.Version))
	}
	for i := range t.Calls {
		idx = append(idx, name(t.Calls[i].CalleeService), name(t.Calls[i].CalleeOperation))
	}
	e.idx = idx
	hopIdx, callIdx := idx[:3*len(t.Hops)], idx[3*len(t.Hops):]
	base := t.Start()

	sampled := t.W() > 1 || t.SamplingFlags != 0
	if sampled {
		b = append(b, traceCodecSampled)
	} else {
		b = append(b, traceCodecVersion)
	}
	b = append(b, t.ID[:]...)
	b = binary.AppendUvarint(b, uint64(t.SpanCount))
	b = binary.AppendUvarint(b, uint64(t.Duplicates))
	b = binary.AppendUvarint(b, uint64(t.Fragments))
	b = binary.AppendVarint(b, int64(t.Root))
	b = append(b, bits(t.RemoteParent))
	if sampled {
		b = binary.AppendUvarint(b, uint64(t.W()))
		b = append(b, t.SamplingFlags)
	}
	b = binary.AppendVarint(b, base)
	b = binary.AppendUvarint(b, uint64(len(nt.table)-1))
	for _, s := range nt.table[1:] {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, api)

	b = binary.AppendUvarint(b, uint64(len(t.Hops)))
	for i := range t.Hops {
		h := &t.Hops[i]
		b = binary.AppendUvarint(b, uint64(h.Span))
		for _, x := range hopIdx[3*i : 3*i+3] {
			b = binary.AppendUvarint(b, uint64(x))
		}
		b = binary.AppendVarint(b, h.Start-base)
		b = binary.AppendVarint(b, h.End-h.Start)
		b = append(b, bits(h.Failed, h.Virtual, h.Client, h.Root, h.Fragment, h.Detached, h.First), byte(h.Claim))
		b = binary.AppendVarint(b, int64(h.In))
		b = binary.AppendUvarint(b, uint64(h.Depth))
		b = binary.AppendUvarint(b, uint64(h.CallStart))
		b = binary.AppendUvarint(b, uint64(h.CallEnd-h.CallStart))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Calls)))
	for i := range t.Calls {
		c := &t.Calls[i]
		b = binary.AppendUvarint(b, uint64(c.Caller))
		b = binary.AppendUvarint(b, uint64(callIdx[2*i]))
		b = binary.AppendUvarint(b, uint64(callIdx[2*i+1]))
		b = binary.AppendUvarint(b, uint64(c.AttemptStart))
		b = binary.AppendUvarint(b, uint64(c.AttemptEnd-c.AttemptStart))
		b = append(b, bits(c.Failed, c.Criteria, c.Suppressed, c.Virtual), byte(c.Claim), byte(c.FailOpen))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Attempts)))
	for i := range t.Attempts {
		a := &t.Attempts[i]
		b = binary.AppendUvarint(b, uint64(a.Call))
		b = binary.AppendUvarint(b, uint64(a.Index))
		b = binary.AppendUvarint(b, uint64(a.Callee))
		b = binary.AppendVarint(b, int64(a.Client))
		b = binary.AppendVarint(b, a.Start-base)
		b = binary.AppendVarint(b, a.End-a.Start)
		b = append(b, bits(a.Failed, a.Mismatch, a.Criteria, a.Suppressed), byte(a.Claim), byte(a.FailOpen))
	}
	b = binary.AppendUvarint(b, uint64(len(t.Roots)))
	for _, r := range t.Roots {
		b = binary.AppendUvarint(b, uint64(r))
	}
	return b
}

func bits(flags ...bool) byte {
	var v byte
	for i, f := range flags {
		if f {
			v |= 1 << i
		}
	}
	return v
}

// traceReader reads an encoded trace, remembering the first error.
type traceReader struct{ wire.Reader }

func newTraceReader(b []byte) *traceReader {
	return &traceReader{wire.Reader{B: b, Corrupt: func(what string) error { return fmt.Errorf("%w: %s", ErrCorruptTrace, what) }}}
}

// index reads an index that must be below n.
func (r *traceReader) index(n int, what string) int32 { return int32(r.Index(n, what)) }

// count reads a record count, bounded by what the remaining bytes can hold
// (every record takes at least min bytes) and by maxDecodedRecords.
func (r *traceReader) count(min int, what string) int {
	n := r.Count(min, what)
	if n > maxDecodedRecords {
		r.Fail(what + " too large")
		return 0
	}
	return n
}

// DecodeTrace decodes a trace written by AppendBinary. Its Spans are nil.
// Any input is safe: data that is not a well-formed trace (wrong indexes,
// a caller after its callee, truncation) gives an error wrapping
// ErrCorruptTrace, never a panic or a trace that makes analyses panic.
func DecodeTrace(b []byte) (*Trace, error) { return DecodeTraceInterned(b, nil) }

// DecodeTraceInterned is DecodeTrace with names passed through intern
// (when not nil), so that decoding many traces shares repeated names.
func DecodeTraceInterned(b []byte, intern func([]byte) string) (*Trace, error) {
	t := &Trace{}
	if _, err := decodeTrace(t, nil, b, intern); err != nil {
		return nil, err
	}
	return t, nil
}

// TraceDecoder decodes traces into memory it reuses: the trace Decode
// returns is valid until its next call. Names go through Intern when it
// is set. The zero value is ready; not safe for concurrent use.
type TraceDecoder struct {
	Intern func([]byte) string
	t      Trace
	table  []string
}

// Decode decodes a trace written by AppendBinary, as DecodeTrace does.
func (d *TraceDecoder) Decode(b []byte) (*Trace, error) {
	var err error
	d.table, err = decodeTrace(&d.t, d.table, b, d.Intern)
	if err != nil {
		return nil, err
	}
	return &d.t, nil
}

// reuse returns s resized to n, reusing its memory when it is large
// enough (every element is overwritten by the decoder).
func reuse[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// decodeTrace decodes b into t, reusing t's slices and the name table
// (returned for reuse).
func decodeTrace(t *Trace, table []string, b []byte, intern func([]byte) string) ([]string, error) {
	r := newTraceReader(b)
	version := r.Byte("version")
	if version != traceCodecVersion && version != traceCodecSampled {
		return table, fmt.Errorf("%w: unknown version", ErrCorruptTrace)
	}
	if len(r.B) < 16 {
		return table, fmt.Errorf("%w: short trace id", ErrCorruptTrace)
	}
	*t = Trace{Hops: t.Hops[:0], Calls: t.Calls[:0], Attempts: t.Attempts[:0], Roots: t.Roots[:0]}
	copy(t.ID[:], r.B[:16])
	r.B = r.B[16:]
	t.SpanCount = int(min(r.Uvarint("span count"), math.MaxInt32))
	t.Duplicates = int(min(r.Uvarint("duplicates"), math.MaxInt32))
	t.Fragments = int(min(r.Uvarint("fragments"), math.MaxInt32))
	root := r.Varint("root")
	t.RemoteParent = r.Byte("flags")&1 != 0
	t.Weight, t.AdjustedCount = 1, 1
	if version == traceCodecSampled {
		w := r.Uvarint("weight")
		if w < 1 || w > MaxAdjustedCount {
			r.Fail("weight out of range")
		}
		t.Weight = int64(w)
		t.AdjustedCount = float64(w)
		t.SamplingFlags = r.Byte("sampling flags") & (SamplingConflict | SamplingUnusable)
	}
	base := r.Varint("base")
	nNames := r.count(1, "names")
	if cap(table) < nNames+1 {
		table = make([]string, 0, nNames+1)
	}
	table = append(table[:0], "")
	table = r.Names(table, nNames, intern)
	t.APIName = r.Str(table, "api")

	t.Hops = reuse(t.Hops, r.count(11, "hops"))
	for i := range t.Hops {
		h := &t.Hops[i]
		h.Span = int32(min(r.Uvarint("span"), math.MaxInt32))
		h.Service = r.Str(table, "service")
		h.Operation = r.Str(table, "operation")
		h.Version = r.Str(table, "version")
		h.Start = base + r.Varint("start")
		h.End = h.Start + r.Varint("duration")
		f := r.Byte("hop flags")
		h.Failed, h.Virtual, h.Client, h.Root = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0
		h.Fragment, h.Detached, h.First = f&16 != 0, f&32 != 0, f&64 != 0
		h.Claim = Claim(r.Byte("claim") & 3)
		h.In = int32(r.Varint("in"))
		h.Depth = int32(min(r.Uvarint("depth"), math.MaxInt32))
		h.CallStart = int32(min(r.Uvarint("calls"), math.MaxInt32))
		h.CallEnd = h.CallStart + int32(min(r.Uvarint("calls"), math.MaxInt32/2))
	}
	t.Calls = reuse(t.Calls, r.count(8, "calls"))
	for i := range t.Calls {
		c := &t.Calls[i]
		c.Caller = r.index(len(t.Hops), "caller")
		c.CalleeService = r.Str(table, "callee service")
		c.CalleeOperation = r.Str(table, "callee operation")
		c.AttemptStart = int32(min(r.Uvarint("attempts"), math.MaxInt32))
		c.AttemptEnd = c.AttemptStart + int32(min(r.Uvarint("attempts"), math.MaxInt32/2))
		f := r.Byte("call flags")
		c.Failed, c.Criteria, c.Suppressed, c.Virtual = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0
		c.Claim = Claim(r.Byte("claim") & 3)
		c.FailOpen = Tri(r.Byte("fail open") % 3)
	}
	t.Attempts = reuse(t.Attempts, r.count(9, "attempts"))
	for i := range t.Attempts {
		a := &t.Attempts[i]
		a.Call = r.index(len(t.Calls), "call")
		a.Index = int32(min(r.Uvarint("index"), math.MaxInt32))
		a.Callee = r.index(len(t.Hops), "callee")
		a.Client = int32(r.Varint("client"))
		a.Start = base + r.Varint("start")
		a.End = a.Start + r.Varint("duration")
		f := r.Byte("attempt flags")
		a.Failed, a.Mismatch, a.Criteria, a.Suppressed = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0
		a.Claim = Claim(r.Byte("claim") & 3)
		a.FailOpen = Tri(r.Byte("fail open") % 3)
	}
	t.Roots = reuse(t.Roots, r.count(1, "roots"))
	for i := range t.Roots {
		t.Roots[i] = r.index(len(t.Hops), "root")
	}
	if r.Err != nil {
		return table, r.Err
	}
	if len(r.B) != 0 {
		return table, fmt.Errorf("%w: %d trailing bytes", ErrCorruptTrace, len(r.B))
	}
	if root < -1 || root >= int64(len(t.Hops)) {
		return table, fmt.Errorf("%w: root out of range", ErrCorruptTrace)
	}
	t.Root = int32(root)
	return table, t.check()
}

// check verifies the invariants analyses rely on: ranges nest, every
// attempt belongs to the call that lists it, and callers precede callees.
func (t *Trace) check() error {
	bad := func(what string, i int) error { return fmt.Errorf("%w: %s %d", ErrCorruptTrace, what, i) }
	for i := range t.Hops {
		h := &t.Hops[i]
		if h.CallStart < 0 || h.CallEnd < h.CallStart || int(h.CallEnd) > len(t.Calls) {
			return bad("hop calls", i)
		}
		if h.In < -1 || int(h.In) >= len(t.Attempts) {
			return bad("hop in", i)
		}
		if h.In >= 0 {
			if at := &t.Attempts[h.In]; int(at.Callee) != i || int(t.Calls[at.Call].Caller) >= i {
				return bad("hop order", i)
			}
		}
		for c := h.CallStart; c < h.CallEnd; c++ {
			if int(t.Calls[c].Caller) != i {
				return bad("call caller", int(c))
			}
		}
	}
	for i := range t.Calls {
		c := &t.Calls[i]
		if c.AttemptStart < 0 || c.AttemptEnd <= c.AttemptStart || int(c.AttemptEnd) > len(t.Attempts) {
			return bad("call attempts", i)
		}
		for a := c.AttemptStart; a < c.AttemptEnd; a++ {
			if int(t.Attempts[a].Call) != i {
				return bad("attempt call", int(a))
			}
		}
	}
	return nil
}

// spansCodecVersion is the first byte of a span list written by
// TraceEncoder.AppendSpans; a list with a span that carries sampling
// information is written as spansCodecSampled: its spans' flags hold
// the Sampling source (bits 4–5) and the adjusted count follows the
// target of a span that has one.
const (
	spansCodecVersion = 2
	spansCodecSampled = 3
)

// AppendSpans appends spans as one record: their names once, in a table,
// then every span with indexes into it and times as deltas (a spill file
// of a batch analysis holds them).
func (e *TraceEncoder) AppendSpans(b []byte, spans []Span) []byte {
	return e.appendSpans(b, spans, nil)
}

// AppendSpansOf appends spans[order[0]], spans[order[1]], … as
// AppendSpans appends them, without copying them into a slice first (a
// store's row of one trace of a write).
func (e *TraceEncoder) AppendSpansOf(b []byte, spans []Span, order []int32) []byte {
	return e.appendSpans(b, spans, order)
}

// appendSpans is AppendSpans of spans, or of spans[order[i]] when order
// is not nil.
func (e *TraceEncoder) appendSpans(b []byte, all []Span, order []int32) []byte {
	n := len(all)
	if order != nil {
		n = len(order)
	}
	at := func(i int) *Span {
		if order != nil {
			return &all[order[i]]
		}
		return &all[i]
	}
	nt := &e.names
	nt.reset(recordNameCache)
	name := nt.of
	idx := e.idx[:0]
	for i := range n {
		s := at(i)
		idx = append(idx, name(s.Service), name(s.Version), name(s.Name), name(s.Operation), name(s.Peer))
	}
	e.idx = idx
	version := byte(spansCodecVersion)
	for i := range n {
		if at(i).Sampling != SamplingNone {
			version = spansCodecSampled
			break
		}
	}
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(nt.table)))
	for _, s := range nt.table {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(n))
	var base int64
	if n > 0 {
		base = at(0).Start
	}
	b = binary.AppendVarint(b, base)
	for i := range n {
		s := at(i)
		b = append(b, s.TraceID[:]...)
		b = append(b, s.SpanID[:]...)
		b = append(b, s.ParentID[:]...)
		b = append(b, byte(s.Kind), byte(s.Claim), byte(s.FailOpen), bits(s.Failed, s.HasResend, s.CriteriaSatisfied, s.Suppressed)|byte(s.Sampling&3)<<4)
		for _, x := range idx[5*i : 5*i+5] {
			b = binary.AppendUvarint(b, uint64(x))
		}
		b = binary.AppendVarint(b, s.Start-base)
		b = binary.AppendVarint(b, s.End-s.Start)
		b = binary.AppendVarint(b, int64(s.Resend))
		b = binary.AppendVarint(b, int64(s.StatusCode))
		b = binary.LittleEndian.AppendUint64(b, s.Target)
		if s.Sampling == SamplingRecorded || s.Sampling == SamplingConfigured {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.AdjustedCount))
		}
	}
	return b
}

// DecodeSpans appends the spans of a record written by AppendSpans to dst,
// names passed through intern when it is not nil.
func DecodeSpans(b []byte, dst []Span, intern func([]byte) string) ([]Span, error) {
	r := newTraceReader(b)
	version := r.Byte("version")
	if version != spansCodecVersion && version != spansCodecSampled {
		return dst, fmt.Errorf("%w: not a span list", ErrCorruptTrace)
	}
	nNames := r.count(1, "names")
	table := make([]string, 0, nNames)
	table = r.Names(table, nNames, intern)
	n := r.count(45, "spans")
	base := r.Varint("base")
	for i := 0; i < n && r.Err == nil; i++ {
		if len(r.B) < 36 {
			r.Fail("span")
			break
		}
		var s Span
		copy(s.TraceID[:], r.B)
		copy(s.SpanID[:], r.B[16:])
		copy(s.ParentID[:], r.B[24:])
		s.Kind, s.Claim, s.FailOpen = Kind(r.B[32]), Claim(r.B[33]&3), Tri(r.B[34]%3)
		f := r.B[35]
		s.Failed, s.HasResend, s.CriteriaSatisfied, s.Suppressed = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0
		if version == spansCodecSampled {
			s.Sampling = Sampling(f>>4) & 3
		}
		r.B = r.B[36:]
		s.Service = r.Str(table, "service")
		s.Version = r.Str(table, "version")
		s.Name = r.Str(table, "name")
		s.Operation = r.Str(table, "operation")
		s.Peer = r.Str(table, "peer")
		s.Start = base + r.Varint("start")
		s.End = s.Start + r.Varint("duration")
		s.Resend = int32(r.Varint("resend"))
		s.StatusCode = int32(r.Varint("status"))
		if len(r.B) < 8 {
			r.Fail("target")
			break
		}
		s.Target = binary.LittleEndian.Uint64(r.B)
		r.B = r.B[8:]
		switch s.Sampling {
		case SamplingRecorded, SamplingConfigured:
			if len(r.B) < 8 {
				r.Fail("adjusted count")
				break
			}
			a := math.Float64frombits(binary.LittleEndian.Uint64(r.B))
			r.B = r.B[8:]
			if !(a >= 1) || math.IsInf(a, 0) {
				// Not what an encoder writes: the span keeps it as unusable.
				s.Sampling, a = SamplingInvalid, 1
			}
			s.AdjustedCount = a
		case SamplingInvalid:
			s.AdjustedCount = 1
		}
		dst = append(dst, s)
	}
	if r.Err != nil {
		return dst, r.Err
	}
	if len(r.B) != 0 {
		return dst, fmt.Errorf("%w: %d trailing bytes", ErrCorruptTrace, len(r.B))
	}
	return dst, nil
}
