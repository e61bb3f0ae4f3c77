package analysis_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/sim"
)

// simulate runs sc and decodes its OTLP output like ingest does.
func simulate(t testing.TB, sc sim.Scenario) (*sim.Result, []graph.Span) {
	t.Helper()
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	dec := ingest.NewDecoder(ingest.DecoderConfig{})
	var spans []graph.Span
	for _, tr := range res.Traces {
		spans = dec.AppendTraces(spans, tr.Data)
	}
	return res, spans
}

// run simulates sc and analyses its traces as one batch.
func run(t *testing.T, sc sim.Scenario) (*sim.Result, *analysis.Document) {
	t.Helper()
	res, spans := simulate(t, sc)
	doc, _ := analysis.InMemory(graph.Lists(graph.GroupTraces(spans)), analysis.Config{}, 2)
	// The document must be valid JSON with the SPEC field names.
	if _, err := json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	return res, doc
}

func api(t *testing.T, d *analysis.Document, name string) analysis.APIDoc {
	t.Helper()
	for _, a := range d.APIs {
		if a.API == name {
			return a
		}
	}
	t.Fatalf("no API %q in %+v", name, d.APIs)
	return analysis.APIDoc{}
}

func service(t *testing.T, d *analysis.Document, name string) analysis.ServiceDoc {
	t.Helper()
	for _, s := range d.Services {
		if s.Service == name {
			return s
		}
	}
	t.Fatalf("no service %q", name)
	return analysis.ServiceDoc{}
}

func edge(t *testing.T, d *analysis.Document, caller, callee string) analysis.EdgeDoc {
	t.Helper()
	for _, e := range d.Edges {
		if e.Caller == caller && e.CalleeService == callee {
			return e
		}
	}
	t.Fatalf("no edge %s -> %s", caller, callee)
	return analysis.EdgeDoc{}
}

func owners(a analysis.APIDoc) map[string]int64 {
	m := map[string]int64{}
	for _, o := range a.Owners {
		m[o.Service] += o.OwnedFailures
	}
	return m
}

func claims(c analysis.ClaimsDoc) [5]int64 {
	return [5]int64{c.Correct, c.FalseClaim, c.FalseUnclaim, c.Missing, c.Invalid}
}

// persistent makes name fail in every trace.
func persistent(name string) []sim.Fault {
	return []sim.Fault{{Service: name, Rate: 1, Persistent: true}}
}

const n = 10 // traces per scenario

var abcd = []string{"A", "B", "C", "D"}

