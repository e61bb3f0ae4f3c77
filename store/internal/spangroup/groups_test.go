package spangroup

import (
	"slices"
	"testing"

	"github.com/stormradius/stormradius/graph"
)

// TraceGroups: every span once, a trace's spans together in arrival
// order, traces in order of first arrival; reused for a smaller write.
func TestTraceGroups(t *testing.T) {
	sp := func(trace, span byte) graph.Span {
		return graph.Span{TraceID: graph.TraceID{trace}, SpanID: graph.SpanID{span}}
	}
	var g TraceGroups
	spans := []graph.Span{sp(3, 1), sp(1, 2), sp(3, 3), sp(2, 4), sp(1, 5), sp(3, 6)}
	g.Group(spans)
	// By hand: trace 3 (spans 0, 2, 5), trace 1 (1, 4), trace 2 (3).
	if want := []int32{0, 2, 5, 1, 4, 3}; !slices.Equal(g.Order, want) {
		t.Fatalf("order %v, want %v", g.Order, want)
	}
	if want := []int32{3, 5, 6}; !slices.Equal(g.Ends, want) {
		t.Fatalf("ends %v, want %v", g.Ends, want)
	}
	for k, want := range [][]graph.Span{{sp(3, 1), sp(3, 3), sp(3, 6)}, {sp(1, 2), sp(1, 5)}, {sp(2, 4)}} {
		if got := g.Trace(k, spans, nil); !slices.Equal(got, want) {
			t.Fatalf("trace %d: %v, want %v", k, got, want)
		}
		if first := spans[g.First(k)]; first != want[0] {
			t.Fatalf("trace %d starts with %v, want %v", k, first, want[0])
		}
	}
	for k, want := range [][]int32{{0, 2, 5}, {1, 4}, {3}} {
		if got := g.Indexes(k); !slices.Equal(got, want) {
			t.Fatalf("trace %d: indexes %v, want %v", k, got, want)
		}
	}
	g.Group(spans[3:5])
	if !slices.Equal(g.Order, []int32{0, 1}) || !slices.Equal(g.Ends, []int32{1, 2}) {
		t.Fatalf("reused: order %v ends %v", g.Order, g.Ends)
	}
	g.Group(nil)
	if len(g.Order) != 0 || len(g.Ends) != 0 {
		t.Fatalf("empty: order %v ends %v", g.Order, g.Ends)
	}
}
