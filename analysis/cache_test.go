package analysis_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store/storetest"
)

// One Evaluator over hundreds of traces (its node and service indexes
// ranked once they stop growing, then growing again with other names):
// every result's nodes, services and versions are sorted by name, and
// their counts are those recounted from the trace's hops and events by
// hand.
func TestEvaluatorNodesAndServicesRecounted(t *testing.T) {
	traces, ws := windowed(
		storetest.NewCorpus(t, 200, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), time.Second).Spans,
		naiveChainCorpus(t).Spans,
		storetest.NewCorpus(t, 100, time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC), time.Second).Spans)
	cfg := analysis.Config{}
	ev := analysis.NewEvaluator(cfg)
	withVersions := 0
	defer func() {
		if withVersions < 100 {
			t.Errorf("%d traces with service versions: the versions are hardly checked", withVersions)
		}
	}()
	for i, tr := range traces {
		r := ev.Evaluate(tr, ws.State(ws.Of(tr)))
		hops := map[graph.Node]int64{}
		svcHops := map[string]int64{}
		versions := map[analysis.ServiceVersion]bool{}
		for _, h := range tr.Hops {
			hops[h.Key()]++
			svcHops[h.Service]++
			if !h.Virtual && h.Version != "" {
				versions[analysis.ServiceVersion{Service: h.Service, Version: h.Version}] = true
			}
		}
		if len(versions) > 0 {
			withVersions++
		}
		if len(r.Versions) != len(versions) {
			t.Fatalf("trace %d: %d versions, want %d", i, len(r.Versions), len(versions))
		}
		for k, v := range r.Versions {
			if !versions[v] || k > 0 && (r.Versions[k-1].Service > v.Service || r.Versions[k-1].Service == v.Service && r.Versions[k-1].Version >= v.Version) {
				t.Fatalf("trace %d: versions %v, want %v sorted", i, r.Versions, versions)
			}
		}
		owned := map[graph.Node]int64{}
		for _, e := range r.Events {
			owned[e.Owner]++
		}
		nodes := len(hops)
		for n := range owned {
			if _, ok := hops[n]; !ok {
				nodes++
			}
		}
		if len(r.Nodes) != nodes {
			t.Fatalf("trace %d: %d nodes, want %d", i, len(r.Nodes), nodes)
		}
		for k, n := range r.Nodes {
			if k > 0 && r.Nodes[k-1].Node.Compare(n.Node) >= 0 {
				t.Fatalf("trace %d: nodes out of order: %v before %v", i, r.Nodes[k-1].Node, n.Node)
			}
			if n.Requests != hops[n.Node] || n.Owned != owned[n.Node] {
				t.Fatalf("trace %d: node %v: %d requests, %d owned; want %d, %d", i, n.Node, n.Requests, n.Owned, hops[n.Node], owned[n.Node])
			}
		}
		if len(r.Services) != len(svcHops) {
			t.Fatalf("trace %d: %d services, want %d", i, len(r.Services), len(svcHops))
		}
		for k, s := range r.Services {
			if k > 0 && r.Services[k-1].Service >= s.Service {
				t.Fatalf("trace %d: services out of order: %q before %q", i, r.Services[k-1].Service, s.Service)
			}
			if s.Requests != svcHops[s.Service] {
				t.Fatalf("trace %d: service %q: %d requests, want %d", i, s.Service, s.Requests, svcHops[s.Service])
			}
		}
	}
}

// naiveChainCorpus is 100 traces of the chain of names (A→B→C→D unless
// given) with the last one down: names the storetest corpus does not
// have.
// windowed assembles the traces of the groups of spans, in order, and
// adds them to windows of an hour.
func windowed(groups ...[][]graph.Span) ([]*graph.Trace, *analysis.Windows) {
	var asm graph.Assembler
	var traces []*graph.Trace
	ws := analysis.NewWindows(time.Hour)
	for _, g := range groups {
		for _, spans := range g {
			tr := asm.Assemble(append([]graph.Span(nil), spans...))
			traces = append(traces, tr)
			ws.Add(tr)
		}
	}
	return traces, ws
}