// Naive chain A→B→C→D, one retry at every hop, no claims, D down in every
// trace. Per trace (worked out on paper): A makes 2 attempts to B, each B 2
// to C, each C 2 to D: A 1, B 2, C 4, D 8 hops. Each D hop owns a failure
// event whose error propagates to A; levels 1–3 (C→D, B→C, A→B) are all
// retried: radius 3 for every event and trace. Amplification of D: 8 owner
// hops / 1 first-attempt hop = 8. Every edge already made its max attempts
// (2): the naive replay adds nothing, 0 spurious requests; nothing was
// unclaimed: 0 suppressed. Claims: every failed hop answered nothing:
// missing 8, 4, 2, 1 per trace for D, C, B, A. Nobody speaks claims, every
// edge retries: potential radius 3 with or without ownership. The failure
// memory counts logical calls, not attempts: each of the 4 C hops per trace
// makes one call of 2 attempts to D, so C→D saw 4n = 40 failed calls, all
// with C failed → learned fail-close; B→C 2n = 20 → learned; A makes one
// call per trace: A→B 10 failed calls < 20 → default.
// With and without resend attributes (timing-inferred retries) the result
// is the same.
func TestScenarioNaiveChain(t *testing.T) {
	for _, resend := range []bool{true, false} {
		pol := sim.Policy{Retry: sim.RetryNaive, Retries: 1, ResendAttr: resend}
		res, d := run(t, sim.Scenario{Services: sim.Chain(abcd, pol), Root: "A", Faults: persistent("D"), Traces: n, Seed: 1})
		a := api(t, d, "A GET /A")
		if a.Traces != n || a.FailedTraces != n || a.MaxRadius != 3 || a.MeanRadius != 3 {
			t.Fatalf("resend=%v: %+v", resend, a)
		}
		if a.RadiusHistogram["3"] != n || len(a.RadiusHistogram) != 1 {
			t.Errorf("histogram %v", a.RadiusHistogram)
		}
		if a.MaxAmplification != 8 || a.SuppressedRetries != 0 || a.SpuriousRequestsPrevented != 0 {
			t.Errorf("amp %v suppressed %d spurious %d", a.MaxAmplification, a.SuppressedRetries, a.SpuriousRequestsPrevented)
		}
		if o := owners(a); o["D"] != 8*n || len(o) != 1 {
			t.Errorf("owners %v", o)
		}
		if a.PotentialRadius != 3 || a.PotentialWithout != 3 {
			t.Errorf("potential %d/%d", a.PotentialRadius, a.PotentialWithout)
		}
		for svc, missing := range map[string]int64{"A": 1, "B": 2, "C": 4, "D": 8} {
			if got := claims(service(t, d, svc).Claims); got != [5]int64{0, 0, 0, missing * n, 0} {
				t.Errorf("%s claims %v", svc, got)
			}
		}
		if e := edge(t, d, "C", "D"); e.FailOpen || e.FailOpenSource != "learned" || e.FailedCalls != 4*n {
			t.Errorf("C->D %+v", e)
		}
		if e := edge(t, d, "A", "B"); e.FailOpen || e.FailOpenSource != "default" {
			t.Errorf("A->B %+v", e)
		}
		if d.Fleet.MaxRadius != 3 || d.Fleet.MeanRadius != 3 || d.Spans != int64(res.Stats.Spans) || d.Traces != n {
			t.Errorf("fleet %+v spans %d (sim %d) traces %d", d.Fleet, d.Spans, res.Stats.Spans, d.Traces)
		}
		// Hops per trace 15, as the simulator counts requests served.
		served := 0
		for _, ns := range res.Stats.Nodes {
			served += ns.Requests
		}
		if a.Requests != int64(served) || a.Requests != 15*n {
			t.Errorf("requests %d, sim served %d", a.Requests, served)
		}
	}
}

// Ownership chain: every service runs the protocol, R=1. C retries D once
// (D claims), then answers unclaimed (criteria satisfied: it retried); B
// and A decline to retry (retry.suppressed). Per trace: A, B, C, D, D.
// Events: the 2 D hops; level 1 retried only: radius 1. Amplification 2.
// Suppressed: B→C and A→B = 2 per trace. Naive replay with M_e = 2 on each
// retry-enabled edge: 1 + 2 + 4 + 8 = 15 hops vs 5: 10 spurious per trace.
// At D: 8 counterfactual vs 2 actual: load increase avoided 300%. All
// claims correct: D 2, C 1, B 1, A 1 per trace. Potential: D claims, C, B, A
// seen unclaiming what they propagate: only level 1 would retry → 1;
// without ownership every edge retries → 3.
func TestScenarioOwnershipChain(t *testing.T) {
	pol := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, ResendAttr: true, CriteriaAttr: true}
	_, d := run(t, sim.Scenario{Services: sim.Chain(abcd, pol), Root: "A", Faults: persistent("D"), Traces: n, Seed: 2})
	a := api(t, d, "A GET /A")
	if a.MaxRadius != 1 || a.MeanRadius != 1 || a.MaxAmplification != 2 || a.SuppressedRetries != 2*n ||
		a.SpuriousRequestsPrevented != 10*n || a.Requests != 5*n {
		t.Fatalf("%+v", a)
	}
	if a.PotentialRadius != 1 || a.PotentialWithout != 3 {
		t.Errorf("potential %d/%d, want 1/3", a.PotentialRadius, a.PotentialWithout)
	}
	for svc, correct := range map[string]int64{"A": 1, "B": 1, "C": 1, "D": 2} {
		if got := claims(service(t, d, svc).Claims); got != [5]int64{correct * n, 0, 0, 0, 0} {
			t.Errorf("%s claims %v", svc, got)
		}
	}
	// At the owner D: its own 2 hops would have been 8 (load increase
	// avoided 300%), and the 10 spurious requests of each of its traces
	// are its own (the only owner).
	dd := service(t, d, "D")
	if dd.Requests != 2*n || dd.CounterfactualRequests != 8*n || dd.LoadIncreaseAvoided != 3 || dd.OwnedFailures != 2*n ||
		dd.SpuriousRequestsPrevented != 10*n {
		t.Errorf("D %+v", dd)
	}
	if o := a.Owners[0]; o.Service != "D" || o.SpuriousRequestsPrevented != 10*n {
		t.Errorf("owner %+v", o)
	}
	if b := service(t, d, "B"); b.SpuriousRequestsPrevented != 0 || b.CounterfactualRequests != 2*n {
		t.Errorf("B %+v", b)
	}
}

