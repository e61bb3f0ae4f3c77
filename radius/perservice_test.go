package radius

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func wantRequests(t *testing.T, label string, m *Model, s Scenario, want []float64) {
	t.Helper()
	got, err := m.Requests(s)
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: %s = %v, want %v", label, m.Nodes[i], got[i], want[i])
		}
	}
}

// The seed's chain A→…→G failing at D, R = 1, B = 0.1, per service: none
// adopted (nobody speaks the protocol) is the naive table, every service
// adopted the ownership table.
func TestPerServiceSeedTables(t *testing.T) {
	m := ChainModel([]string{"A", "B", "C", "D", "E", "F", "G"})
	failing := []bool{false, false, false, true, false, false, false}
	none := make([]bool, 7)
	all := []bool{true, true, true, true, true, true, true}
	wantRequests(t, "none adopted", m, Scenario{Failing: failing, Retries: 1, Budget: 0.1, Adopted: none}, []float64{1, 2, 4, 8, 8, 8, 8})
	wantRequests(t, "all adopted", m, Scenario{Failing: failing, Retries: 1, Budget: 0.1, Adopted: all}, []float64{1, 1, 1, 1.1, 1.1, 1.1, 1.1})
	// R^d·N and (1+B)^d·N: with R = 2 over the same chain none adopted
	// gives 3³ = 27 at D; B = 0.5, all adopted, 1.5.
	wantRequests(t, "none, R=2", m, Scenario{Failing: failing, Retries: 2, Budget: 0.5, Adopted: none}, []float64{1, 3, 9, 27, 27, 27, 27})
	wantRequests(t, "all, R=2, B=0.5", m, Scenario{Failing: failing, Retries: 2, Budget: 0.5, Adopted: all}, []float64{1, 1, 1, 1.5, 1.5, 1.5, 1.5})
}

// A caller stops retrying only an unclaimed answer from a callee that
// sends one: on A→B→C→D failing at D (R = 1, B = 1: the budget does not
// bite), adopting C alone or B alone changes nothing (8 at D); B and C
// together stop B's retries of C (4); and B, C and A stop A's too (2).
func TestPerServiceOnlyTogether(t *testing.T) {
	m := ChainModel([]string{"A", "B", "C", "D"})
	failing := []bool{false, false, false, true}
	for _, tc := range []struct {
		adopted []bool
		want    []float64
	}{
		{[]bool{false, false, true, false}, []float64{1, 2, 4, 8}},
		{[]bool{false, true, false, false}, []float64{1, 2, 4, 8}},
		{[]bool{false, true, true, false}, []float64{1, 2, 2, 4}},
		{[]bool{true, true, true, false}, []float64{1, 1, 1, 2}},
	} {
		wantRequests(t, "adopted "+flags(m, tc.adopted), m, Scenario{Failing: failing, Retries: 1, Budget: 1, Adopted: tc.adopted}, tc.want)
	}
}

func flags(m *Model, b []bool) string {
	var s []string
	for i, x := range b {
		if x {
			s = append(s, m.Nodes[i])
		}
	}
	return "{" + strings.Join(s, ",") + "}"
}

// One service without the middleware breaks an owned chain: A→B→C→D→E
// failing at E, every service adopted but C (R = 1, B = 0.1). D retries E
// within the budget (1.1); C retries D's unclaimed answer in full (2);
// B retries C, which sends no claim, within the budget (1.1); A honours
// B's unclaimed answer (1). E serves 1.1 × 2 × 1.1 = 2.42.
func TestPerServiceLegacyBreaksChain(t *testing.T) {
	m := ChainModel([]string{"A", "B", "C", "D", "E"})
	failing := []bool{false, false, false, false, true}
	wantRequests(t, "all but C", m, Scenario{Failing: failing, Retries: 1, Budget: 0.1, Adopted: []bool{true, true, false, true, true}},
		[]float64{1, 1, 1.1, 2.2, 2.42})
}

// A service that already claims and honours (the middleware, seen in its
// spans) is modelled as it is: on A→B→C→D failing at D, C speaks the
// protocol: it retries D within B = 0.1 (1.1) and answers B unclaimed, but
// B does not honour it (2), nor A B's missing claim (2): D serves 4.4.
// Adopting B alone stops B's retries (2.2 at D).
func TestPerServiceAlreadyClaims(t *testing.T) {
	m := ChainModel([]string{"A", "B", "C", "D"})
	m.Speaks = []Speaks{{}, {}, {Claims: true, Honours: true}, {}}
	failing := []bool{false, false, false, true}
	wantRequests(t, "none adopted", m, Scenario{Failing: failing, Retries: 1, Budget: 0.1, Adopted: make([]bool, 4)}, []float64{1, 2, 4, 4.4})
	wantRequests(t, "B adopted", m, Scenario{Failing: failing, Retries: 1, Budget: 0.1, Adopted: []bool{false, true, false, false}}, []float64{1, 2, 2, 2.2})
}

