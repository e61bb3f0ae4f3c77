package radius

import (
	"testing"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

const ms = int64(1_000_000)

// chain builds, under parent, the hop of services[0] calling services[1]
// and so on; the last service fails persistently. attempts[i] is how many
// attempts services[i] makes to services[i+1] while it fails; claims[i] is
// the claim services[i] answers when failing; suppressed[i] marks the
// single attempt of level i as retry.suppressed. Every hop it adds fails
// (whether the root does is the caller's choice). It returns the time after
// the subtree.
func chain(b *Trace, parent graph.SpanID, at int64, services []string, attempts []int, claims []graph.Claim, suppressed []bool, i int) int64 {
	if i == len(services)-1 {
		return at + 1*ms
	}
	t := at
	for k := 0; k < attempts[i]; k++ {
		start := t
		copts := []Opt{Failed, Claim(claims[i+1])}
		if suppressed[i] {
			copts = append(copts, Suppressed)
		}
		c := b.Span(parent, graph.KindClient, services[i], "op", start, 0, copts...)
		s := b.Span(c, graph.KindServer, services[i+1], "op", start, 0, Failed, Claim(claims[i+1]))
		end := chain(b, s, start+1, services, attempts, claims, suppressed, i+1)
		for j := range b.Spans {
			if b.Spans[j].SpanID == c || b.Spans[j].SpanID == s {
				b.Spans[j].End = end
			}
		}
		t = end + 1
	}
	return t
}

var an Analyzer

func analyze(t *testing.T, spans []graph.Span, info func(c *graph.Call) CallInfo, owner func(tr *graph.Trace, h int) bool) (*graph.Trace, Result) {
	t.Helper()
	var a graph.Assembler
	tr := a.Assemble(spans)
	calls := make([]CallInfo, len(tr.Calls))
	for i := range tr.Calls {
		calls[i] = info(&tr.Calls[i])
	}
	own := make([]bool, len(tr.Hops))
	for h := range tr.Hops {
		own[h] = owner(tr, h)
	}
	return tr, an.Analyze(tr, calls, own)
}

// ownsLeaf: the failed hops without failed calls own their errors (every
// edge fail-close).
func ownsLeaf(tr *graph.Trace, h int) bool {
	hop := &tr.Hops[h]
	if !hop.Failed {
		return false
	}
	for c := hop.CallStart; c < hop.CallEnd; c++ {
		if tr.Calls[c].Failed {
			return false
		}
	}
	return true
}

func retryEnabled(c *graph.Call) CallInfo { return CallInfo{RetryEnabled: true, MaxAttempts: 2} }

// Naive chain A→B→C→D, one retry everywhere, D fails persistently: A makes
// 2 attempts to B, each B 2 to C, each C 2 to D: hops 1 + 2 + 4 + 8 = 15.
// Each of the 8 D hops is a failure event whose chain reaches A (the root),
// with levels 1 (C→D), 2 (B→C), 3 (A→B) all retried: radius 3.
// Amplification of D = 8 owner hops / 1 on first attempts = 8 (the seed's
// "8 × N"). Every edge already made M_e = 2 attempts: the naive replay adds
// nothing, 0 spurious requests prevented. No response was unclaimed: 0
// suppressed.
func TestNaiveChain(t *testing.T) {
	b := New(1)
	root := b.Root("A", "op", 0, 0, Failed)
	missing := []graph.Claim{0, 0, 0, 0}
	chain(b, root, 1, []string{"A", "B", "C", "D"}, []int{2, 2, 2}, missing, make([]bool, 3), 0)
	tr, r := analyze(t, b.Spans, retryEnabled, ownsLeaf)
	if len(tr.Hops) != 15 {
		t.Fatalf("hops = %d, want 15", len(tr.Hops))
	}
	if len(r.Events) != 8 || r.Radius != 3 {
		t.Fatalf("events %d radius %d, want 8 and 3", len(r.Events), r.Radius)
	}
	for _, e := range r.Events {
		if e.Radius != 3 || e.Chain != 3 {
			t.Errorf("event %+v, want radius 3 chain 3", e)
		}
	}
	if len(r.Owners) != 1 || r.Owners[0].Amplification() != 8 {
		t.Errorf("owners %+v, want D amplification 8", r.Owners)
	}
	if r.Suppressed != 0 || r.Spurious() != 0 || r.Hops != 15 {
		t.Errorf("suppressed %d spurious %d hops %d", r.Suppressed, r.Spurious(), r.Hops)
	}
}

// Ownership chain A→B→C→D: C retries D once (D claims), C answers
// unclaimed, B and A decline to retry (suppressed). Hops A, B, C, D, D = 5.
// Events: the two D hops; level 1 (C→D) retried, levels 2 and 3 not:
// radius 1. Amplification 2/1 = 2. Suppressed: B→C and A→B failed with an
// unclaimed last response on retry-enabled edges = 2. Naive replay with
// M_e = 2 on every edge: A 1, B 2, C 4, D 8 = 15 hops: 10 spurious
// requests prevented; at D, 8 counterfactual vs 2 actual: load increase
// avoided 8/2 − 1 = 300%.
func TestOwnershipChain(t *testing.T) {
	b := New(2)
	root := b.Root("A", "op", 0, 0, Failed, Claim(graph.ClaimUnclaimed))
	claims := []graph.Claim{graph.ClaimUnclaimed, graph.ClaimUnclaimed, graph.ClaimUnclaimed, graph.ClaimClaimed}
	chain(b, root, 1, []string{"A", "B", "C", "D"}, []int{1, 1, 2}, claims, []bool{true, true, false}, 0)
	tr, r := analyze(t, b.Spans, retryEnabled, ownsLeaf)
	if len(tr.Hops) != 5 || len(r.Events) != 2 || r.Radius != 1 {
		t.Fatalf("hops %d events %d radius %d, want 5 2 1", len(tr.Hops), len(r.Events), r.Radius)
	}
	if r.Owners[0].Amplification() != 2 {
		t.Errorf("amplification %v, want 2", r.Owners[0].Amplification())
	}
	if r.Suppressed != 2 {
		t.Errorf("suppressed %d, want 2", r.Suppressed)
	}
	if r.Counterfactual != 15 || r.Spurious() != 10 {
		t.Errorf("counterfactual %d spurious %d, want 15 10", r.Counterfactual, r.Spurious())
	}
	// Copies per hop: A 1, B 2, C 4, and the two D hops: the first D stays
	// as it was (1 copy within each C copy: 4), the last gets M_e − n = 0
	// more: 4 — D totals 8.
	want := map[string][2]int64{"A": {1, 1}, "B": {1, 2}, "C": {1, 4}, "D": {2, 8}}
	got := map[string][2]int64{}
	for h, c := range an.Copies() {
		g := got[tr.Hops[h].Service]
		got[tr.Hops[h].Service] = [2]int64{g[0] + 1, g[1] + c}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: actual/counterfactual %v, want %v", k, got[k], w)
		}
	}
}