// Missing middleware: C runs naive retries and no claim middleware. D
// claims; C retries it, fails and answers nothing; B sees a missing claim
// and retries C; each C retries D: per trace A 1, B 1, C 2, D 4 = 8 hops.
// B propagated through a retried call: unclaimed; A suppresses. Events: 4
// D hops, levels 1 (C→D) and 2 (B→C) retried, 3 (A→B) not: radius 2.
// Amplification 4. Claims: C missing 2 per trace, the rest correct.
// Suppressed 1 per trace (A→B). Replay 15 hops: 7 spurious per trace.
// Potential: C does not speak claims: owner D → level 1, C answers missing
// → level 2 retries, B unclaims → 2.
func TestScenarioMissingMiddleware(t *testing.T) {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, ResendAttr: true, CriteriaAttr: true}
	svcs := sim.Chain(abcd, own)
	svcs[2].Policy = sim.Policy{Retry: sim.RetryNaive, Retries: 1}
	_, d := run(t, sim.Scenario{Services: svcs, Root: "A", Faults: persistent("D"), Traces: n, Seed: 3})
	a := api(t, d, "A GET /A")
	if a.MaxRadius != 2 || a.MaxAmplification != 4 || a.SuppressedRetries != n || a.SpuriousRequestsPrevented != 7*n || a.Requests != 8*n {
		t.Fatalf("%+v", a)
	}
	if a.PotentialRadius != 2 || a.PotentialWithout != 3 {
		t.Errorf("potential %d/%d, want 2/3", a.PotentialRadius, a.PotentialWithout)
	}
	if got := claims(service(t, d, "C").Claims); got != [5]int64{0, 0, 0, 2 * n, 0} {
		t.Errorf("C claims %v", got)
	}
	if got := claims(service(t, d, "D").Claims); got != [5]int64{4 * n, 0, 0, 0, 0} {
		t.Errorf("D claims %v", got)
	}
}

// Dishonest claim: C always claims. D fails, C retries D twice and claims
// the propagated error; B retries C: A 1, B 1, C 2, D 4. Radius 2. The
// claim audit catches C: 2 false claims per trace (expected unclaimed: it
// retried). Potential: C seen claiming what it propagates → level 2
// retries → 2.
func TestScenarioDishonestClaim(t *testing.T) {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, ResendAttr: true, CriteriaAttr: true}
	svcs := sim.Chain(abcd, own)
	svcs[2].Policy.Claims = sim.ClaimsAlways
	_, d := run(t, sim.Scenario{Services: svcs, Root: "A", Faults: persistent("D"), Traces: n, Seed: 4})
	a := api(t, d, "A GET /A")
	if a.MaxRadius != 2 || a.Requests != 8*n || a.PotentialRadius != 2 {
		t.Fatalf("%+v", a)
	}
	if got := claims(service(t, d, "C").Claims); got != [5]int64{0, 2 * n, 0, 0, 0} {
		t.Errorf("C claims %v, want 2n false claims", got)
	}
}

