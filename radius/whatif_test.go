package radius

import (
	"math"
	"testing"
)

// The three request tables of SPEC §4.7 / the seed, chain A→…→G, D fails,
// R = 1.
func TestWhatIfSeedTables(t *testing.T) {
	names := []string{"A", "B", "C", "D", "E", "F", "G"}
	failing := []bool{false, false, false, true, false, false, false}
	tests := []struct {
		policy Policy
		budget float64
		want   []float64
	}{
		{Naive, 0.1, []float64{1, 2, 4, 8, 8, 8, 8}},
		{Budget, 0.1, []float64{1, 1.1, 1.21, 1.331, 1.331, 1.331, 1.331}},
		{Ownership, 0.1, []float64{1, 1, 1, 1.1, 1.1, 1.1, 1.1}},
	}
	for _, tc := range tests {
		got, err := ChainModel(names).Requests(Scenario{Failing: failing, Retries: 1, Budget: tc.budget, Policy: tc.policy})
		if err != nil {
			t.Fatal(err)
		}
		for i := range names {
			if got[i] != tc.want[i] {
				t.Errorf("%v: %s = %v, want %v", tc.policy, names[i], got[i], tc.want[i])
			}
		}
	}
}

// R^depth: naive with R = 2 over a 4-chain failing at the leaf gives
// 1, 3, 9, 27.
func TestWhatIfNaiveFormula(t *testing.T) {
	got, err := ChainModel([]string{"a", "b", "c", "d"}).Requests(Scenario{Failing: []bool{false, false, false, true}, Retries: 2, Policy: Naive})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []float64{1, 3, 9, 27} {
		if got[i] != w {
			t.Errorf("node %d = %v, want %v", i, got[i], w)
		}
	}
}

// A graph: root r calls a twice per request and b once over a fail-open
// edge; a and b both call d, which fails. Under naive R=1 every edge into a
// failing node retries: d fails, so a and b fail (their edges to d are
// fail-close); r absorbs b's failure but still retries it. r serves 1;
// a: 2 calls × 2 = 4; b: 1 × 2 = 2; d: 4 × 2 + 2 × 2 = 12.
func TestWhatIfGraph(t *testing.T) {
	m := &Model{Nodes: []string{"r", "a", "b", "d"}, Edges: []ModelEdge{
		{From: 0, To: 1, Calls: 2, Retries: -1},
		{From: 0, To: 2, Retries: -1, FailOpen: true},
		{From: 1, To: 3, Retries: -1},
		{From: 2, To: 3, Retries: -1},
	}}
	got, err := m.Requests(Scenario{Failing: []bool{false, false, false, true}, Retries: 1, Policy: Naive})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []float64{1, 4, 2, 12} {
		if got[i] != w {
			t.Errorf("%s = %v, want %v", m.Nodes[i], got[i], w)
		}
	}
	// Ownership with B = 1 (no budget bite): only edges into d retry:
	// a = 2, b = 1, d = 2×2 + 1×2 = 6.
	got, _ = m.Requests(Scenario{Failing: []bool{false, false, false, true}, Retries: 1, Budget: 1, Policy: Ownership})
	for i, w := range []float64{1, 2, 1, 6} {
		if got[i] != w {
			t.Errorf("ownership %s = %v, want %v", m.Nodes[i], got[i], w)
		}
	}
	// A cycle back to the root is ignored rather than looping.
	m.Edges = append(m.Edges, ModelEdge{From: 3, To: 0, Retries: -1})
	if _, err := m.Requests(Scenario{Failing: []bool{false, false, false, true}, Retries: 1}); err != nil {
		t.Fatal(err)
	}
}

// The availability table of SPEC §4.7 / the seed (budget 10%).
func TestErrorRateAfterRetries(t *testing.T) {
	for _, c := range []struct{ p, want float64 }{
		{0.001, 0.000001}, {0.01, 0.0001}, {0.05, 0.0025}, {0.10, 0.01}, {0.20, 0.12}, {0.30, 0.23},
	} {
		if got := ErrorRateAfterRetries(c.p, 0.1); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("p=%v: %v, want %v", c.p, got, c.want)
		}
	}
}

// Coincidental errors of SPEC §4.7: two fail-open dependencies at 10%
// misattribute 19% (1.9 of 10 errors); at 2%, 3.96%.
func TestNaiveMisattribution(t *testing.T) {
	if got := NaiveMisattribution(0.1, 0.1); math.Abs(got-0.19) > 1e-12 || math.Abs(10*got-1.9) > 1e-12 {
		t.Errorf("two at 10%%: %v", got)
	}
	if got := NaiveMisattribution(0.02, 0.02); math.Abs(got-0.0396) > 1e-12 {
		t.Errorf("two at 2%%: %v", got)
	}
	if got := NaiveMisattribution(); got != 0 {
		t.Errorf("none: %v", got)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, s := range []string{"naive", "Budget", "OWNERSHIP"} {
		if _, err := ParsePolicy(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParsePolicy("yolo"); err == nil {
		t.Error("want error")
	}
}
