package offline_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	shapes "github.com/stormradius/stormradius/internal/corpus"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store/storetest"
)

// Analyze gives analysis.InMemory's document whatever the buffer size:
// with a buffer of 50 spans and shuffled input most traces are analysed
// early, many several times (re-opened from the spill file).
func TestAnalyzeEqualsInMemory(t *testing.T) {
	c := storetest.NewCorpus(t, 300, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2*time.Second)
	acfg := analysis.Config{Window: 10 * time.Minute}
	want := storetest.DocJSON(t, c.Document(acfg))
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	inOrder := slices.Clone(all) // each trace's spans together: the store is not sorted
	rand.New(rand.NewPCG(4, 4)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	if !strings.Contains(want, `"incidents":[{`) {
		t.Fatal("the corpus has no incident: the incidents' figures are not compared")
	}
	// With the incidents' figures from per-minute sums (the default), and
	// from the workers' result files (one minute kept per worker); with a
	// budget of one byte (spilling every 1,024 spans); on one core and on
	// two.
	for _, tc := range []struct {
		pending, minutes, procs int
		budget                  int64
		inOrder                 bool
	}{{50, 360, 2, 0, false}, {1 << 20, 360, 2, 0, false}, {50, 1, 2, 0, false}, {1 << 20, 1, 2, 0, false},
		{50, 360, 1, 0, false}, {1 << 20, 1, 1, 0, false}, {0, 360, 1, 1, false}, {0, 1, 2, 1, false},
		{1 << 20, 360, 1, 0, true}, {1 << 20, 1, 2, 0, true}} {
		pending := tc.pending
		all := all
		if tc.inOrder {
			// Every trace's spans in one stretch: the store is read in
			// place, not copied into trace order first.
			all = inOrder
			defer offline.SetMinRunSpans(offline.SetMinRunSpans(1))
		}
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
		defer offline.SetMaxMinuteResults(offline.SetMaxMinuteResults(tc.minutes))
		read := func(emit func([]graph.Span) error) error {
			for lo := 0; lo < len(all); lo += 37 {
				if err := emit(all[lo:min(lo+37, len(all))]); err != nil {
					return err
				}
			}
			return nil
		}
		doc, _, st, err := offline.Analyze(context.Background(), read, offline.Config{Analysis: acfg, MaxPendingSpans: pending,
			MemoryBudget: tc.budget, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if (pending == 50 || tc.budget == 1) && (st.Reopened == 0 || st.FlushedEarly == 0) {
			t.Fatalf("%+v: %+v, want early flushes and re-opens", tc, st)
		}
		if got := storetest.DocJSON(t, doc); got != want {
			t.Fatalf("%+v: offline document differs:\n got %s\nwant %s", tc, got, want)
		}
	}
}

// TestAnalyzeCapsInTraceIDOrder: past a window's caps, which names are
// admitted depends on the order traces are visited (96 APIs, each a chain
// of services of its own, and room for 200 services: the traces in
// another order admit other APIs' services). Analyze admits
// them in trace id order whatever the input's order: a first visit in
// the order the store saw the traces that folds a name is done again in
// trace id order. Its document is InMemory's over the traces sorted by
// id, for the input in two orders, in memory and spilled, on one core.
func TestAnalyzeCapsInTraceIDOrder(t *testing.T) {
	s, _ := shapes.ByName("services", 20_000)
	traces, _, err := s.Decode(sim.Proto)
	if err != nil {
		t.Fatal(err)
	}
	acfg := analysis.Config{Limits: analysis.Limits{Services: 200}}
	byID := slices.Clone(traces)
	slices.SortFunc(byID, func(a, b []graph.Span) int { return bytes.Compare(a[0].TraceID[:], b[0].TraceID[:]) })
	ref, _ := analysis.InMemory(graph.Lists(clone(byID)), acfg, 1)
	want := storetest.DocJSON(t, ref)
	shuffled := slices.Clone(traces)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	inInput, _ := analysis.InMemory(graph.Lists(clone(shuffled)), acfg, 1)
	if storetest.DocJSON(t, inInput) == want {
		t.Fatal("the order of the traces changes nothing here: the test would not test it")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, tc := range []struct {
		name    string
		traces  [][]graph.Span
		pending int
	}{{"by id", byID, 0}, {"shuffled", shuffled, 0}, {"shuffled, spilled", shuffled, 5000}} {
		read := func(emit func([]graph.Span) error) error {
			for _, tr := range tc.traces {
				if err := emit(tr); err != nil {
					return err
				}
			}
			return nil
		}
		doc, _, st, err := offline.Analyze(context.Background(), read, offline.Config{Analysis: acfg, MaxPendingSpans: tc.pending, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if st.Folded == (analysis.FoldCounts{}) {
			t.Fatalf("%s: nothing folded: the caps are not reached", tc.name)
		}
		if got := storetest.DocJSON(t, doc); got != want {
			t.Errorf("%s: the document is not the one of names admitted in trace id order\n got %.400s\nwant %.400s", tc.name, got, want)
		}
	}
}

// clone copies every trace's spans (InMemory takes them over).
func clone(traces [][]graph.Span) [][]graph.Span {
	out := make([][]graph.Span, len(traces))
	for i, tr := range traces {
		out[i] = slices.Clone(tr)
	}
	return out
}
