package analysis_test

import (
	"slices"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
	"github.com/stormradius/stormradius/radius"
)

// cycleTrace builds a GET /x → b GET /y → a GET /x, retried at both levels:
// the root a calls b twice (the first attempt fails), and each b hop calls
// a twice (the first attempt fails). Hops: a 1 + 2 × 2 = 5, b 2. Edges:
// a→b 1 call of 2 attempts; b→a 2 calls of 2 attempts each.
func cycleTrace(id byte) []graph.Span {
	b := New(id)
	root := b.Root("a", "GET /x", 0, 100*ms)
	for i, at := range []int64{1, 50} {
		copts := C(Resend(int32(i)))
		var sopts []Opt
		if i == 0 {
			copts, sopts = C(Resend(0), Failed), []Opt{Failed}
		}
		bh := b.Call(root, "a", "b", "GET /y", at*ms, (at+40)*ms, copts, sopts...)
		b.Call(bh, "b", "a", "GET /x", (at+1)*ms, (at+10)*ms, C(Resend(0), Failed), Failed)
		b.Call(bh, "b", "a", "GET /x", (at+11)*ms, (at+20)*ms, C(Resend(1)))
	}
	return b.Spans
}

// whatIf runs traces through a batch analysis and the what-if model of
// "a GET /x", with failing nodes given by service.
func whatIf(t *testing.T, traces graph.Lists, s radius.Scenario, failing ...string) map[string]float64 {
	t.Helper()
	_, state := analysis.InMemory(traces, analysis.Config{}, 1)
	m, nodes, err := state.Merged().WhatIfModel("a GET /x", analysis.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Failing = make([]bool, len(nodes))
	for i, n := range nodes {
		s.Failing[i] = slices.Contains(failing, n.Service)
	}
	req, err := m.Requests(s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for i, n := range nodes {
		out[n.Service] = req[i]
	}
	return out
}

// The model keeps a→b and drops b→a, which closes the cycle. a serves, as
// the model sees it, its root hop only (the 4 hops b's calls reach come in
// through the dropped edge): a→b makes 1 call per request, not 1 per 5
// hops of a (the 0.2 the command used to print). With nothing failing, b
// serves 1 request per root request, as observed (2 hops = 2 attempts of
// one call). With b failing, a→b is a retrying level: observed max
// attempts 2, so R = 1: naive 1 × (1 + 1) = 2; budget and ownership with
// B = 0.1: 1 × (1 + min(1, 0.1)) = 1.1. The root serves 1 throughout.
func TestWhatIfModelCycle(t *testing.T) {
	traces := graph.Lists{cycleTrace(1), cycleTrace(2)}
	for _, tc := range []struct {
		name    string
		s       radius.Scenario
		failing []string
		b       float64
	}{
		{"nothing failing", radius.Scenario{Policy: radius.Naive}, nil, 1},
		{"naive, b failing", radius.Scenario{Policy: radius.Naive}, []string{"b"}, 2},
		{"budget, b failing", radius.Scenario{Policy: radius.Budget, Budget: 0.1}, []string{"b"}, 1.1},
		{"ownership, b failing", radius.Scenario{Policy: radius.Ownership, Budget: 0.1}, []string{"b"}, 1.1},
	} {
		got := whatIf(t, traces, tc.s, tc.failing...)
		if got["a"] != 1 || got["b"] != tc.b {
			t.Errorf("%s: a %v b %v, want 1 and %v", tc.name, got["a"], got["b"], tc.b)
		}
	}
}

// Recursion that calls further: a1 → b1 → a2 → b2 (one attempt each, the
// inner a calls b again). Hops: a 2, b 2; a→b 2 calls, b→a 1. The model
// drops b→a; a serves 2 − 1 = 1 request (its root hop), so a→b carries
// 2 calls per request and b serves 2 per root request: the 2 b hops each
// trace has. Counting every hop of a would give 2/2 = 1.
func TestWhatIfModelRecursionDeeper(t *testing.T) {
	b := New(3)
	a1 := b.Root("a", "GET /x", 0, 100*ms)
	b1 := b.Call(a1, "a", "b", "GET /y", 1*ms, 90*ms, nil)
	a2 := b.Call(b1, "b", "a", "GET /x", 2*ms, 80*ms, nil)
	b.Call(a2, "a", "b", "GET /y", 3*ms, 70*ms, nil)
	got := whatIf(t, graph.Lists{b.Spans}, radius.Scenario{Policy: radius.Naive})
	if got["a"] != 1 || got["b"] != 2 {
		t.Errorf("a %v b %v, want 1 and 2", got["a"], got["b"])
	}
}
