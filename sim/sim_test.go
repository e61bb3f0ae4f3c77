package sim

import (
	"bytes"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// sv is a flattened span for assertions.
type sv struct {
	trace   int // index in Result.Traces
	service string
	kind    ptrace.SpanKind
	name    string
	id      pcommon.SpanID
	parent  pcommon.SpanID
	start   int64
	end     int64
	error   bool
	attrs   map[string]any
}

func flatten(t *testing.T, r *Result) []sv {
	t.Helper()
	var out []sv
	for ti, tr := range r.Traces {
		eachSpan([]ptrace.Traces{tr.Data}, func(_ int, rs ptrace.ResourceSpans, sp ptrace.Span) {
			if sp.TraceID() != tr.ID {
				t.Fatalf("span trace id %v != trace %v", sp.TraceID(), tr.ID)
			}
			name, _ := rs.Resource().Attributes().Get("service.name")
			out = append(out, sv{
				trace: ti, service: name.Str(), kind: sp.Kind(), name: sp.Name(),
				id: sp.SpanID(), parent: sp.ParentSpanID(),
				start: int64(sp.StartTimestamp()), end: int64(sp.EndTimestamp()),
				error: sp.Status().Code() == ptrace.StatusCodeError,
				attrs: sp.Attributes().AsRaw(),
			})
		})
	}
	return out
}

func filter(spans []sv, f func(s sv) bool) []sv {
	var out []sv
	for _, s := range spans {
		if f(s) {
			out = append(out, s)
		}
	}
	return out
}

func servers(spans []sv, service string) []sv {
	return filter(spans, func(s sv) bool { return s.kind == ptrace.SpanKindServer && s.service == service })
}

// clients returns the CLIENT spans of caller whose server.address (or
// peer.service) is callee.
func clients(spans []sv, caller, callee string) []sv {
	return filter(spans, func(s sv) bool {
		return s.kind == ptrace.SpanKindClient && s.service == caller &&
			(s.attrs["server.address"] == callee || s.attrs["peer.service"] == callee)
	})
}

func mustRun(t *testing.T, s Scenario) *Result {
	t.Helper()
	r, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantRequests(t *testing.T, r *Result, want map[string]int) {
	t.Helper()
	for name, n := range want {
		if got := r.Stats.Nodes[name].Requests; got != n {
			t.Errorf("requests at %s = %d, want %d", name, got, n)
		}
	}
}

var abcd = []string{"A", "B", "C", "D"}

// A→B→C→D, naive R=1 everywhere, D fails in every trace. Each level retries
// once what fails below it: D serves 2 per C request, C 2 per B request, B 2
// per A request: A=1, B=2, C=4, D=8 per trace. Hops per trace 15, each
// non-root hop has its CLIENT span: 14 → 29 spans per trace.
func TestChainNaive(t *testing.T) {
	const n = 3
	r := mustRun(t, Scenario{
		Services: Chain(abcd, Policy{Retry: RetryNaive, Retries: 1, ResendAttr: true, CriteriaAttr: true}),
		Root:     "A",
		Faults:   []Fault{{Service: "D", Rate: 1, Persistent: true}},
		Traces:   n,
		Seed:     1,
	})
	wantRequests(t, r, map[string]int{"A": 1 * n, "B": 2 * n, "C": 4 * n, "D": 8 * n})
	st := r.Stats
	if st.Spans != 29*n || st.Traces != n || st.Fragments != 0 || st.FailedRequests != n {
		t.Fatalf("stats %+v", st)
	}
	if got := st.Nodes["D"]; got.Owned != 8*n || got.InternalFailures != 8*n || got.Claimed != 0 {
		t.Errorf("D stats %+v", got)
	}
	if got := st.Nodes["B"]; got.Propagated != 2*n || got.Owned != 0 || got.Attempts != 4*n || got.Retries != 2*n {
		t.Errorf("B stats %+v", got)
	}
	spans := flatten(t, r)
	if len(spans) != st.Spans {
		t.Fatalf("%d spans in pdata, stats say %d", len(spans), st.Spans)
	}
	for i, tr := range r.Traces {
		if !tr.Failed || !tr.FaultActive || !tr.FaultFired || tr.Fragment || tr.Spans != 29 || tr.Root != "A" || tr.Request != i {
			t.Errorf("trace %d: %+v", i, tr)
		}
		if tr.Data.ResourceSpans().Len() != 4 {
			t.Errorf("trace %d: %d resources, want 4", i, tr.Data.ResourceSpans().Len())
		}
	}
	// A's CLIENT spans to B: the first attempt without resend count, the
	// retry with 1; both failed with 503, criteria satisfied only on the
	// first (the second had no retry left). No claims anywhere.
	ab := filter(clients(spans, "A", "B"), func(s sv) bool { return s.trace == 0 })
	if len(ab) != 2 {
		t.Fatalf("A→B attempts %d", len(ab))
	}
	if _, ok := ab[0].attrs["http.request.resend_count"]; ok {
		t.Error("first attempt has resend count")
	}
	if ab[1].attrs["http.request.resend_count"] != int64(1) {
		t.Errorf("retry resend count %v", ab[1].attrs["http.request.resend_count"])
	}
	if ab[0].attrs["retry.criteria_satisfied"] != true || ab[1].attrs["retry.criteria_satisfied"] != nil {
		t.Errorf("criteria %v %v", ab[0].attrs, ab[1].attrs)
	}
	if ab[1].start != ab[0].end+int64(RetryBackoff) {
		t.Errorf("retry starts %d, previous ended %d", ab[1].start, ab[0].end)
	}
	for _, s := range spans {
		if !s.error || s.attrs["http.response.status_code"] != int64(503) {
			t.Fatalf("span not failed: %+v", s)
		}
		if _, ok := s.attrs["error.claim"]; ok {
			t.Fatalf("claim without middleware: %+v", s)
		}
		if s.attrs["url.full"] != nil && s.attrs["url.full"] != "http://"+s.attrs["server.address"].(string)+":8080/"+s.attrs["server.address"].(string) {
			t.Errorf("url.full %v", s.attrs["url.full"])
		}
	}
}

// A→B→C→D, ownership + honest claims, R=1, D fails. C retries D once (D
// claims), then returns unclaimed (its call was retried); B sees unclaimed
// and suppresses its retry, so does A: A=1, B=1, C=1, D=2.
func TestChainOwnership(t *testing.T) {
	r := mustRun(t, Scenario{
		Services: Chain(abcd, Policy{Retry: RetryOwnership, Retries: 1, Claims: ClaimsHonest, ResendAttr: true, CriteriaAttr: true}),
		Root:     "A",
		Faults:   []Fault{{Service: "D", Rate: 1, Persistent: true}},
		Traces:   1,
	})
	wantRequests(t, r, map[string]int{"A": 1, "B": 1, "C": 1, "D": 2})
	spans := flatten(t, r)
	if len(spans) != 9 || r.Stats.Spans != 9 { // 5 hops + 4 CLIENT spans
		t.Fatalf("spans %d", len(spans))
	}
	claimOf := func(s sv) any { return s.attrs["error.claim"] }
	for _, d := range servers(spans, "D") {
		if claimOf(d) != "claimed" {
			t.Errorf("D claim %v", claimOf(d))
		}
	}
	for _, svc := range []string{"A", "B", "C"} {
		if c := claimOf(servers(spans, svc)[0]); c != "unclaimed" {
			t.Errorf("%s claim %v, want unclaimed", svc, c)
		}
	}
	bc := clients(spans, "B", "C")
	if len(bc) != 1 || bc[0].attrs["retry.suppressed"] != true || bc[0].attrs["retry.criteria_satisfied"] != true || claimOf(bc[0]) != "unclaimed" {
		t.Errorf("B→C %+v", bc)
	}
	cd := clients(spans, "C", "D")
	if len(cd) != 2 || claimOf(cd[0]) != "claimed" || cd[0].attrs["retry.suppressed"] != nil {
		t.Errorf("C→D %+v", cd)
	}
	if st := r.Stats.Nodes["B"]; st.Suppressed != 1 || st.Unclaimed != 1 || st.Retries != 0 {
		t.Errorf("B stats %+v", st)
	}
}

// The seed's three tables (chain A→…→G, D fails, R=1) over N=1000 traces.
// Token buckets start empty and earn 0.1 per call, so a caller retries
// exactly one call in ten: naive 1,2,4,8,8,8,8; budget
// 1000,1100,1210,1331,1331,1331,1331; ownership with B=0.1 only C retries
// D (an empty bucket still satisfies the retry criteria, so C unclaims):
// 1000,1000,1000,1100,1100,1100,1100.
func TestSeedTables(t *testing.T) {
	names := []string{"A", "B", "C", "D", "E", "F", "G"}
	run := func(p Policy) []int {
		r := mustRun(t, Scenario{Services: Chain(names, p), Root: "A", Traces: 1000, Seed: 7,
			Faults: []Fault{{Service: "D", Rate: 1, Persistent: true}}})
		var out []int
		for _, n := range names {
			out = append(out, r.Stats.Nodes[n].Requests)
		}
		return out
	}
	cases := []struct {
		name string
		p    Policy
		want []int
	}{
		{"naive", Policy{Retry: RetryNaive, Retries: 1}, []int{1000, 2000, 4000, 8000, 8000, 8000, 8000}},
		{"budget", Policy{Retry: RetryBudget, Retries: 1, Budget: 0.1}, []int{1000, 1100, 1210, 1331, 1331, 1331, 1331}},
		{"ownership", Policy{Retry: RetryOwnership, Retries: 1, Budget: 0.1, Claims: ClaimsHonest}, []int{1000, 1000, 1000, 1100, 1100, 1100, 1100}},
	}
	for _, c := range cases {
		if got := run(c.p); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The seed's "Context Drop Handling": A→B→C→D, ownership + honest, R=1, C
// drops context, D fails. C cannot correlate, so it claims: C retries D
// (D claims) and B retries C; B's call was retried, so B unclaims and A does
// not retry: A=1, B=1, C=2, D=4 (half of naive's 2, 4, 8). Every C→D attempt
// starts a fragment trace: 4 per request, rooted in a parentless CLIENT span
// of C.
func TestContextDrop(t *testing.T) {
	svcs := Chain(abcd, Policy{Retry: RetryOwnership, Retries: 1, Claims: ClaimsHonest, ResendAttr: true, CriteriaAttr: true})
	svcs[2].Policy.ContextDrop = true
	r := mustRun(t, Scenario{Services: svcs, Root: "A", Traces: 2, Seed: 3,
		Faults: []Fault{{Service: "D", Rate: 1, Persistent: true}}})
	wantRequests(t, r, map[string]int{"A": 2, "B": 2, "C": 4, "D": 8})
	st := r.Stats
	// Per request: main trace A srv, A cli, B srv, 2 B cli, 2 C srv = 7
	// spans; 4 fragments of C cli + D srv = 2 spans.
	if st.Fragments != 8 || st.Traces != 10 || st.Spans != 2*(7+4*2) || st.Nodes["C"].ContextDrops != 8 {
		t.Fatalf("stats %+v", st)
	}
	spans := flatten(t, r)
	ids := map[pcommon.TraceID]bool{}
	for i, tr := range r.Traces {
		ids[tr.ID] = true
		wantFrag := i%5 != 0
		if tr.Fragment != wantFrag || tr.Request != i/5 {
			t.Fatalf("trace %d: %+v", i, tr)
		}
		ts := filter(spans, func(s sv) bool { return s.trace == i })
		root := ts[0]
		if !root.parent.IsEmpty() {
			t.Errorf("trace %d first span has a parent", i)
		}
		if wantFrag {
			if len(ts) != 2 || root.kind != ptrace.SpanKindClient || root.service != "C" || tr.Root != "C" || !tr.Failed {
				t.Errorf("fragment %d: %+v", i, ts)
			}
		} else if root.kind != ptrace.SpanKindServer || root.service != "A" || len(ts) != 7 {
			t.Errorf("main trace %d: %d spans, root %+v", i, len(ts), root)
		}
	}
	if len(ids) != 10 {
		t.Errorf("%d distinct trace ids", len(ids))
	}
	for _, c := range servers(spans, "C") {
		if c.attrs["error.claim"] != "claimed" {
			t.Errorf("C claim %v", c.attrs["error.claim"])
		}
	}
	for _, b := range servers(spans, "B") {
		if b.attrs["error.claim"] != "unclaimed" {
			t.Errorf("B claim %v", b.attrs["error.claim"])
		}
	}
	for _, a := range clients(spans, "A", "B") {
		if a.attrs["retry.suppressed"] != true {
			t.Errorf("A→B not suppressed")
		}
	}
}

// Parallel=2: two sibling CLIENT spans with the same start and end and the
// same url.full; Sequential=3: three non-overlapping calls with distinct
// url.full.
func TestParallelSequential(t *testing.T) {
	r := mustRun(t, Scenario{
		Services: []Service{
			{Name: "A", Calls: []Edge{{To: "B", Parallel: 2}, {To: "C", Sequential: 3}, {To: "pg", Virtual: true, Sequential: 2, NameAttr: "db.system.name"}}},
			{Name: "B", Protocol: GRPC, Operation: "pkg.B/Get"},
			{Name: "C"},
		},
		Root: "A", Traces: 1,
	})
	wantRequests(t, r, map[string]int{"A": 1, "B": 2, "C": 3, "pg": 2})
	spans := flatten(t, r)
	ab := filter(spans, func(s sv) bool { return s.kind == ptrace.SpanKindClient && s.attrs["rpc.service"] == "pkg.B" })
	if len(ab) != 2 || ab[0].start != ab[1].start || ab[0].end != ab[1].end || ab[0].id == ab[1].id || ab[0].parent != ab[1].parent {
		t.Fatalf("parallel %+v", ab)
	}
	if ab[0].name != "pkg.B/Get" || ab[0].attrs["rpc.method"] != "Get" || ab[0].attrs["rpc.grpc.status_code"] != int64(0) || ab[0].error {
		t.Errorf("grpc client %+v", ab[0])
	}
	ac := clients(spans, "A", "C")
	if len(ac) != 3 {
		t.Fatalf("sequential %d", len(ac))
	}
	urls := map[any]bool{}
	for i, s := range ac {
		urls[s.attrs["url.full"]] = true
		if i > 0 && s.start < ac[i-1].end {
			t.Errorf("sequential calls overlap")
		}
	}
	if len(urls) != 3 {
		t.Errorf("url.full not distinct: %v", urls)
	}
	pg := filter(spans, func(s sv) bool { return s.attrs["db.system.name"] == "pg" })
	if len(pg) != 2 || pg[0].attrs["db.query.text"] == pg[1].attrs["db.query.text"] || pg[0].name != "SELECT" {
		t.Errorf("virtual %+v", pg)
	}
	// Timing: A starts at DefaultStart, first call after HopWork/2, the
	// callee's SERVER span NetworkDelay later and HopWork long.
	a := servers(spans, "A")[0]
	b := servers(spans, "B")[0]
	t0 := DefaultStart.UnixNano()
	if a.start != t0 || ab[0].start != t0+int64(HopWork/2) || b.start != ab[0].start+int64(NetworkDelay) ||
		b.end != b.start+int64(HopWork) || ab[0].end != b.end+int64(NetworkDelay) {
		t.Errorf("timing a=%+v ab=%+v b=%+v", a, ab[0], b)
	}
	// A's end: its calls are 2 parallel (1.1ms), 3 sequential (3.3ms), 2
	// virtual (0.4ms), plus its own work.
	want := t0 + int64(HopWork) + int64(4*(HopWork+2*NetworkDelay)) + int64(2*VirtualLatency)
	if a.end != want {
		t.Errorf("A ends at %d, want %d", a.end, want)
	}
	if st := r.Stats; st.Spans != 1+7+2+3 || st.FailedRequests != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A virtual redis failing every request, naive R=2: three attempts, with or
// without the resend attribute.
func TestResendAttr(t *testing.T) {
	for _, resend := range []bool{false, true} {
		r := mustRun(t, Scenario{
			Services: []Service{{Name: "A", Calls: []Edge{{To: "redis", Virtual: true, Op: "GET", FailOpen: true, DeclareFailOpen: true}},
				Policy: Policy{Retry: RetryNaive, Retries: 2, ResendAttr: resend}}},
			Root:   "A",
			Faults: []Fault{{Service: "redis", Rate: 1, Persistent: true}},
			Traces: 1,
		})
		spans := flatten(t, r)
		cl := clients(spans, "A", "redis")
		if len(cl) != 3 {
			t.Fatalf("attempts %d", len(cl))
		}
		for i, s := range cl {
			v, ok := s.attrs["retry.attempt"]
			_, ok2 := s.attrs["http.request.resend_count"]
			if ok2 || (resend && i > 0) != ok || (ok && v != int64(i)) {
				t.Errorf("resend=%v attempt %d attrs %v", resend, i, s.attrs)
			}
			if !s.error || s.name != "GET" || s.attrs["dependency.fail_open"] != true {
				t.Errorf("virtual span %+v", s)
			}
			if i > 0 && s.start != cl[i-1].end+int64(RetryBackoff) {
				t.Errorf("retry timing")
			}
		}
		// Fail-open: A absorbs the failure and owns nothing.
		if st := r.Stats; st.FailedRequests != 0 || st.Nodes["redis"].Requests != 3 || st.Nodes["redis"].Owned != 3 || st.Nodes["A"].FailedCalls != 1 {
			t.Errorf("stats %+v", st)
		}
	}
}

// Coincidental errors: A's own error always fires while its fail-open
// dependency B fails too; A retries B once. Honest claims (memory) claim;
// naive attribution blames B (the retried fail-open call) and unclaims.
func TestCoincidentalClaims(t *testing.T) {
	for _, mode := range []ClaimMode{ClaimsHonest, ClaimsNaiveAttribution, ClaimsAlways, ClaimsNone, ClaimsInvalid} {
		r := mustRun(t, Scenario{
			Services: []Service{
				{Name: "A", ErrorRate: 1, Calls: []Edge{{To: "B", FailOpen: true}},
					Policy: Policy{Retry: RetryNaive, Retries: 1, Claims: mode, Placement: ClaimHeader}},
				{Name: "B", Protocol: GRPC, Policy: Policy{Claims: ClaimsHonest, Placement: ClaimMetadata}},
			},
			Root: "A", Traces: 1, ClaimHeader: "x-uber-error-claim",
			Faults: []Fault{{Service: "B", Rate: 1}},
		})
		spans := flatten(t, r)
		a := servers(spans, "A")[0]
		want := map[ClaimMode]any{ClaimsHonest: "claimed", ClaimsNaiveAttribution: "unclaimed", ClaimsAlways: "claimed", ClaimsNone: nil, ClaimsInvalid: "bogus"}[mode]
		got := a.attrs["http.response.header.x-uber-error-claim"]
		if want == nil {
			if got != nil {
				t.Errorf("mode %d: claim %v", mode, got)
			}
		} else if arr, ok := got.([]any); !ok || len(arr) != 1 || arr[0] != want {
			t.Errorf("mode %d: claim %v, want [%v]", mode, got, want)
		}
		for _, c := range clients(spans, "A", "B") {
			if arr, ok := c.attrs["rpc.response.metadata.x-uber-error-claim"].([]any); !ok || arr[0] != "claimed" || c.attrs["rpc.grpc.status_code"] != int64(14) {
				t.Errorf("A→B %v", c.attrs)
			}
		}
		if st := r.Stats.Nodes["A"]; st.Owned != 1 || st.InternalFailures != 1 || st.Requests != 1 {
			t.Errorf("A stats %+v", st)
		}
		if !r.Traces[0].FaultFired || r.Traces[0].FaultActive {
			t.Errorf("trace %+v", r.Traces[0])
		}
	}
}

// RetryNone gives no retry criteria: the honest service claims the error
// it propagates (at least once), so its caller retries it.
func TestAtLeastOnce(t *testing.T) {
	svcs := Chain([]string{"A", "B", "C"}, Policy{Retry: RetryOwnership, Retries: 1, Claims: ClaimsHonest, CriteriaAttr: true})
	svcs[1].Policy.Retry = RetryNone
	r := mustRun(t, Scenario{Services: svcs, Root: "A", Traces: 1, Faults: []Fault{{Service: "C", Rate: 1, Persistent: true}}})
	// A retries B once (B claimed), B never retries C: A=1, B=2, C=2.
	wantRequests(t, r, map[string]int{"A": 1, "B": 2, "C": 2})
	spans := flatten(t, r)
	for _, b := range servers(spans, "B") {
		if b.attrs["error.claim"] != "claimed" {
			t.Errorf("B claim %v", b.attrs["error.claim"])
		}
	}
	if a := servers(spans, "A")[0]; a.attrs["error.claim"] != "unclaimed" {
		t.Errorf("A claim %v", a.attrs["error.claim"])
	}
	for _, c := range clients(spans, "B", "C") {
		if c.attrs["retry.criteria_satisfied"] != nil {
			t.Errorf("criteria without retries")
		}
	}
}

func TestFaultWindowAndRates(t *testing.T) {
	r := mustRun(t, Scenario{
		Services: Chain([]string{"A", "B"}, Policy{}),
		Root:     "A", Traces: 2000, Seed: 11, Spacing: time.Millisecond,
		Faults: []Fault{{Service: "B", Rate: 1, Persistent: true, FromTrace: 100, ToTrace: 200},
			{Service: "B", Rate: 0.3, Persistent: true, FromTrace: 1000}},
	})
	active := 0
	for i, tr := range r.Traces {
		if i >= 100 && i < 200 && !tr.FaultActive {
			t.Fatalf("trace %d: fault not active", i)
		}
		if i < 100 || (i >= 200 && i < 1000) {
			if tr.FaultActive || tr.Failed {
				t.Fatalf("trace %d: fault outside window", i)
			}
		}
		if i >= 1000 && tr.FaultActive {
			active++
		}
		if tr.Failed != tr.FaultActive {
			t.Fatalf("trace %d: failed %v active %v", i, tr.Failed, tr.FaultActive)
		}
		sp := tr.Data.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		if want := DefaultStart.Add(time.Duration(i) * time.Millisecond).UnixNano(); int64(sp.StartTimestamp()) != want {
			t.Fatalf("trace %d starts %d, want %d", i, sp.StartTimestamp(), want)
		}
	}
	if active < 240 || active > 360 {
		t.Errorf("persistent 30%% fault active in %d of 1000", active)
	}
}

func TestValidation(t *testing.T) {
	ok := Chain([]string{"A", "B"}, Policy{})
	cycle := Chain([]string{"A", "B", "C"}, Policy{})
	cycle[2].Calls = []Edge{{To: "A"}}
	cases := map[string]Scenario{
		"unknown callee": {Services: []Service{{Name: "A", Calls: []Edge{{To: "X"}}}}, Root: "A"},
		"cycle":          {Services: cycle, Root: "A"},
		"self":           {Services: []Service{{Name: "A", Calls: []Edge{{To: "A"}}}}, Root: "A"},
		"unknown root":   {Services: ok, Root: "Z"},
		"no root":        {Services: ok},
		"fault":          {Services: ok, Root: "A", Faults: []Fault{{Service: "Q", Rate: 1}}},
		"rate":           {Services: ok, Root: "A", Faults: []Fault{{Service: "B", Rate: 2}}},
		"dup service":    {Services: append(Chain([]string{"A"}, Policy{}), Service{Name: "A"}), Root: "A"},
		"dup edge":       {Services: []Service{{Name: "A", Calls: []Edge{{To: "B"}, {To: "B"}}}, {Name: "B"}}, Root: "A"},
		"virtual clash":  {Services: []Service{{Name: "A", Calls: []Edge{{To: "B", Virtual: true}}}, {Name: "B"}}, Root: "A"},
	}
	for name, s := range cases {
		if _, err := Run(s); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Run(Scenario{Services: ok, Root: "A", Traces: 1}); err != nil {
		t.Error(err)
	}
}

func meshScenario(seed uint64, traces int) Scenario {
	return meshScenarioDepth(seed, traces, 25)
}

func meshScenarioDepth(seed uint64, traces, depth int) Scenario {
	s := Mesh(MeshConfig{Seed: seed, APIs: 4, Depth: depth, Fanout: 3, ErrorRate: 0.006, FailOpen: 0.3, GRPC: 0.3,
		Policy: Policy{Retry: RetryOwnership, Retries: 1, Budget: 0.2, Claims: ClaimsHonest, ResendAttr: true, CriteriaAttr: true}})
	s.Traces = traces
	s.Faults = []Fault{{Service: "svc-" + strconv.Itoa(depth/2) + "-1", Rate: 0.05, Persistent: true}, {Service: "db-leaf-0", Rate: 0.02}}
	return s
}

func TestDeterminismAndRoundTrip(t *testing.T) {
	run := func(seed uint64) (*Result, []byte, []byte) {
		r := mustRun(t, meshScenarioDepth(seed, 60, 12))
		var js, pb bytes.Buffer
		if err := r.WriteJSONLines(&js); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteProto(&pb); err != nil {
			t.Fatal(err)
		}
		return r, js.Bytes(), pb.Bytes()
	}
	r1, j1, p1 := run(5)
	_, j2, p2 := run(5)
	_, j3, _ := run(6)
	if !bytes.Equal(j1, j2) || !bytes.Equal(p1, p2) {
		t.Fatal("same seed, different output")
	}
	if bytes.Equal(j1, j3) {
		t.Fatal("different seeds, same output")
	}
	if n := bytes.Count(j1, []byte("\n")); n != len(r1.Traces) {
		t.Fatalf("%d lines for %d traces", n, len(r1.Traces))
	}
	fromJSON, err := ReadJSONLines(bytes.NewReader(j1))
	if err != nil {
		t.Fatal(err)
	}
	fromProto, err := ReadProto(bytes.NewReader(p1))
	if err != nil {
		t.Fatal(err)
	}
	if len(fromJSON) != len(r1.Traces) || len(fromProto) != len(r1.Traces) {
		t.Fatalf("read %d / %d traces, want %d", len(fromJSON), len(fromProto), len(r1.Traces))
	}
	var pm ptrace.ProtoMarshaler
	for i, tr := range r1.Traces {
		want, _ := pm.MarshalTraces(tr.Data)
		for _, td := range []ptrace.Traces{fromJSON[i], fromProto[i]} {
			got, _ := pm.MarshalTraces(td)
			if !bytes.Equal(got, want) {
				t.Fatalf("trace %d does not round-trip", i)
			}
		}
	}
	// One JSON line is an ExportTraceServiceRequest.
	first, _, _ := bytes.Cut(j1, []byte("\n"))
	if !bytes.HasPrefix(first, []byte(`{"resourceSpans":[`)) {
		t.Errorf("line starts %q", first[:40])
	}
}

func TestMesh(t *testing.T) {
	r := mustRun(t, meshScenario(9, 400))
	st := r.Stats
	spans := flatten(t, r)
	if len(spans) != st.Spans {
		t.Fatalf("%d spans, stats %d", len(spans), st.Spans)
	}
	// Depth: the longest chain of SERVER spans is 25 hops.
	depth := map[pcommon.SpanID]int{}
	parentOf := map[pcommon.SpanID]pcommon.SpanID{}
	kind := map[pcommon.SpanID]ptrace.SpanKind{}
	for _, s := range spans {
		parentOf[s.id] = s.parent
		kind[s.id] = s.kind
	}
	var hops func(id pcommon.SpanID) int
	hops = func(id pcommon.SpanID) int {
		if id.IsEmpty() {
			return 0
		}
		if d, ok := depth[id]; ok {
			return d
		}
		d := hops(parentOf[id])
		if kind[id] == ptrace.SpanKindServer {
			d++
		}
		depth[id] = d
		return d
	}
	maxDepth := 0
	for _, s := range spans {
		maxDepth = max(maxDepth, hops(s.id))
	}
	if maxDepth != 25 {
		t.Errorf("max depth %d, want 25", maxDepth)
	}
	failed, rootFailed, roots := 0, 0, map[string]int{}
	for _, tr := range r.Traces {
		if tr.FailedSpans > 0 {
			failed++
		}
		if tr.Failed {
			rootFailed++
		}
		roots[tr.Root]++
	}
	if len(roots) != 4 || roots["api-0"] != 100 {
		t.Errorf("roots %v", roots)
	}
	frac := float64(failed) / float64(len(r.Traces))
	t.Logf("mesh: %d traces, %d spans (%.0f/trace), %.0f%% with failures, %d failed at the root",
		len(r.Traces), st.Spans, float64(st.Spans)/float64(len(r.Traces)), 100*frac, rootFailed)
	if frac < 0.15 || frac > 0.5 {
		t.Errorf("failed fraction %.2f", frac)
	}
	// Names and attributes follow the conventions.
	for _, s := range spans {
		if s.kind == ptrace.SpanKindServer && strings.HasPrefix(s.service, "api-") && s.attrs["http.route"] == nil {
			t.Fatalf("api span without route %+v", s)
		}
	}
}

// Write produces the same bytes as Run + WriteJSONLines / WriteProto, and
// stops on a writer error.
func TestWrite(t *testing.T) {
	s := meshScenarioDepth(2, 60, 12)
	s.Services[3].Policy.ContextDrop = true // some fragments too
	r := mustRun(t, s)
	if r.Stats.Fragments == 0 {
		t.Fatal("no fragments")
	}
	for _, f := range []Format{JSONLines, Proto} {
		var want, got bytes.Buffer
		if f == JSONLines {
			_ = r.WriteJSONLines(&want)
		} else {
			_ = r.WriteProto(&want)
		}
		st, err := Write(s, &got, f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Errorf("format %d: Write differs from Run (%d vs %d bytes)", f, got.Len(), want.Len())
		}
		if st.Spans != r.Stats.Spans || st.Fragments != r.Stats.Fragments || st.Nodes["api-0"] != r.Stats.Nodes["api-0"] {
			t.Errorf("stats differ")
		}
	}
	if _, err := Write(s, failWriter{}, Proto); err != io.ErrShortWrite {
		t.Errorf("err %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

func TestGenerateStopsOnError(t *testing.T) {
	n := 0
	_, err := Generate(Scenario{Services: Chain([]string{"A"}, Policy{}), Root: "A", Traces: 10}, func(Trace) error {
		n++
		if n == 3 {
			return bytes.ErrTooLarge
		}
		return nil
	})
	if err != bytes.ErrTooLarge || n != 3 {
		t.Fatalf("err %v after %d", err, n)
	}
}

func BenchmarkGenerate(b *testing.B) {
	s := meshScenario(1, 0)
	s.Traces = 2000
	spans := 0
	b.ResetTimer()
	for b.Loop() {
		st, err := Generate(s, func(Trace) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		spans += st.Spans
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}

func BenchmarkWriteJSON(b *testing.B) { benchWrite(b, JSONLines) }

func BenchmarkWriteProto(b *testing.B) { benchWrite(b, Proto) }

func benchWrite(b *testing.B, f Format) {
	s := meshScenario(1, 0)
	s.Traces = 2000
	spans := 0
	for b.Loop() {
		st, err := Write(s, io.Discard, f)
		if err != nil {
			b.Fatal(err)
		}
		spans += st.Spans
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}

// Exports keeps every span once, in pieces of one service's spans of one
// trace.
func TestExports(t *testing.T) {
	res, err := Run(Scenario{Services: Chain([]string{"A", "B", "C"}, Policy{Retry: RetryNaive, Retries: 1}), Root: "A", Traces: 20, Seed: 3,
		Faults: []Fault{{Service: "C", Rate: 0.5}}})
	if err != nil {
		t.Fatal(err)
	}
	ex := res.Exports(1, 7, 0)
	spans, pieces := 0, 0
	for _, td := range ex {
		spans += td.SpanCount()
		pieces += td.ResourceSpans().Len()
		if td.ResourceSpans().Len() > 7 {
			t.Fatalf("request with %d pieces", td.ResourceSpans().Len())
		}
	}
	want := 0
	for _, tr := range res.Traces {
		want += tr.Data.ResourceSpans().Len()
	}
	if spans != res.Stats.Spans || pieces != want {
		t.Fatalf("%d spans in %d pieces, want %d in %d", spans, pieces, res.Stats.Spans, want)
	}
}
