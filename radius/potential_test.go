package radius

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
)

// re is a retry-enabled, fail-close edge from caller i; plain a fail-close
// edge that is not retry-enabled; open a retry-enabled fail-open edge.
func re(i int32) PotentialEdge    { return PotentialEdge{From: i, RetryEnabled: true} }
func plain(i int32) PotentialEdge { return PotentialEdge{From: i} }
func open(i int32) PotentialEdge  { return PotentialEdge{From: i, RetryEnabled: true, FailOpen: true} }

// Hand-worked potential radii (docs/SPEC.md §4.5: paths are simple; a node already
// on the walk ends it). Node 0 is the API's root in every graph.
func TestPotentialHand(t *testing.T) {
	const (
		claimed   = graph.ClaimClaimed
		unclaimed = graph.ClaimUnclaimed
	)
	// speaker: speaks claims, seen propagating errors with answer a.
	speaker := func(a graph.Claim, callers ...PotentialEdge) PotentialNode {
		return PotentialNode{Speaks: true, SeenPropagating: true, Propagated: a, Callers: callers}
	}
	// silent: does not speak claims (answers missing).
	silent := func(callers ...PotentialEdge) PotentialNode { return PotentialNode{Callers: callers} }
	tests := []struct {
		name          string
		nodes         []PotentialNode
		with, without int
	}{
		// a GET /x calls itself, retry-enabled. The self edge closes a
		// cycle the moment it is looked at (a is the owner, on the walk):
		// no level at all. The observed radius (1, retried once) is the
		// report's floor, not the graph's.
		{"self-call", []PotentialNode{silent(re(0))}, 0, 0},
		// a → b → a, both retry-enabled. Owner a: level 1 is b→a (retries);
		// b's only caller is a, on the walk: stop. Owner b: level 1 a→b;
		// a's caller b is on the walk. 1 either way (observed: 2).
		{"two-node cycle", []PotentialNode{silent(re(1)), silent(re(0))}, 1, 1},
		// The same cycle, both speaking and seen propagating claimed (they
		// keep claiming): owner a claims, level 1 retries; nothing above.
		{"two-node cycle, claiming", []PotentialNode{speaker(claimed, re(1)), speaker(claimed, re(0))}, 1, 1},
		// A self-call in the middle of a chain r → a → b, a → a: the self
		// edge is skipped whenever a is on the walk, so the chain alone
		// counts: owner b: 1 (a→b), 2 (r→a).
		{"self-call in a chain", []PotentialNode{silent(), silent(re(0), re(1)), silent(re(1))}, 2, 2},
		// Diamond r → a → c → d, r → b → c, with b → c not
		// retry-enabled; everyone else retry-enabled. d claims as owner; c,
		// a and b speak and were seen unclaiming (honest). Without
		// ownership, owner d: d←c←a←r: levels 1, 2, 3 retry: 3. With: d
		// claims, level 1 (c→d) retries; c unclaims, so neither a→c nor
		// (not retry-enabled anyway) b→c does; a and b unclaim too: r→a,
		// r→b do not. Owners c, a, b: only level 1. So 1.
		{"diamond, honest", []PotentialNode{
			silent(),
			speaker(unclaimed, re(0)),
			speaker(unclaimed, re(0)),
			speaker(unclaimed, re(1), plain(2)),
			speaker(claimed, re(3)),
		}, 1, 3},
		// The same diamond with b silent: b answers missing, so on the
		// route d←c←b←r level 3 (r→b) retries again although level 2 (b→c)
		// cannot: the route, not the longest path, decides. With: 3.
		{"diamond, silent b", []PotentialNode{
			silent(),
			speaker(unclaimed, re(0)),
			silent(re(0)),
			speaker(unclaimed, re(1), plain(2)),
			speaker(claimed, re(3)),
		}, 3, 3},
		// A fail-open edge is the last level walked: chain r → a → b → c,
		// a → b fail-open. Owner c: 1 (b→c), 2 (a→b, absorbed by a); r→a
		// is never reached from c. Owner b: 1 (a→b). Owner a: 1 (r→a).
		// Nobody speaks: 2 either way.
		{"fail-open ends the walk", []PotentialNode{silent(), silent(re(0)), silent(open(1)), silent(re(2))}, 2, 2},
		// A cycle a ⇄ b inside a DAG: r → a, a → b, b → a, a → o, b → o,
		// all retry-enabled, nobody speaks. Owner o: o←a←b stops at 2 (b's
		// only caller a is on the walk); o←a←r: 2; o←b←a←r: 1, 2, 3. The
		// longest simple walk is 3. Owner b: b←a←r: 2. Owner a: 1.
		{"cycle inside a DAG", []PotentialNode{
			silent(),
			silent(re(0), re(2)),
			silent(re(1)),
			silent(re(1), re(2)),
		}, 3, 3},
		// A three-node cycle a → b → c → a under root r → a, all
		// retry-enabled, silent. Owner c: c←b←a←r: 1, 2, 3 (a's other
		// caller c is the owner). Owner b: b←a←c: c's caller b is on the
		// walk: 2; b←a←r: 2. Owner a: a←c←b: b's caller a on the walk: 2;
		// a←r: 1. So 3.
		{"three-node cycle under a root", []PotentialNode{
			silent(),
			silent(re(0), re(3)),
			silent(re(1)),
			silent(re(2)),
		}, 3, 3},
	}
	for _, tc := range tests {
		w, wo, complete := PotentialBounded(tc.nodes, PotentialBudget)
		if w != tc.with || wo != tc.without || !complete {
			t.Errorf("%s: with %d without %d complete %v, want %d %d true", tc.name, w, wo, complete, tc.with, tc.without)
		}
	}
}

