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
type Grouper struct {
	chunks [][]Span
	of     [][]int32 // trace index of every span, chunked like chunks
	index  map[TraceID]int32
	ids    []TraceID
	counts []int
	n      int
}

// Add copies spans into the grouper.
func (g *Grouper) Add(spans []Span) {
	if g.index == nil {
		g.index = make(map[TraceID]int32, 1024)
	}
	for len(spans) > 0 {
		if len(g.chunks) == 0 || len(g.chunks[len(g.chunks)-1]) == groupChunk {
			g.chunks = append(g.chunks, make([]Span, 0, groupChunk))
			g.of = append(g.of, make([]int32, 0, groupChunk))
		}
		last := len(g.chunks) - 1
		room := groupChunk - len(g.chunks[last])
		part := spans[:min(room, len(spans))]
		spans = spans[len(part):]
		g.chunks[last] = append(g.chunks[last], part...)
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

// Traces returns the spans grouped by trace, ordered by trace id, in one
// new backing array, and empties the grouper.
func (g *Grouper) Traces() [][]Span {
	if g.n == 0 {
		return nil
	}
	order := make([]int32, len(g.ids))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return bytes.Compare(g.ids[x][:], g.ids[y][:]) })
	off := make([]int, len(g.ids)) // start offset by trace index
	pos := 0
	for _, t := range order {
		off[t] = pos
		pos += g.counts[t]
	}
	out := make([]Span, g.n)
	groups := make([][]Span, len(order))
	for r, t := range order {
		start := off[t]
		groups[r] = out[start : start+g.counts[t] : start+g.counts[t]]
	}
	for c, chunk := range g.chunks {
		of := g.of[c]
		for i := range chunk {
			t := of[i]
			out[off[t]] = chunk[i]
			off[t]++
		}
		g.chunks[c], g.of[c] = nil, nil // let the chunk go as soon as it is copied
	}
	*g = Grouper{}
	return groups
}

// GroupTraces splits spans into one slice per trace id, ordered by trace
// id. The returned slices share one new backing array; spans is not
// modified.
func GroupTraces(spans []Span) [][]Span {
	var g Grouper
	g.Add(spans)
	return g.Traces()
}