// Context drop (the seed's figure 14): C loses context. Each of C's
// attempts to D starts a new trace. C cannot correlate, so it claims its
// errors; B retries C; B answers unclaimed; A does not retry. Main trace:
// A, B, C, C; each C hop makes 2 attempts to D in fragments: 4 fragment
// traces per request (the seed's halving: B 1, C 2, D 4). In the main
// trace the C hops own their errors (their calls are elsewhere): 2 events,
// level 1 (B→C) retried: radius 1. Fragments: 4n, all context drops of C.
func TestScenarioContextDrop(t *testing.T) {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, ResendAttr: true, CriteriaAttr: true}
	svcs := sim.Chain(abcd, own)
	svcs[2].Policy.ContextDrop = true
	res, d := run(t, sim.Scenario{Services: svcs, Root: "A", Faults: persistent("D"), Traces: n, Seed: 5})
	if res.Stats.Nodes["D"].Requests != 4*n {
		t.Fatalf("sim: D served %d, want %d", res.Stats.Nodes["D"].Requests, 4*n)
	}
	if d.Fragments != 4*n || d.Traces != 5*n {
		t.Fatalf("fragments %d traces %d, want %d %d", d.Fragments, d.Traces, 4*n, 5*n)
	}
	c := service(t, d, "C")
	if c.ContextDrops != 4*n {
		t.Errorf("C context drops %d", c.ContextDrops)
	}
	if got := claims(c.Claims); got != [5]int64{2 * n, 0, 0, 0, 0} {
		t.Errorf("C claims %v: claiming what it cannot correlate is right", got)
	}
	a := api(t, d, "A GET /A")
	if a.Traces != n || a.MaxRadius != 1 || owners(a)["C"] != 2*n || len(d.APIs) != 1 {
		t.Errorf("%+v (apis %d)", a, len(d.APIs))
	}
}

// Fan-out is not a retry: A calls B twice in parallel; B is down; nobody
// retries. 2 calls of 1 attempt each: 2 events of radius 0, and both B
// hops are first attempts: amplification 1, not 2. With one naive retry per
// call: each call gets its own retry (they overlap each other but follow
// their own first attempt): radius 1, amplification 4 / 2 = 2 — inferred
// from timing, or from resend numbers.
func TestScenarioFanOutIsNotRetry(t *testing.T) {
	for _, tc := range []struct {
		retry   sim.RetryKind
		resend  bool
		radius  int
		amp     float64
		retried int64
	}{
		{sim.RetryNone, false, 0, 1, 0},
		{sim.RetryNaive, false, 1, 2, 2 * n},
		{sim.RetryNaive, true, 1, 2, 2 * n}, // resend numbers: same grouping
	} {
		svcs := []sim.Service{
			{Name: "A", Operation: "GET /a", Calls: []sim.Edge{{To: "B", Parallel: 2}}, Policy: sim.Policy{Retry: tc.retry, Retries: 1, ResendAttr: tc.resend}},
			{Name: "B", Operation: "GET /b"},
		}
		_, d := run(t, sim.Scenario{Services: svcs, Root: "A", Faults: persistent("B"), Traces: n, Seed: 6})
		a := api(t, d, "A GET /a")
		if a.MaxRadius != tc.radius || a.MaxAmplification != tc.amp {
			t.Errorf("%v: radius %d amp %v, want %d %v", tc.retry, a.MaxRadius, a.MaxAmplification, tc.radius, tc.amp)
		}
		if e := edge(t, d, "A", "B"); e.Calls != 2*n || e.RetriedCalls != tc.retried {
			t.Errorf("%v: edge %+v", tc.retry, e)
		}
	}
}

