package analysis_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/sim"
)

// corpus returns the traces of a mixed scenario: naive and ownership
// services, a fail-open edge, a virtual node and a context drop.
func corpus(t testing.TB, traces int) [][]graph.Span {
	t.Helper()
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	naive := sim.Policy{Retry: sim.RetryNaive, Retries: 2}
	svcs := []sim.Service{
		{Name: "front", Operation: "GET /dispatch", Policy: own, Calls: []sim.Edge{{To: "route"}, {To: "ads", FailOpen: true}}},
		{Name: "route", Operation: "GET /route", Policy: naive, Calls: []sim.Edge{{To: "driver"}, {To: "redis", Virtual: true, Sequential: 2}}},
		{Name: "driver", Operation: "GET /driver", Policy: own, ErrorRate: 0.05},
		{Name: "ads", Operation: "GET /ads", Policy: own, ErrorRate: 0.3, Calls: []sim.Edge{{To: "geo"}}},
		{Name: "geo", Operation: "GET /geo", Policy: sim.Policy{Retry: sim.RetryNaive, Retries: 1, ContextDrop: true}, Calls: []sim.Edge{{To: "pg", Virtual: true}}},
	}
	_, spans := simulate(t, sim.Scenario{Services: svcs, Root: "front", Traces: traces, Seed: 42, Spacing: time.Second,
		Faults: []sim.Fault{{Service: "driver", Rate: 0.3, Persistent: true}, {Service: "redis", Rate: 0.1}, {Service: "pg", Rate: 0.2, Persistent: true}}})
	return graph.GroupTraces(spans)
}

func docJSON(t *testing.T, d *analysis.Document) string {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func clone(traces [][]graph.Span) [][]graph.Span {
	out := make([][]graph.Span, len(traces))
	for i, tr := range traces {
		out[i] = append([]graph.Span(nil), tr...)
	}
	return out
}

// The result never depends on trace order, span order or worker count.
func TestBatchOrderIndependent(t *testing.T) {
	traces := corpus(t, 400)
	ref, _ := analysis.InMemory(graph.Lists(clone(traces)), analysis.Config{}, 1)
	if ref.APIs[0].FailedTraces == 0 || ref.Fragments == 0 {
		t.Fatalf("corpus too tame: %+v", ref.APIs[0])
	}
	want := docJSON(t, ref)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3; i++ {
		sh := clone(traces)
		rng.Shuffle(len(sh), func(a, b int) { sh[a], sh[b] = sh[b], sh[a] })
		for _, tr := range sh {
			rng.Shuffle(len(tr), func(a, b int) { tr[a], tr[b] = tr[b], tr[a] })
		}
		got, _ := analysis.InMemory(graph.Lists(sh), analysis.Config{}, 1+i)
		if g := docJSON(t, got); g != want {
			t.Fatalf("shuffle %d: document differs:\n%s\nwant\n%s", i, g, want)
		}
	}
}

// Streaming: traces arrive one at a time into window states split across
// two instances (one-minute windows: the corpus spans five); merged, every
// window's state equals the batch state, survives serialisation, and
// evaluating every trace against its window reproduces the batch document.
// A trace re-opened by late spans is removed and re-added without a trace,
// in the windows as in the report.
func TestStreamingMatchesBatch(t *testing.T) {
	traces := corpus(t, 300)
	cfg := analysis.Config{Window: time.Minute}
	ref, refWindows := analysis.InMemory(graph.Lists(clone(traces)), cfg, 2)
	if n := len(refWindows.Indexes()); n < 5 {
		t.Fatalf("corpus spans %d windows, want ≥ 5", n)
	}
	w1, w2 := analysis.NewWindows(time.Minute), analysis.NewWindows(time.Minute)
	var asm graph.Assembler
	var assembled []*graph.Trace
	for i, spans := range clone(traces) {
		// Deliver the trace in two parts: first without its last span, then
		// whole (late spans re-open it).
		if len(spans) > 1 {
			early := asm.Assemble(append([]graph.Span(nil), spans[:len(spans)-1]...))
			w1.Add(early)
			w1.Remove(early)
		}
		tr := asm.Assemble(spans)
		assembled = append(assembled, tr)
		if i%2 == 0 {
			w1.Add(tr)
		} else {
			w2.Add(tr)
		}
	}
	w1.Merge(w2)
	back := analysis.NewWindows(time.Minute)
	for _, k := range refWindows.Indexes() {
		b1, _ := json.Marshal(w1.State(k))
		b2, _ := json.Marshal(refWindows.State(k))
		if string(b1) != string(b2) {
			t.Fatalf("window %d: merged streaming state differs from batch state", k)
		}
		var s analysis.State
		if err := json.Unmarshal(b1, &s); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&s, refWindows.State(k)) {
			t.Fatalf("window %d: state does not round-trip", k)
		}
		back.Put(k, &s)
	}
	if !slices.Equal(w1.Indexes(), refWindows.Indexes()) {
		t.Fatalf("windows %v, want %v", w1.Indexes(), refWindows.Indexes())
	}
	ev := analysis.NewEvaluator(cfg)
	rep := analysis.NewReport()
	for i := len(assembled) - 1; i >= 0; i-- {
		r := ev.Evaluate(assembled[i], back.State(back.Of(assembled[i])))
		rep.Add(&r, 1)
		if i%3 == 0 { // a result replaced: out and in again
			rep.Add(&r, -1)
			rep.Add(&r, 1)
		}
	}
	// Summaries survive serialisation too.
	var sums []*analysis.WindowSummary
	for _, s := range back.Summaries(cfg) {
		b, _ := json.Marshal(s)
		var again analysis.WindowSummary
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, &again)
	}
	// Incidents need per-minute detection, which the stores do (package
	// store's tests compare theirs with Batch's); here the rest.
	ref.Incidents = []analysis.IncidentDoc{}
	if got, want := docJSON(t, rep.Document(sums, cfg)), docJSON(t, ref); got != want {
		t.Fatalf("streaming document differs:\n%s\nwant\n%s", got, want)
	}
}

