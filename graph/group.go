package graph

import (
	"bytes"
	"slices"
)

// groupChunk is how many spans a Grouper stores per chunk: chunks are
// never regrown, so adding spans copies each span once.
const groupChunk = 1 << 14

// Grouper collects spans of many traces, in any order, and splits them by
// trace id. The zero value is ready to use; it is not safe for concurrent
// use.
//
// While it collects, it holds spans packed without pointers (names become
// indexes into a table of distinct names): a batch of millions of spans is
// then a heap the garbage collector does not scan, which matters while
// pdata decoding churns out garbage around it.
type Grouper struct {
	chunks [][]packedSpan
	of     [][]int32 // trace index of every span, chunked like chunks
	index  map[TraceID]int32
	ids    []TraceID
	counts []int
	n      int

	names nameTable
}

// packedSpan is a Span without pointers.
type packedSpan struct {
	TraceID                                 TraceID
	SpanID, ParentID                        SpanID
	Start, End                              int64
	Target                                  uint64
	service, version, name, operation, peer uint32
	Resend, StatusCode                      int32
	Kind                                    Kind
	Claim                                   Claim
	FailOpen                                Tri
	Failed, HasResend, Criteria, Suppressed bool
	Sampling                                Sampling
	AdjustedCount                           float64
}

func (g *Grouper) pack(s *Span) packedSpan {
	return packedSpan{
		TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentID,
		Start: s.Start, End: s.End, Target: s.Target,
		service: g.names.of(s.Service), version: g.names.of(s.Version), name: g.names.of(s.Name),
		operation: g.names.of(s.Operation), peer: g.names.of(s.Peer),
		Resend: s.Resend, StatusCode: s.StatusCode, Kind: s.Kind, Claim: s.Claim, FailOpen: s.FailOpen,
		Failed: s.Failed, HasResend: s.HasResend, Criteria: s.CriteriaSatisfied, Suppressed: s.Suppressed,
		Sampling: s.Sampling, AdjustedCount: s.AdjustedCount,
	}
}

// Add copies spans into the grouper.
func (g *Grouper) Add(spans []Span) {
	if g.index == nil {
		g.index = make(map[TraceID]int32, 1024)
		g.names.reset(groupNameCache)
	}
	for len(spans) > 0 {
		if len(g.chunks) == 0 || len(g.chunks[len(g.chunks)-1]) == groupChunk {
			g.chunks = append(g.chunks, make([]packedSpan, 0, groupChunk))
			g.of = append(g.of, make([]int32, 0, groupChunk))
		}
		last := len(g.chunks) - 1
		room := groupChunk - len(g.chunks[last])
		part := spans[:min(room, len(spans))]
		spans = spans[len(part):]
		chunk := g.chunks[last]
		for i := range part {
			chunk = append(chunk, g.pack(&part[i]))
		}
		g.chunks[last] = chunk
		of := g.of[last]
		var prevID TraceID
		prev := int32(-1)
		for i := range part {
			id := part[i].TraceID
			if prev < 0 || id != prevID {
				t, ok := g.index[id]
				if !ok {
					t = int32(len(g.ids))
					g.index[id] = t
					g.ids = append(g.ids, id)
					g.counts = append(g.counts, 0)
				}
				prev, prevID = t, id
			}
			g.counts[prev]++
			of = append(of, prev)
		}
		g.of[last] = of
		g.n += len(part)
	}
}

// Len returns the number of spans added.
func (g *Grouper) Len() int { return g.n }

// Source is a set of traces whose spans are handed out one trace at a time,
// so that a batch need not hold every trace unpacked at once.
type Source interface {
	// Len returns the number of traces.
	Len() int
	// Spans returns the spans of trace i, in buf (grown as needed); the
	// caller owns them until it passes buf again.
	Spans(i int, buf []Span) []Span
}

