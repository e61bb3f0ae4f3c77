package graph

import (
	"bytes"
	"slices"
)

// GroupTraces splits spans into one slice per trace id, ordered by trace
// id. The returned slices share one new backing array; spans is not
// modified.
func GroupTraces(spans []Span) [][]Span {
	if len(spans) == 0 {
		return nil
	}
	index := make(map[TraceID]int32, len(spans)/8+1)
	ids := make([]TraceID, 0, len(spans)/8+1)
	of := make([]int32, len(spans))
	for i := range spans {
		t, ok := index[spans[i].TraceID]
		if !ok {
			t = int32(len(ids))
			index[spans[i].TraceID] = t
			ids = append(ids, spans[i].TraceID)
		}
		of[i] = t
	}
	// Rank traces by id so that output order does not depend on input order.
	order := make([]int32, len(ids))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return bytes.Compare(ids[x][:], ids[y][:]) })
	rank := make([]int32, len(ids))
	for r, t := range order {
		rank[t] = int32(r)
	}
	off := make([]int, len(ids)+1)
	for _, t := range of {
		off[rank[t]+1]++
	}
	for i := 1; i < len(off); i++ {
		off[i] += off[i-1]
	}
	out := make([]Span, len(spans))
	fill := slices.Clone(off[:len(ids)])
	for i, t := range of {
		r := rank[t]
		out[fill[r]] = spans[i]
		fill[r]++
	}
	groups := make([][]Span, len(ids))
	for r := range groups {
		groups[r] = out[off[r]:off[r+1]:off[r+1]]
	}
	return groups
}
