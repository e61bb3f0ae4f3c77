package graph_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

const ms = int64(1_000_000)

func assemble(spans []graph.Span) *graph.Trace {
	var a graph.Assembler
	return a.Assemble(append([]graph.Span(nil), spans...))
}

// callShape returns, per call of hop h, the callee service and number of
// attempts: enough to compare groupings.
type callShape struct {
	callee   string
	attempts int
	failed   bool
}

func shape(t *graph.Trace, h int32) []callShape {
	var out []callShape
	hop := t.Hops[h]
	for c := hop.CallStart; c < hop.CallEnd; c++ {
		call := t.Calls[c]
		out = append(out, callShape{call.CalleeService, call.Attempts(), call.Failed})
	}
	return out
}

func hopOf(t *testing.T, tr *graph.Trace, service string, nth int) int32 {
	t.Helper()
	for i := range tr.Hops {
		if tr.Hops[i].Service == service {
			if nth == 0 {
				return int32(i)
			}
			nth--
		}
	}
	t.Fatalf("no hop %d of %s", nth, service)
	return -1
}

// A calls B; B's first attempt fails, A retries after it ended: one call
// of two attempts, no resend attribute (timing rule of docs/SPEC.md §3).
func TestSequentialRetryWithoutResend(t *testing.T) {
	b := New(1)
	a := b.Root("A", "GET /a", 0, 10*ms, Failed)
	b.Call(a, "A", "B", "GET /b", 1*ms, 2*ms, C(Failed), Failed)
	b.Call(a, "A", "B", "GET /b", 3*ms, 4*ms, C(Failed), Failed)
	tr := assemble(b.Spans)
	got := shape(tr, tr.Root)
	want := []callShape{{"B", 2, true}}
	if !slices.Equal(got, want) {
		t.Fatalf("calls = %+v, want %+v", got, want)
	}
	if tr.API() != "A GET /a" {
		t.Errorf("API = %q", tr.API())
	}
	second := hopOf(t, tr, "B", 1)
	if tr.Hops[second].First || !tr.Hops[hopOf(t, tr, "B", 0)].First {
		t.Errorf("First flags wrong: %+v", tr.Hops)
	}
}