// Services group nodes: "s op1" and "s op2" adopt together. Fan-out and a
// fail-open edge: root r calls a (service s) twice per request and b
// (service s too) over a fail-open edge once; both call d, which fails.
// None adopted (R = 1): r→a retries (a fails), r→b retries (b fails, r
// absorbs it): a = 4, b = 2, d = 4·2 + 2·2 = 12. Adopting s and r: a and b
// answer unclaimed, r honours: a = 2, b = 1; they retry d within B = 1:
// d = 2·2 + 1·2 = 6.
func TestPerServiceGroupsAndFailOpen(t *testing.T) {
	m := &Model{Nodes: []string{"r", "s op1", "s op2", "d"}, Service: []int{0, 1, 1, 2}, Edges: []ModelEdge{
		{From: 0, To: 1, Calls: 2, Retries: -1},
		{From: 0, To: 2, Retries: -1, FailOpen: true},
		{From: 1, To: 3, Retries: -1},
		{From: 2, To: 3, Retries: -1},
	}}
	failing := []bool{false, false, false, true}
	wantRequests(t, "none", m, Scenario{Failing: failing, Retries: 1, Budget: 1, Adopted: make([]bool, 3)}, []float64{1, 4, 2, 12})
	wantRequests(t, "r and s", m, Scenario{Failing: failing, Retries: 1, Budget: 1, Adopted: []bool{true, true, false}}, []float64{1, 2, 1, 6})
}

// On any graph, every service adopted is the ownership policy and none
// adopted (nobody speaking the protocol) the naive one.
func TestPerServiceEqualsPolicies(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	for trial := range 300 {
		n := 2 + rng.IntN(9)
		m := &Model{}
		for i := range n {
			m.Nodes = append(m.Nodes, string(rune('a'+i)))
		}
		for range rng.IntN(3 * n) {
			e := ModelEdge{From: rng.IntN(n), To: rng.IntN(n), Calls: float64(rng.IntN(3)), Retries: float64(rng.IntN(4) - 1), FailOpen: rng.IntN(4) == 0}
			m.Edges = append(m.Edges, e)
		}
		failing := make([]bool, n)
		failing[rng.IntN(n)] = true
		if rng.IntN(3) == 0 {
			failing[rng.IntN(n)] = true
		}
		all := make([]bool, n)
		for i := range all {
			all[i] = true
		}
		b := float64(rng.IntN(11)) / 10
		for _, tc := range []struct {
			adopted []bool
			policy  Policy
		}{{make([]bool, n), Naive}, {all, Ownership}} {
			want, err := m.Requests(Scenario{Failing: failing, Retries: 1, Budget: b, Policy: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Requests(Scenario{Failing: failing, Retries: 1, Budget: b, Adopted: tc.adopted, Policy: Budget})
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("trial %d, %v: %s = %v per service, %v by policy (%+v, failing %v)", trial, tc.policy, m.Nodes[i], got[i], want[i], m.Edges, failing)
				}
			}
		}
	}
}

func TestPerServiceErrors(t *testing.T) {
	m := ChainModel([]string{"A", "B"})
	for _, tc := range []struct {
		m    *Model
		s    Scenario
		want string
	}{
		{m, Scenario{Failing: []bool{false, true}, Adopted: []bool{true}}, "1 adoption flags for 2 services"},
		{&Model{Nodes: m.Nodes, Edges: m.Edges, Service: []int{0}}, Scenario{Failing: []bool{false, true}, Adopted: []bool{true}}, "1 node services for 2 nodes"},
		{&Model{Nodes: m.Nodes, Edges: m.Edges, Service: []int{0, -1}}, Scenario{Failing: []bool{false, true}, Adopted: []bool{true}}, `node "B": service -1 out of range`},
		{&Model{Nodes: m.Nodes, Edges: m.Edges, Speaks: []Speaks{{}}}, Scenario{Failing: []bool{false, true}, Adopted: []bool{true, true}}, "1 service behaviours for 2 services"},
	} {
		_, err := tc.m.Requests(tc.s)
		if err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