// Learned vs declared fail-open, and coincidental errors. A calls X and Y
// (fail-open, not declared) and Z (fail-open, declared). X, Y, Z are each
// down in 10% of traces; A fails on its own in 10% of requests. The memory
// learns X and Y fail-open (A failed in ~10% of their failures, < 0.5,
// with ≥ 20 failures); Z is declared. A blames any failed downstream
// (naive attribution): of its own errors, those coinciding with a failed
// dependency are unclaimed — misattributed. With three independent
// dependencies at 10%, the expected share is 1 − 0.9³ = 27.1% (docs/SPEC.md §4.7's
// formula). An honest A (failure memory) claims them all: 0 misattributed,
// while the naive attributor would still have misattributed the same share.
func TestScenarioCoincidentalErrors(t *testing.T) {
	const traces = 3000
	for _, mode := range []sim.ClaimMode{sim.ClaimsNaiveAttribution, sim.ClaimsHonest} {
		pol := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: mode, CriteriaAttr: true, ResendAttr: true}
		svcs := []sim.Service{
			{Name: "A", Operation: "GET /a", ErrorRate: 0.1, Policy: pol, Calls: []sim.Edge{
				{To: "X", FailOpen: true}, {To: "Y", FailOpen: true}, {To: "Z", FailOpen: true, DeclareFailOpen: true}}},
			{Name: "X", Operation: "GET /x", Policy: pol},
			{Name: "Y", Operation: "GET /y", Policy: pol},
			{Name: "Z", Operation: "GET /z", Policy: pol},
		}
		faults := []sim.Fault{{Service: "X", Rate: 0.1, Persistent: true}, {Service: "Y", Rate: 0.1, Persistent: true}, {Service: "Z", Rate: 0.1, Persistent: true}}
		res, d := run(t, sim.Scenario{Services: svcs, Root: "A", Faults: faults, Traces: traces, Seed: 7})
		for _, x := range []string{"X", "Y"} {
			if e := edge(t, d, "A", x); !e.FailOpen || e.FailOpenSource != "learned" {
				t.Errorf("A->%s %+v, want learned fail-open", x, e)
			}
		}
		if e := edge(t, d, "A", "Z"); !e.FailOpen || e.FailOpenSource != "declared" {
			t.Errorf("A->Z %+v, want declared fail-open", e)
		}
		own := float64(res.Stats.Nodes["A"].InternalFailures)
		a := service(t, d, "A")
		// Binomial tolerance: 4 standard deviations.
		want := 1 - math.Pow(0.9, 3)
		tol := 4 * math.Sqrt(want*(1-want)/own)
		naive := float64(a.NaiveMisattributedErrors) / own
		if math.Abs(naive-want) > tol {
			t.Errorf("%v: naive misattributed %v of A's own errors, want %.3f ± %.3f", mode, naive, want, tol)
		}
		got := float64(a.MisattributedErrors) / own
		if mode == sim.ClaimsHonest && a.MisattributedErrors != 0 {
			t.Errorf("honest: %d misattributed, want 0", a.MisattributedErrors)
		}
		if mode == sim.ClaimsNaiveAttribution && a.MisattributedErrors != a.NaiveMisattributedErrors {
			t.Errorf("naive attribution: %d misattributed, want all %d (%v)", a.MisattributedErrors, a.NaiveMisattributedErrors, got)
		}
		if api(t, d, "A GET /a").MisattributedErrors != a.MisattributedErrors {
			t.Errorf("per-API misattributions differ from A's")
		}
	}
}

// A 26-service chain (depth 25). Naive retries, every service failing on
// its own now and then: every edge is seen retried and nobody speaks
// claims, so a failing leaf could drive retries at all 25 levels —
// potential radius 25 with or without ownership.
//
// Error ownership everywhere, the leaf failing persistently: the leaf's
// caller retries it (level 1) and every hop above is offered an unclaimed
// error, declines the retry and says so (retry.suppressed): every edge is
// retry-enabled. Everybody speaks claims; an owner claims, a propagating
// node was seen to unclaim: only level 1 would retry — potential radius 1
// (the seed: 25 → 3, here the ideal fleet); without ownership every
// retry-enabled level counts: 25. The observed max radius is 1, so the
// floor at the observed radius (docs/SPEC.md §4.5) changes nothing. (With
// sporadic errors everywhere, coincident errors at two levels make real
// radii far above 1 even under ownership, and the floor would show them.)
func TestScenarioPotentialRadiusDeepChain(t *testing.T) {
	names := make([]string, 26)
	for i := range names {
		names[i] = string(rune('a'+i)) + "svc"
	}
	svcs := sim.Chain(names, sim.Policy{Retry: sim.RetryNaive, Retries: 1})
	for i := range svcs {
		svcs[i].ErrorRate = 0.05
	}
	_, d := run(t, sim.Scenario{Services: svcs, Root: names[0], Traces: 300, Seed: 8})
	if a := d.APIs[0]; a.PotentialRadius != 25 || a.PotentialWithout != 25 {
		t.Errorf("naive: potential %d/%d, want 25/25", a.PotentialRadius, a.PotentialWithout)
	}

	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	_, d = run(t, sim.Scenario{Services: sim.Chain(names, own), Root: names[0], Traces: 50, Seed: 8,
		Faults: []sim.Fault{{Service: names[25], Rate: 1, Persistent: true}}})
	if a := d.APIs[0]; a.PotentialRadius != 1 || a.PotentialWithout != 25 || a.MaxRadius != 1 {
		t.Errorf("ownership: potential %d/%d max radius %d, want 1/25, 1", a.PotentialRadius, a.PotentialWithout, a.MaxRadius)
	}
}