func naiveChainCorpus(t *testing.T, names ...string) *storetest.Corpus {
	t.Helper()
	if len(names) == 0 {
		names = []string{"A", "B", "C", "D"}
	}
	_, spans := simulate(t, sim.Scenario{Services: sim.Chain(names, sim.Policy{Retry: sim.RetryNaive, Retries: 1}),
		Root: names[0], Faults: []sim.Fault{{Service: names[len(names)-1], Rate: 1, Persistent: true}}, Traces: 100, Seed: 9,
		Start: time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)})
	return &storetest.Corpus{Spans: graph.GroupTraces(spans)}
}

// Windows.Growing's states (a cache of their edges and nodes) sum what
// plain ones do, when traces are removed (a prune drops the cache: the
// stats it held are no longer the state's) and added again too.
func TestGrowingWindowsEqualPlain(t *testing.T) {
	c := storetest.NewCorpus(t, 200, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 5*time.Second)
	var asm graph.Assembler
	var traces []*graph.Trace
	// Two chains under one root API (A), one of them through E.
	spans := append(c.Spans, naiveChainCorpus(t).Spans...)
	for _, spans := range append(spans, naiveChainCorpus(t, "A", "B", "E").Spans...) {
		traces = append(traces, asm.Assemble(append([]graph.Span(nil), spans...)))
	}
	// Every trace with the rarest node (C, D or E) leaves (that node's stats, and
	// maybe others', are pruned from its window and from its API's call
	// graph while the rest stay), then comes back.
	has := func(tr *graph.Trace, n graph.Node) bool {
		for _, h := range tr.Hops {
			if h.Key() == n {
				return true
			}
		}
		return false
	}
	counts := map[graph.Node]int{}
	for _, tr := range traces {
		seen := map[graph.Node]bool{}
		for _, h := range tr.Hops {
			if !seen[h.Key()] {
				seen[h.Key()] = true
				counts[h.Key()]++
			}
		}
	}
	var rare graph.Node
	for n, c := range counts {
		if rare == (graph.Node{}) || c < counts[rare] {
			rare = n
		}
	}
	if counts[rare] == len(traces) {
		t.Fatalf("node %v in every trace: want one in some", rare)
	}
	plain, growing := analysis.NewWindows(time.Hour), analysis.NewWindows(time.Hour)
	growing.Growing()
	for _, w := range []*analysis.Windows{plain, growing} {
		for _, tr := range traces {
			w.Add(tr)
		}
		for _, tr := range traces {
			if has(tr, rare) {
				w.Remove(tr)
			}
		}
		for _, tr := range traces {
			if has(tr, rare) {
				w.Add(tr)
			}
		}
	}
	for _, k := range plain.Indexes() {
		a, _ := json.Marshal(plain.State(k))
		b, _ := json.Marshal(growing.State(k))
		if string(a) != string(b) {
			t.Fatalf("window %d: growing state differs:\n got %s\nwant %s", k, b, a)
		}
	}
}

// A report that had results subtracted (Prune drops what went back to
// zero, and the report's cache of aggregates with it) and added again
// equals one that only had them added.
func TestReportPrunedAndAddedAgain(t *testing.T) {
	c := storetest.NewCorpus(t, 100, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 5*time.Second)
	traces, ws := windowed(c.Spans, naiveChainCorpus(t, "A", "B", "E").Spans)
	cfg := analysis.Config{}
	ev := analysis.NewEvaluator(cfg)
	all, some, again := analysis.NewReport(), analysis.NewReport(), analysis.NewReport()
	for i, tr := range traces {
		r := ev.Evaluate(tr, ws.State(ws.Of(tr)))
		all.Add(&r, 1)
		again.Add(&r, 1)
		if i >= len(c.Spans) { // the chain's traces: names no other has
			some.Add(&r, 1)
		}
	}
	again.Merge(some, -1)
	if _, ok := again.Services["E"]; ok {
		t.Fatal("service E still in the report once its traces were subtracted")
	}
	for _, tr := range traces[len(c.Spans):] {
		r := ev.Evaluate(tr, ws.State(ws.Of(tr)))
		again.Add(&r, 1)
	}
	want, _ := json.Marshal(all.Document(nil, cfg))
	got, _ := json.Marshal(again.Document(nil, cfg))
	if string(got) != string(want) {
		t.Fatalf("report pruned and added again:\n got %s\nwant %s", got, want)
	}
}