// brute is the potential radius written straight from docs/SPEC.md §4.5, with no
// memo and no pruning: every owner, every simple walk. An invalid answer
// counts as missing (docs/SPEC.md §2): only unclaimed stops a retry.
func brute(nodes []PotentialNode, naive bool) int {
	onPath := make([]bool, len(nodes))
	best := 0
	answer := func(n int32, below bool) graph.Claim {
		nd := nodes[n]
		switch {
		case naive || !nd.Speaks:
			return graph.ClaimMissing
		case nd.SeenPropagating:
			return nd.Propagated
		case below:
			return graph.ClaimUnclaimed
		}
		return graph.ClaimClaimed
	}
	// up walks the callers of v, reached with answer ans; level is the
	// level of the edges into v.
	var up func(v int32, ans graph.Claim, below bool, level int)
	up = func(v int32, ans graph.Claim, below bool, level int) {
		onPath[v] = true
		for _, e := range nodes[v].Callers {
			if onPath[e.From] {
				continue
			}
			retry := e.RetryEnabled && (naive || ans != graph.ClaimUnclaimed)
			if retry && level > best {
				best = level
			}
			if !e.FailOpen {
				up(e.From, answer(e.From, below || retry), below || retry, level+1)
			}
		}
		onPath[v] = false
	}
	for n := range nodes {
		ans := graph.ClaimMissing
		if !naive && nodes[n].Speaks {
			ans = graph.ClaimClaimed
		}
		up(int32(n), ans, false, 1)
	}
	return best
}

// randomGraph returns a call graph of n nodes where each ordered pair
// (self-calls included) is an edge with probability density, with random
// edge and node properties.
func randomGraph(r *rand.Rand, n int, density float64) []PotentialNode {
	claims := []graph.Claim{graph.ClaimMissing, graph.ClaimClaimed, graph.ClaimUnclaimed, graph.ClaimInvalid}
	nodes := make([]PotentialNode, n)
	for i := range nodes {
		nodes[i] = PotentialNode{Speaks: r.IntN(3) > 0, SeenPropagating: r.IntN(2) == 0, Propagated: claims[r.IntN(len(claims))]}
		for j := range n {
			if r.Float64() < density {
				nodes[i].Callers = append(nodes[i].Callers, PotentialEdge{
					From: int32(j), RetryEnabled: r.IntN(4) > 0, FailOpen: r.IntN(5) == 0,
				})
			}
		}
	}
	return nodes
}

// The search (SCC memo, pruning) agrees with the brute-force enumerator on
// small random graphs, cycles and self-calls included.
func TestPotentialMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		n := 1 + r.IntN(8)
		nodes := randomGraph(r, n, []float64{0.15, 0.3, 0.6}[i%3])
		w, wo, complete := PotentialBounded(nodes, PotentialBudget)
		bw, bwo := brute(nodes, false), brute(nodes, true)
		if w != bw || wo != bwo || !complete {
			t.Fatalf("graph %d (%d nodes) %+v: with %d without %d complete %v, brute force %d %d", i, n, nodes, w, wo, complete, bw, bwo)
		}
	}
}