// The per-API call graph of the missing-middleware scenario (see above):
// per trace A→B 1 call (1 attempt, failed, unclaimed), B→C 1 call (2
// attempts, failed, missing), C→D 2 calls (2 attempts each, failed,
// claimed). Nodes: A 1, B 1, C 2, D 4 requests.
func TestScenarioCallGraph(t *testing.T) {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, ResendAttr: true, CriteriaAttr: true}
	svcs := sim.Chain(abcd, own)
	svcs[2].Policy = sim.Policy{Retry: sim.RetryNaive, Retries: 1}
	_, spans := simulate(t, sim.Scenario{Services: svcs, Root: "A", Faults: persistent("D"), Traces: n, Seed: 3})
	_, state := analysis.InMemory(graph.Lists(graph.GroupTraces(spans)), analysis.Config{}, 1)
	g, err := state.Merged().Graph("A GET /A", analysis.Config{})
	if err != nil {
		t.Fatal(err)
	}
	wantNodes := map[string]int64{"A": n, "B": n, "C": 2 * n, "D": 4 * n}
	for _, nd := range g.Nodes {
		if nd.Requests != wantNodes[nd.Service] || nd.Failed != wantNodes[nd.Service] {
			t.Errorf("node %+v, want %d requests, all failed", nd, wantNodes[nd.Service])
		}
	}
	type want struct {
		calls, attempts, retried int64
		by                       analysis.ClaimCounts
		max                      int
		retryEnabled             bool
	}
	wantEdges := map[string]want{
		"A": {n, n, 0, analysis.ClaimCounts{Unclaimed: n}, 1, true}, // retry-enabled: suppressed
		"B": {n, 2 * n, n, analysis.ClaimCounts{Missing: n}, 2, true},
		"C": {2 * n, 4 * n, 2 * n, analysis.ClaimCounts{Claimed: 2 * n}, 2, true},
	}
	if len(g.Edges) != 3 {
		t.Fatalf("%d edges", len(g.Edges))
	}
	for _, e := range g.Edges {
		w := wantEdges[e.From.Service]
		if e.Calls != w.calls || e.Attempts != w.attempts || e.Retried != w.retried || e.FailedBy != w.by ||
			e.MaxAttempts != w.max || e.RetryEnabled != w.retryEnabled || e.FailOpen {
			t.Errorf("edge %s->%s %+v, want %+v", e.From.Service, e.To.Service, e, w)
		}
	}
	if _, err := state.Merged().Graph("nope", analysis.Config{}); err == nil {
		t.Error("unknown API: want error")
	}
}

// Invalid claims and claim mismatches. C answers a claim that is neither
// claimed nor unclaimed: its 2 failed hops per trace are audited invalid,
// and B treats the value as missing and retries C. Per trace: A, B, C, C,
// D×4.
func TestScenarioInvalidClaims(t *testing.T) {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, ResendAttr: true, CriteriaAttr: true}
	svcs := sim.Chain(abcd, own)
	svcs[2].Policy.Claims = sim.ClaimsInvalid
	_, d := run(t, sim.Scenario{Services: svcs, Root: "A", Faults: persistent("D"), Traces: n, Seed: 10})
	if got := claims(service(t, d, "C").Claims); got != [5]int64{0, 0, 0, 0, 2 * n} {
		t.Errorf("C claims %v, want 2n invalid", got)
	}
	if a := api(t, d, "A GET /A"); a.Requests != 8*n || a.MaxRadius != 2 {
		t.Errorf("%+v", a)
	}
}