// A report minus some of its traces equals the report of the others.
func TestReportSubtracts(t *testing.T) {
	traces := corpus(t, 200)
	cfg := analysis.Config{}
	_, ws := analysis.InMemory(graph.Lists(clone(traces)), cfg, 1)
	var asm graph.Assembler
	ev := analysis.NewEvaluator(cfg)
	all, half := analysis.NewReport(), analysis.NewReport()
	for i, spans := range clone(traces) {
		tr := asm.Assemble(spans)
		r := ev.Evaluate(tr, ws.State(ws.Of(tr)))
		all.Add(&r, 1)
		if i%2 == 0 {
			half.Add(&r, 1)
		} else {
			all.Add(&r, 1) // counted twice, removed once below
			all.Add(&r, -1)
		}
	}
	for i, spans := range clone(traces) {
		if i%2 == 1 {
			tr := asm.Assemble(spans)
			r := ev.Evaluate(tr, ws.State(ws.Of(tr)))
			all.Add(&r, -1)
		}
	}
	sums := ws.Summaries(cfg)
	if got, want := docJSON(t, all.Document(sums, cfg)), docJSON(t, half.Document(sums, cfg)); got != want {
		t.Fatalf("subtracted report differs:\n%s\nwant\n%s", got, want)
	}
}

// Windows are aligned to the epoch (docs/SPEC.md §4.3): [k·W, (k+1)·W).
func TestWindowOf(t *testing.T) {
	h := int64(time.Hour)
	for _, c := range []struct{ at, want int64 }{
		{0, 0}, {h - 1, 0}, {h, 1}, {5*h + 7, 5}, {-1, -1}, {-h, -1}, {-h - 1, -2},
	} {
		if got := analysis.WindowOf(c.at, time.Hour); got != c.want {
			t.Errorf("WindowOf(%d) = %d, want %d", c.at, got, c.want)
		}
	}
	// A trace starting at 11:59:59 and one at 12:00:00 are in different
	// windows, whatever their ends.
	var asm graph.Assembler
	mk := func(id byte, at time.Duration) *graph.Trace {
		return asm.Assemble([]graph.Span{{TraceID: graph.TraceID{id}, SpanID: graph.SpanID{1}, Kind: graph.KindServer,
			Service: "a", Operation: "op", Start: int64(at), End: int64(at + 10*time.Second), Failed: true}})
	}
	w := analysis.NewWindows(time.Hour)
	a, b := w.Add(mk(1, 12*time.Hour-time.Second)), w.Add(mk(2, 12*time.Hour))
	if a != 11 || b != 12 || w.State(11).Traces != 1 || w.State(12).Traces != 1 {
		t.Errorf("windows %d %d", a, b)
	}
}

// The call graphs and edges of summaries, merged, give the call graph the
// windows' states give: what the REST API's /graph answers from stored
// summaries.
func TestMergeSummariesGraph(t *testing.T) {
	traces := corpus(t, 300)
	cfg := analysis.Config{Window: time.Minute}
	_, ws := analysis.InMemory(graph.Lists(clone(traces)), cfg, 1)
	var sums []*analysis.WindowSummary
	for _, s := range ws.Summaries(cfg) {
		b, _ := json.Marshal(s)
		var back analysis.WindowSummary
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, &back)
	}
	want, err := ws.Merged().Graph("front GET /dispatch", cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := analysis.MergeSummaries(sums).Graph("front GET /dispatch", cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) || len(want.Edges) < 3 {
		t.Fatalf("graph from summaries differs:\n%s\n%s", a, b)
	}
}
