package analysis_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
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
	ref, _ := analysis.Batch(graph.Lists(clone(traces)), analysis.Config{}, 1)
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
		got, _ := analysis.Batch(graph.Lists(sh), analysis.Config{}, 1+i)
		if g := docJSON(t, got); g != want {
			t.Fatalf("shuffle %d: document differs:\n%s\nwant\n%s", i, g, want)
		}
	}
}

// Streaming: traces arrive one at a time into window states split across
// two instances; merged, the state equals the batch state, survives
// serialisation, and evaluating every trace against it reproduces the
// batch document. A trace re-opened by late spans is removed and re-added
// without a trace.
func TestStreamingMatchesBatch(t *testing.T) {
	traces := corpus(t, 300)
	ref, refState := analysis.Batch(graph.Lists(clone(traces)), analysis.Config{}, 2)

	w1, w2 := analysis.NewWindow(24*time.Hour), analysis.NewWindow(24*time.Hour)
	var asm graph.Assembler
	var assembled []*graph.Trace
	var last int64
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
		last = max(last, tr.Start())
	}
	s := w1.State(last)
	s.Merge(w2.State(last), 1)
	b1, _ := json.Marshal(s)
	b2, _ := json.Marshal(refState)
	if string(b1) != string(b2) {
		t.Fatalf("merged streaming state differs from batch state")
	}
	var back analysis.State
	if err := json.Unmarshal(b1, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, refState) {
		t.Fatalf("state does not round-trip")
	}
	ev := analysis.NewEvaluator(analysis.Config{})
	rep := analysis.NewReport()
	for i := len(assembled) - 1; i >= 0; i-- {
		r := ev.Evaluate(assembled[i], &back)
		rep.Add(&r)
	}
	if got, want := docJSON(t, rep.Document(&back, analysis.Config{})), docJSON(t, ref); got != want {
		t.Fatalf("streaming document differs:\n%s\nwant\n%s", got, want)
	}
}

// The window slides: a minute older than the window is not in the state.
func TestWindowSlides(t *testing.T) {
	var asm graph.Assembler
	mk := func(id byte, at time.Duration) *graph.Trace {
		return asm.Assemble([]graph.Span{{TraceID: graph.TraceID{id}, SpanID: graph.SpanID{1}, Kind: graph.KindServer,
			Service: "a", Operation: "op", Start: int64(at), End: int64(at) + 1, Failed: true}})
	}
	w := analysis.NewWindow(time.Hour)
	w.Add(mk(1, 0))
	w.Add(mk(2, 30*time.Minute))
	w.Add(mk(3, 90*time.Minute))
	if got := w.State(int64(90 * time.Minute)).Traces; got != 2 {
		t.Errorf("window at 1h30 holds %d traces, want 2", got)
	}
	if got := w.State(int64(59 * time.Minute)).Traces; got != 2 {
		t.Errorf("window at 0h59 holds %d traces, want 2", got)
	}
	w.Expire(int64(90 * time.Minute))
	if got := len(w.Buckets()); got != 2 {
		t.Errorf("%d buckets after expiry, want 2", got)
	}
}