// Absorbed error: B→C→D, D fails, C does not retry it and propagates; B
// retries C once and then absorbs (B, the root, does not fail). Chain D, C: level 1
// (C→D) not retried, level 2 (B→C) retried, B absorbed: radius 2.
func TestAbsorbedAtLevelTwo(t *testing.T) {
	b := New(3)
	root := b.Root("B", "op", 0, 0)
	chain(b, root, 1, []string{"B", "C", "D"}, []int{2, 1}, []graph.Claim{0, 0, 0}, make([]bool, 2), 0)
	_, r := analyze(t, b.Spans, retryEnabled, ownsLeaf)
	if len(r.Events) != 2 || r.Radius != 2 {
		t.Fatalf("events %d radius %d, want 2 and 2", len(r.Events), r.Radius)
	}
	for _, e := range r.Events {
		if e.Chain != 1 {
			t.Errorf("chain %d, want 1 (C)", e.Chain)
		}
	}
}

// A fail-open edge ends the chain: A calls B (fail-open, retried once), B
// fails on its own both times, A fails for its own reason. Owner B, level 1
// retried, A does not join the chain: radius 1, chain 0.
func TestFailOpenEndsChain(t *testing.T) {
	b := New(4)
	a := b.Root("A", "op", 0, 10*ms, Failed)
	b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
	b.Call(a, "A", "B", "op", 3*ms, 4*ms, C(Failed), Failed)
	info := func(c *graph.Call) CallInfo { return CallInfo{FailOpen: true, RetryEnabled: true, MaxAttempts: 2} }
	owner := func(tr *graph.Trace, h int) bool { return tr.Hops[h].Failed } // all own: the only failed call is fail-open
	_, r := analyze(t, b.Spans, info, owner)
	// Events: A (no incoming call: radius 0) and the two B hops (radius 1).
	if len(r.Events) != 3 || r.Radius != 1 {
		t.Fatalf("events %d radius %d", len(r.Events), r.Radius)
	}
	for _, e := range r.Events {
		if e.Chain != 0 {
			t.Errorf("chain %d, want 0", e.Chain)
		}
	}
}

