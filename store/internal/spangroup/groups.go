// Package spangroup groups the spans of a write by trace and drops spans
// read back twice: what the stores that keep a row per trace per write
// (store/sqlite, store/clickhouse) share.
package spangroup

import (
	"slices"

	"github.com/stormradius/stormradius/graph"
)

// TraceGroups groups the spans of a write by trace, for stores that keep
// a row per trace per write: a map and a counting pass, no sort. The zero
// value is ready; it is reused from write to write.
type TraceGroups struct {
	// Order holds the indexes of the spans grouped by trace: traces in
	// order of first arrival, spans in arrival order within one. Ends[g]
	// is where group g ends in Order.
	Order, Ends []int32
	ids         map[graph.TraceID]int32
	gid         []int32
}

// Group groups spans.
func (g *TraceGroups) Group(spans []graph.Span) {
	if g.ids == nil || len(g.ids) > 1<<14 {
		g.ids = make(map[graph.TraceID]int32, min(len(spans), 1<<14)) // not a huge table to clear each time
	} else {
		clear(g.ids)
	}
	g.gid, g.Ends = g.gid[:0], g.Ends[:0]
	for i := range spans {
		k, ok := g.ids[spans[i].TraceID]
		if !ok {
			k = int32(len(g.Ends))
			g.ids[spans[i].TraceID] = k
			g.Ends = append(g.Ends, 0)
		}
		g.Ends[k]++
		g.gid = append(g.gid, k)
	}
	// Counts to starts (in Ends, moved on as spans are placed: ends).
	at := int32(0)
	for k, n := range g.Ends {
		g.Ends[k], at = at, at+n
	}
	g.Order = slices.Grow(g.Order[:0], len(spans))[:len(spans)]
	for i, k := range g.gid {
		g.Order[g.Ends[k]] = int32(i)
		g.Ends[k]++
	}
}

// First returns the index in spans of group k's first span.
func (g *TraceGroups) First(k int) int {
	return int(g.Order[g.start(k)])
}

// Trace appends the spans of group k (in arrival order) to dst.
func (g *TraceGroups) Trace(k int, spans, dst []graph.Span) []graph.Span {
	for _, i := range g.Order[g.start(k):g.Ends[k]] {
		dst = append(dst, spans[i])
	}
	return dst
}

// Indexes returns the indexes in spans of group k's spans (in arrival
// order): a view of Order.
func (g *TraceGroups) Indexes(k int) []int32 {
	return g.Order[g.start(k):g.Ends[k]]
}

// start returns where group k starts in Order.
func (g *TraceGroups) start(k int) int32 {
	if k == 0 {
		return 0
	}
	return g.Ends[k-1]
}
