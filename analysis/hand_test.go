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
	doc, _ := analysis.Batch(graph.Lists{b.Spans}, analysis.Config{}, 1)
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