func TestRetryGrouping(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *Trace, root graph.SpanID)
		want  []callShape
	}{
		{"success then sequential call is a new call", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 2*ms, nil)
			b.Call(a, "A", "B", "op", 3*ms, 4*ms, nil)
		}, []callShape{{"B", 1, false}, {"B", 1, false}}},
		{"overlapping failed siblings are parallel calls", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 5*ms, C(Failed), Failed)
			b.Call(a, "A", "B", "op", 2*ms, 6*ms, C(Failed), Failed)
		}, []callShape{{"B", 1, true}, {"B", 1, true}}},
		{"different url.full is not a retry", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed, Target(1)), Failed)
			b.Call(a, "A", "B", "op", 3*ms, 4*ms, C(Target(2)))
		}, []callShape{{"B", 1, true}, {"B", 1, false}}},
		{"same url.full is a retry", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed, Target(1)), Failed)
			b.Call(a, "A", "B", "op", 3*ms, 4*ms, C(Target(1)))
		}, []callShape{{"B", 2, false}}},
		{"one target missing: timing decides", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed, Target(1)), Failed)
			b.Call(a, "A", "B", "op", 3*ms, 4*ms, nil)
		}, []callShape{{"B", 2, false}}},
		{"different callee operation is a different call", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op1", 1*ms, 2*ms, C(Failed), Failed)
			b.Call(a, "A", "B", "op2", 3*ms, 4*ms, nil)
		}, []callShape{{"B", 1, true}, {"B", 1, false}}},
		{"three parallel failures each retried in parallel", func(b *Trace, a graph.SpanID) {
			for i := 0; i < 3; i++ {
				b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
			}
			for i := 0; i < 3; i++ {
				b.Call(a, "A", "B", "op", 3*ms, 4*ms, nil)
			}
		}, []callShape{{"B", 2, false}, {"B", 2, false}, {"B", 2, false}}},
		{"resend numbers group exactly, even overlapping", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 5*ms, C(Failed), Failed)
			b.Call(a, "A", "B", "op", 2*ms, 6*ms, C(Resend(1)))
			b.Call(a, "A", "B", "op", 7*ms, 8*ms, C(Failed, Resend(0)), Failed)
			b.Call(a, "A", "B", "op", 9*ms, 10*ms, C(Failed, Resend(1)), Failed)
			b.Call(a, "A", "B", "op", 11*ms, 12*ms, C(Failed, Resend(2)), Failed)
		}, []callShape{{"B", 2, false}, {"B", 3, true}}},
		{"resend numbers: parallel calls retried in parallel", func(b *Trace, a graph.SpanID) {
			for i := 0; i < 3; i++ {
				b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
			}
			for i := 0; i < 3; i++ {
				b.Call(a, "A", "B", "op", 3*ms, 4*ms, C(Resend(1)))
			}
		}, []callShape{{"B", 2, false}, {"B", 2, false}, {"B", 2, false}}},
		{"resend numbers that skip continue the latest call", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
			b.Call(a, "A", "B", "op", 3*ms, 4*ms, C(Resend(3)))
		}, []callShape{{"B", 2, false}}},
		{"resend numbers: a success followed by resend 0 starts a new call", func(b *Trace, a graph.SpanID) {
			b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed, Resend(0)), Failed)
			b.Call(a, "A", "B", "op", 3*ms, 4*ms, C(Failed, Resend(0)), Failed)
		}, []callShape{{"B", 1, true}, {"B", 1, true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(2)
			a := b.Root("A", "GET /a", 0, 20*ms)
			tc.build(b, a)
			tr := assemble(b.Spans)
			if got := shape(tr, tr.Root); !slices.Equal(got, tc.want) {
				t.Fatalf("calls = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVirtualAndDirectAndInternal(t *testing.T) {
	b := New(3)
	a := b.Root("A", "GET /a", 0, 20*ms, Failed)
	// A CLIENT span without a SERVER child: a virtual node named by peer.
	b.Span(a, graph.KindClient, "A", "GET", 1*ms, 2*ms, Peer("redis"), Failed)
	// Through an INTERNAL span, and with another service.name (in-process
	// fake): still an attempt of A's hop.
	in := b.Span(a, graph.KindInternal, "A", "work", 3*ms, 9*ms)
	b.Call(in, "fake", "B", "GET /b", 4*ms, 5*ms, nil)
	// A SERVER span directly under A's SERVER span.
	b.Span(a, graph.KindServer, "C", "GET /c", 10*ms, 11*ms)
	tr := assemble(b.Spans)
	got := shape(tr, tr.Root)
	want := []callShape{{"redis", 1, true}, {"B", 1, false}, {"C", 1, false}}
	if !slices.Equal(got, want) {
		t.Fatalf("calls = %+v, want %+v", got, want)
	}
	redis := tr.Calls[tr.Hops[tr.Root].CallStart]
	if !redis.Virtual || redis.CalleeOperation != "GET" {
		t.Errorf("virtual call = %+v", redis)
	}
	v := tr.Hops[tr.Attempts[redis.AttemptStart].Callee]
	if !v.Virtual || !v.Failed || v.Service != "redis" {
		t.Errorf("virtual hop = %+v", v)
	}
	direct := tr.Calls[tr.Hops[tr.Root].CallStart+2]
	if tr.Attempts[direct.AttemptStart].Client != -1 {
		t.Errorf("direct SERVER child should have no CLIENT span")
	}
	if len(tr.Hops) != 4 {
		t.Errorf("hops = %d, want 4 (A, redis, B, C)", len(tr.Hops))
	}
}

// A CLIENT span that wraps CLIENT spans (a logical call around transport
// attempts) is transparent: its children are the attempts.
func TestTransparentClientWrapper(t *testing.T) {
	b := New(4)
	a := b.Root("A", "GET /a", 0, 20*ms)
	w := b.Span(a, graph.KindClient, "A", "logical", 1*ms, 9*ms)
	b.Call(w, "A", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
	b.Call(w, "A", "B", "op", 3*ms, 4*ms, nil)
	tr := assemble(b.Spans)
	if got, want := shape(tr, tr.Root), []callShape{{"B", 2, false}}; !slices.Equal(got, want) {
		t.Fatalf("calls = %+v, want %+v", got, want)
	}
}

func TestClaimsClientSideTrusted(t *testing.T) {
	b := New(5)
	a := b.Root("A", "GET /a", 0, 20*ms, Failed)
	b.Call(a, "A", "B", "op", 1*ms, 2*ms, C(Failed, Claim(graph.ClaimUnclaimed)), Failed, Claim(graph.ClaimClaimed))
	b.Call(a, "A", "C", "op", 3*ms, 4*ms, C(Failed), Failed, Claim(graph.ClaimClaimed))
	b.Call(a, "A", "D", "op", 5*ms, 6*ms, C(Failed, Claim(graph.ClaimInvalid)), Failed)
	tr := assemble(b.Spans)
	cases := []struct {
		svc      string
		claim    graph.Claim
		mismatch bool
	}{
		{"B", graph.ClaimUnclaimed, true},
		{"C", graph.ClaimClaimed, false},
		{"D", graph.ClaimInvalid, false},
	}
	for _, c := range cases {
		h := hopOf(t, tr, c.svc, 0)
		at := tr.Attempts[tr.Hops[h].In]
		if at.Claim != c.claim || at.Mismatch != c.mismatch {
			t.Errorf("%s: claim %v mismatch %v, want %v %v", c.svc, at.Claim, at.Mismatch, c.claim, c.mismatch)
		}
		if tr.ObservedClaim(h) != c.claim {
			t.Errorf("%s: observed %v", c.svc, tr.ObservedClaim(h))
		}
	}
}

func TestFragments(t *testing.T) {
	t.Run("client root", func(t *testing.T) {
		b := New(6)
		b.Call(graph.SpanID{}, "C", "D", "op", 0, 1*ms, C(Failed), Failed)
		tr := assemble(b.Spans)
		if tr.Root != -1 || tr.Fragments != 1 || tr.API() != "" {
			t.Fatalf("root %d fragments %d", tr.Root, tr.Fragments)
		}
		root := tr.Hops[tr.Roots[0]]
		if root.Service != "C" || !root.Fragment || root.CallEnd-root.CallStart != 1 {
			t.Fatalf("fragment root hop %+v", root)
		}
	})
	t.Run("missing parent", func(t *testing.T) {
		b := New(7)
		b.Root("A", "GET /a", 0, 10*ms)
		b.Span(SpanID(999), graph.KindServer, "B", "op", 1*ms, 2*ms)
		tr := assemble(b.Spans)
		if tr.Fragments != 1 || tr.API() != "A GET /a" || len(tr.Roots) != 2 {
			t.Fatalf("fragments %d api %q roots %d", tr.Fragments, tr.API(), len(tr.Roots))
		}
	})
	t.Run("self parent and cycle", func(t *testing.T) {
		b := New(8)
		b.Span(SpanID(1), graph.KindServer, "A", "op", 0, 1, ID(SpanID(1)))
		b.Span(SpanID(3), graph.KindServer, "B", "op", 0, 1, ID(SpanID(2)))
		b.Span(SpanID(2), graph.KindServer, "C", "op", 0, 1, ID(SpanID(3)))
		tr := assemble(b.Spans)
		// The self-parent and the cycle's smallest id (2) become roots.
		if tr.Fragments != 2 || len(tr.Roots) != 2 || len(tr.Hops) != 3 {
			t.Fatalf("fragments %d roots %d hops %d", tr.Fragments, len(tr.Roots), len(tr.Hops))
		}
		if s := tr.Spans[tr.Hops[tr.Roots[1]].Span]; s.SpanID != SpanID(2) && tr.Spans[tr.Hops[tr.Roots[0]].Span].SpanID != SpanID(2) {
			t.Errorf("cycle not broken at smallest id")
		}
	})
	t.Run("internal root is an API", func(t *testing.T) {
		// A cron job: a parentless INTERNAL span calling B. docs/SPEC.md §3: the
		// parentless span is the root hop unless it is a CLIENT span.
		b := New(9)
		in := b.Span(graph.SpanID{}, graph.KindInternal, "job", "tick", 0, 5*ms)
		b.Call(in, "job", "B", "op", 1*ms, 2*ms, nil)
		tr := assemble(b.Spans)
		if tr.Fragments != 0 || len(tr.Calls) != 1 || tr.API() != "job tick" || tr.RemoteParent {
			t.Fatalf("fragments %d calls %d api %q remote %v", tr.Fragments, len(tr.Calls), tr.API(), tr.RemoteParent)
		}
	})
	t.Run("consumer root is an API", func(t *testing.T) {
		b := New(19)
		b.Span(graph.SpanID{}, graph.KindConsumer, "worker", "orders process", 0, 5*ms)
		tr := assemble(b.Spans)
		if tr.Fragments != 0 || tr.API() != "worker orders process" {
			t.Fatalf("fragments %d api %q", tr.Fragments, tr.API())
		}
	})
	t.Run("remote parent", func(t *testing.T) {
		// The edge SERVER span's parent is a load balancer's span that is
		// not in the trace, and no span is parentless: the earliest
		// top-level SERVER span is the root hop, nothing is a fragment.
		b := New(20)
		lb := SpanID(900)
		a := b.Span(lb, graph.KindServer, "frontend", "GET /dispatch", 0, 10*ms, Failed)
		b.Call(a, "frontend", "B", "op", 1*ms, 2*ms, C(Failed), Failed)
		tr := assemble(b.Spans)
		if tr.Fragments != 0 || tr.API() != "frontend GET /dispatch" || !tr.RemoteParent || tr.Root < 0 || tr.Hops[tr.Root].Fragment {
			t.Fatalf("fragments %d api %q remote %v", tr.Fragments, tr.API(), tr.RemoteParent)
		}
		// A second SERVER span with a missing parent, later: a fragment (a
		// context drop), the earlier one stays the root.
		b.Span(SpanID(901), graph.KindServer, "C", "op", 3*ms, 4*ms)
		// An orphan INTERNAL span earlier than both is not a candidate.
		b.Span(SpanID(902), graph.KindInternal, "D", "work", -5*ms, 4*ms)
		tr = assemble(b.Spans)
		if tr.Fragments != 2 || tr.API() != "frontend GET /dispatch" || !tr.RemoteParent || len(tr.Roots) != 3 {
			t.Fatalf("fragments %d api %q remote %v roots %d", tr.Fragments, tr.API(), tr.RemoteParent, len(tr.Roots))
		}
	})
	t.Run("parentless client beats remote parent", func(t *testing.T) {
		// A parentless CLIENT span (a service that dropped its context)
		// means the trace has a parentless span, so a SERVER span with a
		// missing parent is not taken as root: both trees are fragments.
		b := New(21)
		b.Call(graph.SpanID{}, "C", "D", "op", 0, 1*ms, nil)
		b.Span(SpanID(903), graph.KindServer, "E", "op", 2*ms, 3*ms)
		tr := assemble(b.Spans)
		if tr.Root != -1 || tr.Fragments != 2 || tr.API() != "" || tr.RemoteParent {
			t.Fatalf("root %d fragments %d api %q", tr.Root, tr.Fragments, tr.API())
		}
	})
	t.Run("parentless server beats earlier remote parent", func(t *testing.T) {
		b := New(22)
		b.Span(SpanID(904), graph.KindServer, "X", "op", 0, 1*ms)
		b.Root("A", "GET /a", 5*ms, 10*ms)
		tr := assemble(b.Spans)
		if tr.API() != "A GET /a" || tr.RemoteParent || tr.Fragments != 1 {
			t.Fatalf("api %q remote %v fragments %d", tr.API(), tr.RemoteParent, tr.Fragments)
		}
	})
	t.Run("broken parents are never roots", func(t *testing.T) {
		b := New(23)
		b.Span(SpanID(1), graph.KindServer, "A", "op", 0, 1, ID(SpanID(1)))
		tr := assemble(b.Spans)
		if tr.Root != -1 || tr.Fragments != 1 {
			t.Fatalf("root %d fragments %d", tr.Root, tr.Fragments)
		}
	})
}

func TestDuplicatesAndOrderIndependence(t *testing.T) {
	b := New(10)
	a := b.Root("A", "GET /a", 0, 30*ms, Failed)
	s := b.Call(a, "A", "B", "op", 1*ms, 10*ms, C(Failed), Failed)
	b.Call(s, "B", "C", "op", 2*ms, 3*ms, C(Failed), Failed)
	b.Call(s, "B", "C", "op", 4*ms, 5*ms, C(Failed), Failed)
	b.Call(a, "A", "B", "op", 11*ms, 20*ms, C(Failed), Failed)
	b.Span(a, graph.KindClient, "A", "SELECT", 21*ms, 22*ms, Peer("pg"))
	spans := append(b.Spans, b.Spans[2], b.Spans[0]) // two duplicates
	ref := assemble(spans)
	if ref.Duplicates != 2 || len(ref.Spans) != len(b.Spans) {
		t.Fatalf("duplicates %d spans %d", ref.Duplicates, len(ref.Spans))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		sh := append([]graph.Span(nil), spans...)
		rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		tr := assemble(sh)
		if len(tr.Hops) != len(ref.Hops) || len(tr.Calls) != len(ref.Calls) {
			t.Fatalf("shuffle %d: %d hops %d calls, want %d %d", i, len(tr.Hops), len(tr.Calls), len(ref.Hops), len(ref.Calls))
		}
		for h := range ref.Hops {
			if tr.Hops[h].Service != ref.Hops[h].Service || tr.Hops[h].First != ref.Hops[h].First ||
				!slices.Equal(shape(tr, int32(h)), shape(ref, int32(h))) {
				t.Fatalf("shuffle %d: hop %d differs", i, h)
			}
		}
	}
	// A's calls: B (2 attempts: the second B started after the first
	// failed), pg. B's first hop: C retried once.
	if got, want := shape(ref, ref.Root), []callShape{{"B", 2, true}, {"pg", 1, false}}; !slices.Equal(got, want) {
		t.Errorf("root calls = %+v, want %+v", got, want)
	}
}

// Huge traces: a 100k-deep chain and a 100k fan-out assemble without
// recursion limits and in linear-ish time.
func TestHugeTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("huge traces")
	}
	b := New(11)
	p := b.Root("A", "op", 0, 1)
	for i := 0; i < 50_000; i++ {
		p = b.Call(p, "S", "S", "op", int64(i), int64(i)+1, nil)
	}
	tr := assemble(b.Spans)
	if len(tr.Hops) != 50_001 || tr.Hops[len(tr.Hops)-1].Depth != 50_000 {
		t.Fatalf("deep chain: %d hops, depth %d", len(tr.Hops), tr.Hops[len(tr.Hops)-1].Depth)
	}
	b = New(12)
	r := b.Root("A", "op", 0, 1)
	for i := 0; i < 100_000; i++ {
		b.Call(r, "A", "B", "op", 5, 6, C(Failed), Failed) // all overlapping: no retries
	}
	tr = assemble(b.Spans)
	if len(tr.Calls) != 100_000 {
		t.Fatalf("fan-out: %d calls, want 100000", len(tr.Calls))
	}
}

func TestGroupTraces(t *testing.T) {
	mk := func(trace, span byte) graph.Span {
		return graph.Span{TraceID: graph.TraceID{trace}, SpanID: graph.SpanID{span}}
	}
	spans := []graph.Span{mk(3, 1), mk(1, 1), mk(3, 2), mk(2, 1), mk(1, 2), mk(3, 3)}
	var g graph.Grouper
	g.Add(spans[:2])
	g.Add(spans[2:])
	if g.Len() != 6 {
		t.Fatalf("len %d", g.Len())
	}
	groups := g.Traces()
	want := [][]byte{{1, 2}, {1}, {1, 2, 3}} // traces 1, 2, 3, spans in arrival order
	if len(groups) != 3 {
		t.Fatalf("%d groups", len(groups))
	}
	for i, gr := range groups {
		if len(gr) != len(want[i]) || gr[0].TraceID[0] != byte(i+1) {
			t.Fatalf("group %d = %v", i, gr)
		}
		for j, s := range gr {
			if s.SpanID[0] != want[i][j] {
				t.Errorf("group %d span %d = %d", i, j, s.SpanID[0])
			}
		}
	}
	if g.Len() != 0 || graph.GroupTraces(nil) != nil {
		t.Error("not emptied")
	}
	// The same, one trace at a time through the Source interface.
	g.Add(spans)
	var src graph.Source = g.Group()
	var buf []graph.Span
	for i := 0; i < src.Len(); i++ {
		buf = src.Spans(i, buf)
		if len(buf) != len(want[i]) || buf[len(buf)-1].SpanID[0] != want[i][len(want[i])-1] || buf[0].TraceID[0] != byte(i+1) {
			t.Errorf("source trace %d = %v", i, buf)
		}
	}
}

// TestAssembleIn: traces assembled in an arena are those Assemble
// returns, every one intact once the arena has handed out several blocks
// (thousands of small traces, then one larger than a block, then one
// whose spans need mending), the spans lent are left as they were, and
// growing one trace's slice does not write into the next's.
func TestAssembleIn(t *testing.T) {
	var a graph.Assembler
	var ar graph.Arena
	var want, got []*graph.Trace
	add := func(spans []graph.Span) {
		want = append(want, assemble(spans))
		keep := slices.Clone(spans)
		got = append(got, a.AssembleIn(&ar, spans))
		if !slices.Equal(spans, keep) {
			t.Fatalf("trace %d: AssembleIn modified the spans it was lent", len(got)-1)
		}
	}
	for n := range 3000 {
		b := New(byte(n))
		r := b.Root("api", "GET /", 0, 100)
		for k := range n % 7 {
			b.Call(r, "api", "svc", "op", int64(k), int64(k)+1, C(Failed), Failed)
		}
		add(b.Spans)
	}
	b := New(1)
	p := b.Root("A", "op", 0, 1)
	for i := 0; i < 5000; i++ {
		p = b.Call(p, "S", "S", "op", int64(i), int64(i)+1, nil)
	}
	add(b.Spans)
	add(nil)
	// Spans to mend: a duplicate span id (the later, failed copy
	// preferred or not) and an end before its start.
	b = New(2)
	r := b.Root("api", "GET /", 0, 100)
	b.Call(r, "api", "svc", "op", 10, 5, C(Failed), Failed)
	b.Call(r, "api", "svc", "op", 20, 30, nil)
	dup := append(slices.Clone(b.Spans), b.Spans[len(b.Spans)-1])
	dup[len(dup)-1].Failed = true
	add(dup)
	for i := range want {
		w, g := want[i], got[i]
		if !slices.Equal(w.Hops, g.Hops) || !slices.Equal(w.Calls, g.Calls) || !slices.Equal(w.Attempts, g.Attempts) ||
			!slices.Equal(w.Roots, g.Roots) || w.Root != g.Root || w.APIName != g.APIName || w.SpanCount != g.SpanCount || w.Duplicates != g.Duplicates {
			t.Fatalf("trace %d: assembled in the arena differs from Assemble's", i)
		}
	}
	first, second := got[5], got[6]
	keep := slices.Clone(second.Hops)
	first.Hops = append(first.Hops, first.Hops[0])
	if !slices.Equal(second.Hops, keep) {
		t.Fatal("appending to a trace's hops wrote into the next trace's")
	}
}