// Without budget for cycles, the answer is a lower bound and says so; a
// DAG needs no budget at all.
func TestPotentialBudget(t *testing.T) {
	// Owner c of r → a → b → c → a (cycle a, b, c): the exact answer is 3
	// (c←b←a←r, see TestPotentialHand); with no budget the walk may not
	// step inside the cycle, so only level 1 (b→c) is found.
	cycle := []PotentialNode{{}, {Callers: []PotentialEdge{re(0), re(3)}}, {Callers: []PotentialEdge{re(1)}}, {Callers: []PotentialEdge{re(2)}}}
	if w, wo, complete := PotentialBounded(cycle, 0); complete || w > 3 || wo > 3 || w < 1 {
		t.Errorf("no budget: %d %d complete %v, want a lower bound of 3, at least 1, not complete", w, wo, complete)
	}
	dag := []PotentialNode{{}, {Callers: []PotentialEdge{re(0)}}, {Callers: []PotentialEdge{re(1), re(0)}}}
	if w, wo, complete := PotentialBounded(dag, 0); !complete || w != 2 || wo != 2 {
		t.Errorf("DAG: %d %d complete %v, want 2 2 true", w, wo, complete)
	}
}

// 14 services that all call each other, retry-enabled, all speaking and
// seen unclaiming except node 0, which keeps claiming. Without ownership
// every level retries: a walk through all 14 nodes has 13 levels. With
// ownership, after level 1 (the owner claims) only edges into node 0
// retry, at level depth(0)+1, and they need a caller of 0 off the walk: at
// best the owner, 11 others, node 0 at depth 12, one caller left: level
// 13. Both are found without enumerating the 13! orderings.
func TestPotentialDense(t *testing.T) {
	const n = 14
	nodes := make([]PotentialNode, n)
	for i := range nodes {
		nodes[i] = PotentialNode{Speaks: true, SeenPropagating: true, Propagated: graph.ClaimUnclaimed}
		for j := range n {
			if j != i {
				nodes[i].Callers = append(nodes[i].Callers, re(int32(j)))
			}
		}
	}
	nodes[0].Propagated = graph.ClaimClaimed
	if w, wo, complete := PotentialBounded(nodes, 1000); w != n-1 || wo != n-1 || !complete {
		t.Errorf("with %d without %d complete %v, want %d %d true", w, wo, complete, n-1, n-1)
	}
}

// With too little budget the answer is still a lower bound, and exact when
// it says it is complete.
func TestPotentialBudgetLowerBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cut := 0
	for i := range 3000 {
		nodes := randomGraph(r, 2+r.IntN(7), []float64{0.3, 0.6}[i%2])
		budget := r.IntN(40)
		w, wo, complete := PotentialBounded(nodes, budget)
		bw, bwo := brute(nodes, false), brute(nodes, true)
		if w > bw || wo > bwo || complete && (w != bw || wo != bwo) {
			t.Fatalf("graph %d, budget %d %+v: with %d without %d complete %v, exact %d %d", i, budget, nodes, w, wo, complete, bw, bwo)
		}
		if !complete {
			cut++
		}
	}
	if cut == 0 {
		t.Error("no search ran out of budget: the test does not test it")
	}
}

// A random graph of 60 nodes, 10% of pairs connected, has one large SCC
// with more simple paths than could ever be walked, and no walk that meets
// the bound on levels. The budget cuts the search to a fraction of a second
// (the limit allows for a loaded machine), and the answer says it is cut.
func TestPotentialLargeGraphIsBounded(t *testing.T) {
	nodes := randomGraph(rand.New(rand.NewPCG(7, 8)), 60, 0.1)
	start := time.Now()
	w, wo, complete := PotentialBounded(nodes, PotentialBudget)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
	if complete || w < 1 || wo < w || wo > 59 {
		t.Errorf("with %d without %d complete %v: want 1 ≤ with ≤ without ≤ 59, cut", w, wo, complete)
	}
}
