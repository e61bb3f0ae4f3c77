package attribution

import (
	"testing"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

const ms = int64(1_000_000)

func attribute(t *testing.T, spans []graph.Span, open func(c *graph.Call) bool) (*graph.Trace, []Verdict) {
	t.Helper()
	var a graph.Assembler
	tr := a.Assemble(spans)
	fo := make([]bool, len(tr.Calls))
	for i := range tr.Calls {
		fo[i] = open(&tr.Calls[i])
	}
	return tr, Attribute(tr, fo, nil)
}

func never(*graph.Call) bool { return false }

func verdictOf(t *testing.T, tr *graph.Trace, v []Verdict, service string) Verdict {
	t.Helper()
	for i := range tr.Hops {
		if tr.Hops[i].Service == service {
			return v[i]
		}
	}
	t.Fatalf("no hop of %s", service)
	return Verdict{}
}

// The decision matrix: C fails on its own (owner, expected claimed). B
// retried C and failed: propagated, criteria satisfied by the retry →
// expected unclaimed. B answered claimed (false_claim: lets A retry), so A
// got a claimed response, did not retry and failed: criteria not satisfied
// → A is expected to claim (at least once). Observed: C claimed (correct),
// B claimed (false_claim), A nothing (missing).
func TestDecisionMatrixAndAudit(t *testing.T) {
	b := New(1)
	a := b.Root("A", "op", 0, 20*ms, Failed)
	bs := b.Call(a, "A", "B", "op", 1*ms, 10*ms, C(Failed, Claim(graph.ClaimClaimed)), Failed, Claim(graph.ClaimClaimed))
	b.Call(bs, "B", "C", "op", 2*ms, 3*ms, C(Failed, Claim(graph.ClaimClaimed)), Failed, Claim(graph.ClaimClaimed))
	b.Call(bs, "B", "C", "op", 4*ms, 5*ms, C(Failed, Claim(graph.ClaimClaimed)), Failed, Claim(graph.ClaimClaimed))
	tr, v := attribute(t, b.Spans, never)
	cases := []struct {
		svc      string
		owner    bool
		expected graph.Claim
		audit    Audit
	}{
		{"C", true, graph.ClaimClaimed, AuditCorrect},
		{"B", false, graph.ClaimUnclaimed, AuditFalseClaim},
		{"A", false, graph.ClaimClaimed, AuditMissing},
	}
	for _, c := range cases {
		got := verdictOf(t, tr, v, c.svc)
		if got.Owner != c.owner || got.Audit != c.audit {
			t.Errorf("%s: %+v, want owner %v audit %v", c.svc, got, c.owner, c.audit)
		}
		if c.svc != "A" && got.Expected != c.expected {
			t.Errorf("%s: expected %v, want %v", c.svc, got.Expected, c.expected)
		}
	}
	// A's call to B got a claimed response and was not retried: not
	// satisfied → A is expected to claim (at least once).
	if got := verdictOf(t, tr, v, "A"); got.Expected != graph.ClaimClaimed {
		t.Errorf("A expected %v, want claimed", got.Expected)
	}
}

// At least once: B calls C once (no retries configured), C claims: the
// criteria are not satisfied, so B must claim and let its caller retry; B
// answered unclaimed: false_unclaim. With retry.criteria_satisfied on the
// attempt, unclaimed is right.
func TestAtLeastOnce(t *testing.T) {
	for _, criteria := range []bool{false, true} {
		b := New(2)
		a := b.Root("A", "op", 0, 20*ms)
		copts := C(Failed, Claim(graph.ClaimUnclaimed))
		bs := b.Call(a, "A", "B", "op", 1*ms, 10*ms, copts, Failed)
		inner := C(Failed, Claim(graph.ClaimClaimed))
		if criteria {
			inner = append(inner, Criteria)
		}
		b.Call(bs, "B", "C", "op", 2*ms, 3*ms, inner, Failed, Claim(graph.ClaimClaimed))
		tr, v := attribute(t, b.Spans, never)
		got := verdictOf(t, tr, v, "B")
		want, audit := graph.ClaimClaimed, AuditFalseUnclaim
		if criteria {
			want, audit = graph.ClaimUnclaimed, AuditCorrect
		}
		if got.Expected != want || got.Audit != audit {
			t.Errorf("criteria=%v: %+v, want %v %v", criteria, got, want, audit)
		}
	}
}

// Fail-open: A fails with one failed fail-open call (X) and no fail-close
// failure: A owns its error. Answering unclaimed blames X: a misattributed
// coincidental error, which the naive attributor would make too. Answering
// claimed is correct, but the naive attributor would still have
// misattributed it. With a failed fail-close call too (Y), the error is
// propagated: no misattribution, but the hop is eligible for the rate.
func TestMisattribution(t *testing.T) {
	openX := func(c *graph.Call) bool { return c.CalleeService == "X" }
	for _, tc := range []struct {
		name                      string
		answer                    graph.Claim
		withY                     bool
		owner, misattr, naive     bool
		failedCalls, failedOpenCt int32
	}{
		{"unclaimed own error", graph.ClaimUnclaimed, false, true, true, true, 1, 1},
		{"claimed own error", graph.ClaimClaimed, false, true, false, true, 1, 1},
		{"propagated from Y", graph.ClaimUnclaimed, true, false, false, false, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(3)
			a := b.Root("A", "op", 0, 20*ms, Failed, Claim(tc.answer))
			b.Call(a, "A", "X", "op", 1*ms, 2*ms, C(Failed), Failed)
			if tc.withY {
				b.Call(a, "A", "Y", "op", 3*ms, 4*ms, C(Failed), Failed)
			}
			tr, v := attribute(t, b.Spans, openX)
			got := verdictOf(t, tr, v, "A")
			if got.Owner != tc.owner || got.Misattributed != tc.misattr || got.NaiveMisattributed != tc.naive ||
				got.FailedCalls != tc.failedCalls || got.FailedOpen != tc.failedOpenCt {
				t.Errorf("%+v", got)
			}
		})
	}
}

