package offline_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/offline"
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
