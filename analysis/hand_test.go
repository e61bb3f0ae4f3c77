package analysis_test

import (
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

const ms = int64(1_000_000)

// Hand-built trace: A → B once; B answered claimed on its SERVER span but
// A's CLIENT span recorded unclaimed: one claim mismatch for B, the CLIENT
// side trusted. B failed on its own (no calls): owner, expected claimed,
// observed unclaimed (CLIENT side) → false_unclaim. A propagated from B
// (fail-close by default); B's last response was unclaimed → criteria
// satisfied → A expected unclaimed; A's own span says unclaimed → correct.
// A also called redis (virtual) twice: the first attempt failed, the retry
// succeeded. redis owns one failure event whose level 1 (A→redis) was
// retried: radius 1; the call did not fail, so A's error is not redis's.
func TestHandTraceAuditAndMismatch(t *testing.T) {
	b := New(1)
	a := b.Root("A", "GET /a", 0, 20*ms, Failed, Claim(graph.ClaimUnclaimed))
	b.Call(a, "A", "B", "GET /b", 1*ms, 2*ms, C(Failed, Claim(graph.ClaimUnclaimed)), Failed, Claim(graph.ClaimClaimed))
	b.Span(a, graph.KindClient, "A", "GET", 3*ms, 4*ms, Peer("redis"), Failed)
	b.Span(a, graph.KindClient, "A", "GET", 5*ms, 6*ms, Peer("redis"))
	doc, _ := analysis.InMemory(graph.Lists{b.Spans}, analysis.Config{}, 1)
	svc := map[string]analysis.ServiceDoc{}
	for _, s := range doc.Services {
		svc[s.Service] = s
	}
	if s := svc["B"]; s.ClaimMismatches != 1 || s.Claims.FalseUnclaim != 1 || s.OwnedFailures != 1 {
		t.Errorf("B %+v", s)
	}
	if s := svc["A"]; s.Claims.Correct != 1 || s.ClaimMismatches != 0 {
		t.Errorf("A %+v", s)
	}
	if s := svc["redis"]; !s.Virtual || s.OwnedFailures != 1 || s.Claims != (analysis.ClaimsDoc{}) {
		t.Errorf("redis %+v", s)
	}
	a0 := doc.APIs[0]
	// Events: B (radius 0: not retried; A is the root) and redis (radius 1).
	if a0.FailureEvents != 2 || a0.MaxRadius != 1 || a0.RadiusHistogram["1"] != 1 {
		t.Errorf("%+v", a0)
	}
}

// Roots as real deployments have them (docs/SPEC.md §3) and root_errors beside
// failed_traces (docs/SPEC.md §5.2). Three traces of "A GET /x":
//   - t1: A's SERVER span has a parent outside the trace (a load balancer)
//     and no span is parentless: A is the root hop (remote_parent_traces
//     1), not a fragment, not a context drop of A. B fails on its own, A
//     propagates it (fail-close by default) and fails: a failure event and
//     a root error.
//   - t2: A calls B twice: the first attempt fails, the retry succeeds. B's
//     first hop owns a failure event (failed_traces), A does not fail (no
//     root error).
//   - t3: nothing fails.
//
// So traces 3, failed_traces 2, root_errors 1, remote_parent_traces 1,
// fragments 0 and no context drops.
func TestRootErrorsAndRemoteParents(t *testing.T) {
	b1 := New(1)
	a := b1.Span(SpanID(999), graph.KindServer, "A", "GET /x", 0, 20*ms, Failed)
	b1.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
	b2 := New(2)
	a = b2.Root("A", "GET /x", 0, 20*ms)
	b2.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
	b2.Call(a, "A", "B", "op", 3*ms, 4*ms, nil)
	b3 := New(3)
	a = b3.Root("A", "GET /x", 0, 20*ms)
	b3.Call(a, "A", "B", "op", 1*ms, 2*ms, nil)
	doc, _ := analysis.InMemory(graph.Lists{b1.Spans, b2.Spans, b3.Spans}, analysis.Config{}, 1)
	if doc.Fragments != 0 || len(doc.APIs) != 1 {
		t.Fatalf("fragments %d apis %+v", doc.Fragments, doc.APIs)
	}
	x := doc.APIs[0]
	if x.API != "A GET /x" || x.Traces != 3 || x.FailedTraces != 2 || x.RootErrors != 1 || x.RemoteParentTraces != 1 {
		t.Errorf("%+v", x)
	}
	for _, s := range doc.Services {
		if s.ContextDrops != 0 {
			t.Errorf("%s: %d context drops", s.Service, s.ContextDrops)
		}
	}
}

// Potential radius on cycles (docs/SPEC.md §4.5): paths are simple, and the
// reported figure is never below the observed max radius.
//
// Self-call: root a GET /x calls a GET /x twice (the call retried once),
// both attempts fail on their own. Each inner hop owns an event whose level
// 1 (the call from the root) was retried: observed radius 1. The call graph
// is one node with a self edge, which closes a cycle and is not walked:
// 0 from the graph, 1 with the floor.
//
// a → b → a: the root a calls b twice (retried), each b calls a twice
// (retried), the inner a fails on its own. Events: 4 inner a hops, chain
// a ← b ← a(root); level 1 (b→a) and level 2 (a→b) retried: radius 2. The
// graph walk from owner a stops at b's caller a (on the walk): 1; from
// owner b: 1. Floor: 2, with or without ownership.
func TestPotentialRadiusCycles(t *testing.T) {
	self := New(1)
	root := self.Root("a", "GET /x", 0, 20*ms, Failed)
	self.Call(root, "a", "a", "GET /x", 1*ms, 2*ms, C(Failed), Failed)
	self.Call(root, "a", "a", "GET /x", 3*ms, 4*ms, C(Failed), Failed)
	doc, _ := analysis.InMemory(graph.Lists{self.Spans}, analysis.Config{}, 1)
	if x := doc.APIs[0]; x.MaxRadius != 1 || x.PotentialRadius != 1 || x.PotentialWithout != 1 {
		t.Errorf("self-call: max %d potential %d/%d, want 1, 1/1", x.MaxRadius, x.PotentialRadius, x.PotentialWithout)
	}

	two := New(2)
	root = two.Root("a", "GET /x", 0, 100*ms, Failed)
	at := int64(1)
	for i := 0; i < 2; i++ {
		bs := two.Call(root, "a", "b", "GET /y", at*ms, (at+10)*ms, C(Failed), Failed)
		for j := 0; j < 2; j++ {
			two.Call(bs, "b", "a", "GET /x", (at+1+int64(4*j))*ms, (at+3+int64(4*j))*ms, C(Failed), Failed)
		}
		at += 20
	}
	doc, _ = analysis.InMemory(graph.Lists{two.Spans}, analysis.Config{}, 1)
	if x := doc.APIs[0]; x.MaxRadius != 2 || x.PotentialRadius != 2 || x.PotentialWithout != 2 {
		t.Errorf("a→b→a: max %d potential %d/%d, want 2, 2/2", x.MaxRadius, x.PotentialRadius, x.PotentialWithout)
	}
}