// A failed virtual node owns its error and is not audited.
func TestVirtualOwner(t *testing.T) {
	b := New(4)
	a := b.Root("A", "op", 0, 20*ms, Failed)
	b.Span(a, graph.KindClient, "A", "GET", 1*ms, 2*ms, Peer("redis"), Failed)
	tr, v := attribute(t, b.Spans, never)
	got := verdictOf(t, tr, v, "redis")
	if !got.Owner || got.Audit != AuditNone {
		t.Errorf("%+v", got)
	}
	if a := verdictOf(t, tr, v, "A"); a.Owner || a.Expected != graph.ClaimClaimed {
		t.Errorf("A %+v: propagated, redis not retried → claimed", a)
	}
}

// The failure memory (docs/SPEC.md §4.3).
func TestFailOpenLearning(t *testing.T) {
	var cfg Config
	for _, tc := range []struct {
		name   string
		e      graph.EdgeStats
		open   bool
		source Source
	}{
		{"no data", graph.EdgeStats{}, false, SourceDefault},
		{"19 failed, caller never failed", graph.EdgeStats{Failed: 19}, false, SourceDefault},
		{"20 failed, 9 callers failed", graph.EdgeStats{Failed: 20, CallerFailed: 9}, true, SourceLearned},
		{"20 failed, 10 callers failed", graph.EdgeStats{Failed: 20, CallerFailed: 10}, false, SourceLearned},
		{"declared open beats learning", graph.EdgeStats{Failed: 100, CallerFailed: 100, DeclaredOpen: 1}, true, SourceDeclared},
		{"declared close beats learning", graph.EdgeStats{Failed: 100, DeclaredClose: 3, DeclaredOpen: 1}, false, SourceDeclared},
	} {
		open, src := cfg.FailOpen(&tc.e)
		if open != tc.open || src != tc.source {
			t.Errorf("%s: %v %v, want %v %v", tc.name, open, src, tc.open, tc.source)
		}
	}
	learnedClose := graph.EdgeStats{Failed: 20, CallerFailed: 20}
	if open, src := cfg.CallFailOpen(&graph.Call{FailOpen: graph.True}, &learnedClose); !open || src != SourceDeclared {
		t.Errorf("call declaration should win: %v %v", open, src)
	}
}