// A counterfactual with max attempts 3 on a call that made 1: the missing
// 2 attempts copy the last attempt's subtree (B and its virtual callee):
// 2 × 2 = 4 more hops.
func TestCounterfactualCopiesSubtree(t *testing.T) {
	b := New(5)
	a := b.Root("A", "op", 0, 10*ms, Failed)
	s := b.Call(a, "A", "B", "op", 1*ms, 5*ms, C(Failed, Claim(graph.ClaimUnclaimed)), Failed, Claim(graph.ClaimUnclaimed))
	b.Span(s, graph.KindClient, "B", "GET", 2*ms, 3*ms, Peer("redis"), Failed)
	info := func(c *graph.Call) CallInfo {
		if c.CalleeService == "B" {
			return CallInfo{RetryEnabled: true, MaxAttempts: 3}
		}
		return CallInfo{}
	}
	tr, r := analyze(t, b.Spans, info, ownsLeaf)
	if len(tr.Hops) != 3 || r.Hops != 3 || r.Counterfactual != 7 || r.Suppressed != 1 {
		t.Fatalf("hops %d counterfactual %d suppressed %d, want 3 7 1", r.Hops, r.Counterfactual, r.Suppressed)
	}
}

// Potential radius of a naive chain r→a→b→c, all retry-enabled, nobody
// speaks claims: owner c reaches level 3. With ownership (everyone speaks,
// propagators seen unclaiming) only level 1 would retry. A fail-open edge
// a→b stops the walk at level 2 for owner c.
func TestPotential(t *testing.T) {
	mk := func(speaks bool, seen bool, open bool) []PotentialNode {
		n := make([]PotentialNode, 4)
		for i := 1; i < 4; i++ {
			n[i].Callers = []PotentialEdge{{From: int32(i - 1), RetryEnabled: true, FailOpen: open && i == 2}}
		}
		for i := range n {
			n[i].Speaks = speaks
			n[i].SeenPropagating = seen
			n[i].Propagated = graph.ClaimUnclaimed
		}
		return n
	}
	if w, wo := Potential(mk(false, false, false)); w != 3 || wo != 3 {
		t.Errorf("naive: %d %d, want 3 3", w, wo)
	}
	if w, wo := Potential(mk(true, true, false)); w != 1 || wo != 3 {
		t.Errorf("ownership: %d %d, want 1 3", w, wo)
	}
	// Speaking but never seen propagating: the protocol's answer: c claims
	// (level 1 retries), b unclaims because a level below retried: 1.
	if w, _ := Potential(mk(true, false, false)); w != 1 {
		t.Errorf("protocol: %d, want 1", w)
	}
	// Fail-open a→b: owner c: level 1 (b→c), level 2 (a→b, last walked).
	if w, wo := Potential(mk(false, false, true)); w != 2 || wo != 2 {
		t.Errorf("fail-open: %d %d, want 2 2", w, wo)
	}
	// A dishonest b keeps claiming: owner c level 1, b claims → level 2
	// retries, a unclaims (seen) → stops: 2.
	n := mk(true, true, false)
	n[2].Propagated = graph.ClaimClaimed
	if w, _ := Potential(n); w != 2 {
		t.Errorf("dishonest: %d, want 2", w)
	}
	// Cycles terminate.
	n[0].Callers = []PotentialEdge{{From: 3, RetryEnabled: true}}
	Potential(n)
}
