package radius

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// The three request tables of docs/SPEC.md §4.7 / the seed, chain A→…→G, D fails,
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

// Bad inputs are errors that name what is wrong; none says "whatif:",
// which the command line already does.
func TestWhatIfRejectsBadInputs(t *testing.T) {
	chain := func() *Model { return ChainModel([]string{"A", "B"}) }
	ok := Scenario{Failing: []bool{false, true}, Retries: 1, Budget: 0.1}
	tests := []struct {
		name string
		m    func() *Model
		s    func(Scenario) Scenario
		want string
	}{
		{"retries NaN", chain, func(s Scenario) Scenario { s.Retries = math.NaN(); return s }, "retries per hop R = NaN"},
		{"retries +Inf", chain, func(s Scenario) Scenario { s.Retries = math.Inf(1); return s }, "retries per hop R = +Inf"},
		{"retries negative", chain, func(s Scenario) Scenario { s.Retries = -1; return s }, "retries per hop R = -1"},
		{"budget NaN", chain, func(s Scenario) Scenario { s.Budget = math.NaN(); return s }, "retry budget B = NaN"},
		{"budget negative", chain, func(s Scenario) Scenario { s.Budget = -0.1; return s }, "retry budget B = -0.1"},
		{"budget above 1", chain, func(s Scenario) Scenario { s.Budget = 5; return s }, "retry budget B = 5"},
		{"budget +Inf under naive", chain, func(s Scenario) Scenario { s.Budget = math.Inf(1); return s }, "retry budget B = +Inf"},
		{"failing flags", chain, func(s Scenario) Scenario { s.Failing = []bool{true}; return s }, "1 failing flags for 2 nodes"},
		{"root", func() *Model { m := chain(); m.Root = 2; return m }, nil, "root 2 out of range"},
		{"edge calls NaN", func() *Model { m := chain(); m.Edges[0].Calls = math.NaN(); return m }, nil, "edge A → B: calls per request NaN"},
		{"edge calls negative", func() *Model { m := chain(); m.Edges[0].Calls = -2; return m }, nil, "edge A → B: calls per request -2"},
		{"edge retries -Inf", func() *Model { m := chain(); m.Edges[0].Retries = math.Inf(-1); return m }, nil, "edge A → B: retries -Inf"},
		{"edge out of range", func() *Model { m := chain(); m.Edges[0].To = 7; return m }, nil, "edge 0 (0 → 7) out of range"},
	}
	for _, tc := range tests {
		s := ok
		if tc.s != nil {
			s = tc.s(ok)
		}
		_, err := tc.m().Requests(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "whatif") {
			t.Errorf("%s: error %v, want one containing %q (and not \"whatif\")", tc.name, err, tc.want)
		}
	}
	if _, err := chain().Requests(ok); err != nil {
		t.Errorf("valid scenario: %v", err)
	}
}

// chainNames returns n0, n1, …, n(k-1).
func chainNames(k int) []string {
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	return names
}

// A chain of 201 nodes (200 levels) failing at its leaf, naive, R = 1000:
// node i serves 1001^i. log10(1001) = 3.000434, so 1001^102 ≈ 1.1e306
// fits in a float64 (max ≈ 1.8e308) and 1001^103 ≈ 1.1e309 does not: the
// error names n103, the highest node to overflow.
func TestWhatIfOverflow(t *testing.T) {
	names := chainNames(201)
	failing := make([]bool, len(names))
	failing[200] = true
	_, err := ChainModel(names).Requests(Scenario{Failing: failing, Retries: 1000, Policy: Naive})
	if !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), `at "n103"`) || !strings.Contains(err.Error(), "1.8e+308") {
		t.Fatalf("error %v, want ErrOverflow at n103, saying 1.8e+308", err)
	}
	// 102 levels: the leaf serves 1001^102, finite. Rounding to 9 decimal
	// places must not overflow it (1001^102 × 1e9 would) nor move it.
	names = chainNames(103)
	failing = make([]bool, len(names))
	failing[102] = true
	req, err := ChainModel(names).Requests(Scenario{Failing: failing, Retries: 1000, Policy: Naive})
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Pow(1001, 102); math.Abs(req[102]-want) > 1e-12*want {
		t.Errorf("leaf %v, want 1001^102 = %v", req[102], want)
	}
	// R = 1 over 200 levels: 2^200 at the leaf, exactly (powers of two are
	// exact in a float64).
	names = chainNames(201)
	failing = make([]bool, len(names))
	failing[200] = true
	req, err = ChainModel(names).Requests(Scenario{Failing: failing, Retries: 1, Policy: Naive})
	if err != nil || req[200] != math.Ldexp(1, 200) || req[1] != 2 {
		t.Errorf("R = 1: leaf %v, n1 %v, err %v; want 2^200 and 2", req[200], req[1], err)
	}
}

// Kept: r → a → b, b → a closes a cycle (a is on the walk), c → a is out
// of a node the root never reaches. Requests: r 1, a 1, b 1, c 0.
func TestWhatIfKept(t *testing.T) {
	m := &Model{Nodes: []string{"r", "a", "b", "c"}, Edges: []ModelEdge{
		{From: 0, To: 1, Retries: -1}, {From: 1, To: 2, Retries: -1}, {From: 2, To: 1, Retries: -1}, {From: 3, To: 1, Retries: -1},
	}}
	kept, err := m.Kept()
	if err != nil || fmt.Sprint(kept) != "[true true false false]" {
		t.Errorf("kept %v err %v, want [true true false false]", kept, err)
	}
	req, err := m.Requests(Scenario{Failing: make([]bool, 4), Retries: 1})
	if err != nil || fmt.Sprint(req) != "[1 1 1 0]" {
		t.Errorf("requests %v err %v, want [1 1 1 0]", req, err)
	}
}

// The availability table of docs/SPEC.md §4.7 / the seed (budget 10%).
func TestErrorRateAfterRetries(t *testing.T) {
	for _, c := range []struct{ p, want float64 }{
		{0.001, 0.000001}, {0.01, 0.0001}, {0.05, 0.0025}, {0.10, 0.01}, {0.20, 0.12}, {0.30, 0.23},
	} {
		if got := ErrorRateAfterRetries(c.p, 0.1); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("p=%v: %v, want %v", c.p, got, c.want)
		}
	}
}

// Coincidental errors of docs/SPEC.md §4.7: two fail-open dependencies at 10%
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
