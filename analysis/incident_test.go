package analysis_test

import (
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// docs/SPEC.md §4.8 on hand-made minutes. X: 100 requests a minute; owned 4 at
// minute 0 (4%: not hot), 10 at 1 (10%: hot), 9 at 2 (9 < 10 owned: not
// hot), 20 at 3 (hot), none at 4–8 (five quiet minutes: the incident of
// 1–3 closes), 30 at 9 (hot: a new incident). Y: 50 requests and 10 owned
// at minute 2 (20%, 10 owned: hot). Z: 40 of 1000 (4%) never is. As of
// minute 12, X's second incident (last hot minute 9, two quiet minutes
// since) is open; the others closed.
func TestDetectIncidents(t *testing.T) {
	X, Y, Z := graph.Node{Service: "x", Operation: "op"}, graph.Node{Service: "y", Operation: "op"}, graph.Node{Service: "z", Operation: "op"}
	minutes := map[int64]map[graph.Node]analysis.NodeAgg{}
	set := func(m int64, n graph.Node, req, owned int64) {
		if minutes[m] == nil {
			minutes[m] = map[graph.Node]analysis.NodeAgg{}
		}
		minutes[m][n] = analysis.NodeAgg{Requests: req, Owned: owned}
	}
	for m, owned := range []int64{4, 10, 9, 20, 0, 0, 0, 0, 0, 30} {
		set(int64(m), X, 100, owned)
		set(int64(m), Z, 1000, 40)
	}
	set(2, Y, 50, 10)
	got := analysis.DetectIncidents(minutes, 12, analysis.IncidentRules{})
	want := []analysis.IncidentSpan{
		{Owner: X, First: 1, Last: 3, Open: false, PeakRate: 0.2},
		{Owner: Y, First: 2, Last: 2, Open: false, PeakRate: 0.2},
		{Owner: X, First: 9, Last: 9, Open: true, PeakRate: 0.3},
	}
	if len(got) != len(want) {
		t.Fatalf("%d incidents, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("incident %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// Minute 8 hot too: only four quiet minutes (4–7) between 3 and 8, so
	// X has one incident, 1–9, open.
	set(8, X, 100, 50)
	got = analysis.DetectIncidents(minutes, 12, analysis.IncidentRules{})
	if len(got) != 2 || got[0].Owner != X || got[0].First != 1 || got[0].Last != 9 || !got[0].Open || got[0].PeakRate != 0.5 {
		t.Errorf("with minute 8 hot: %+v", got)
	}
	if got[0].ID() == got[1].ID() || got[0].ID() != (analysis.IncidentSpan{Owner: X, First: 1, Last: 3}).ID() {
		t.Errorf("ids are not (owner, first minute)")
	}
}