// Lists is a Source over one slice of spans per trace. Spans copies, so
// the lists are never modified.
type Lists [][]Span

// Len returns the number of traces.
func (l Lists) Len() int { return len(l) }

// Spans returns a copy of trace i's spans in buf.
func (l Lists) Spans(i int, buf []Span) []Span { return append(buf[:0], l[i]...) }

// View returns the spans of trace i themselves, to be read, not modified
// or kept (Viewer).
func (l Lists) View(i int) []Span { return l[i] }

// Viewer is a Source that can lend a trace's spans without copying them,
// to be read, not modified or kept.
type Viewer interface {
	View(i int) []Span
}

// Grouped is the result of a Grouper: spans by trace, ordered by trace id,
// still packed. It is a Source.
type Grouped struct {
	spans []packedSpan
	off   []int // trace i is spans[off[i]:off[i+1]]
	names []string
}

// Group returns the spans added, grouped by trace and ordered by trace id,
// and empties the grouper.
func (g *Grouper) Group() *Grouped {
	order := make([]int32, len(g.ids))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return bytes.Compare(g.ids[x][:], g.ids[y][:]) })
	out := &Grouped{spans: make([]packedSpan, g.n), off: make([]int, len(order)+1), names: g.names.table}
	pos := make([]int, len(g.ids)) // next slot by trace index
	next := 0
	for r, t := range order {
		out.off[r], pos[t] = next, next
		next += g.counts[t]
	}
	out.off[len(order)] = next
	for c, chunk := range g.chunks {
		of := g.of[c]
		for i := range chunk {
			t := of[i]
			out.spans[pos[t]] = chunk[i]
			pos[t]++
		}
		g.chunks[c], g.of[c] = nil, nil // let the chunk go as soon as it is copied
	}
	*g = Grouper{}
	return out
}

// Len returns the number of traces.
func (g *Grouped) Len() int { return len(g.off) - 1 }

// Spans unpacks the spans of trace i into buf.
func (g *Grouped) Spans(i int, buf []Span) []Span {
	part := g.spans[g.off[i]:g.off[i+1]]
	buf = slices.Grow(buf[:0], len(part))[:len(part)]
	for k := range part {
		g.unpack(&part[k], &buf[k])
	}
	return buf
}

// All returns every trace's spans, unpacked into one new array.
func (g *Grouped) All() [][]Span {
	if g.Len() <= 0 {
		return nil
	}
	all := make([]Span, len(g.spans))
	for k := range g.spans {
		g.unpack(&g.spans[k], &all[k])
	}
	out := make([][]Span, g.Len())
	for i := range out {
		out[i] = all[g.off[i]:g.off[i+1]:g.off[i+1]]
	}
	return out
}

func (g *Grouped) unpack(p *packedSpan, s *Span) {
	*s = Span{
		TraceID: p.TraceID, SpanID: p.SpanID, ParentID: p.ParentID, Kind: p.Kind,
		Service: g.names[p.service], Version: g.names[p.version], Name: g.names[p.name],
		Operation: g.names[p.operation], Peer: g.names[p.peer],
		Start: p.Start, End: p.End, Failed: p.Failed, Claim: p.Claim,
		HasResend: p.HasResend, Resend: p.Resend, CriteriaSatisfied: p.Criteria, Suppressed: p.Suppressed,
		FailOpen: p.FailOpen, Target: p.Target, StatusCode: p.StatusCode,
		Sampling: p.Sampling, AdjustedCount: p.AdjustedCount,
	}
}

// Traces returns the spans grouped by trace, ordered by trace id, in one
// new backing array, and empties the grouper.
func (g *Grouper) Traces() [][]Span { return g.Group().All() }

// GroupTraces splits spans into one slice per trace id, ordered by trace
// id. The returned slices share one new backing array; spans is not
// modified.
func GroupTraces(spans []Span) [][]Span {
	var g Grouper
	g.Add(spans)
	return g.Traces()
}
