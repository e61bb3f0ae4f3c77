package pipeline_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// Batch mode gives analysis.Batch's document whatever the buffer size:
// with a buffer of 50 spans and shuffled input most traces are analysed
// early, many several times (re-opened from the spill file).
func TestBatchEqualsInMemory(t *testing.T) {
	c := storetest.NewCorpus(t, 300, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2*time.Second)
	acfg := analysis.Config{Window: 10 * time.Minute}
	want := reference(t, c, acfg)
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	rand.New(rand.NewPCG(4, 4)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	if !strings.Contains(want, `"incidents":[{`) {
		t.Fatal("the corpus has no incident: the incidents' figures are not compared")
	}
	// With the incidents' figures from per-minute sums (the default), and
	// from the workers' result files (one minute kept per worker).
	for _, tc := range []struct{ pending, minutes int }{{50, 360}, {1 << 20, 360}, {50, 1}, {1 << 20, 1}} {
		pending := tc.pending
		defer pipeline.SetMaxMinuteResults(pipeline.SetMaxMinuteResults(tc.minutes))
		read := func(emit func([]graph.Span) error) error {
			for lo := 0; lo < len(all); lo += 37 {
				if err := emit(all[lo:min(lo+37, len(all))]); err != nil {
					return err
				}
			}
			return nil
		}
		doc, _, st, err := pipeline.Batch(context.Background(), read, pipeline.BatchConfig{Analysis: acfg, MaxPendingSpans: pending, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if pending == 50 && (st.Reopened == 0 || st.FlushedEarly == 0) {
			t.Fatalf("buffer of 50: %+v, want early flushes and re-opens", st)
		}
		if got := docJSON(t, doc); got != want {
			t.Fatalf("buffer %d, %d minutes' sums: batch document differs:\n got %s\nwant %s", pending, tc.minutes, got, want)
		}
	}
}

// A range selects the same traces and windows in `analyze` (batch) as in
// `report` (the store): the two documents are equal for a range that cuts
// a window.
func TestBatchRangeEqualsReport(t *testing.T) {
	c := storetest.NewCorpus(t, 300, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2*time.Second)
	c2 := cfg()
	st := openStore(t, t.TempDir())
	defer st.Close()
	p, stop := start(t, st, c2)
	defer stop()
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	ctx := context.Background()
	feed(t, p, [][]graph.Span{all})
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	q := store.Query{From: time.Date(2026, 3, 1, 10, 3, 30, 0, time.UTC).UnixNano(), To: time.Date(2026, 3, 1, 10, 6, 0, 0, time.UTC).UnixNano()}
	fromStore, err := query.Document(ctx, st, q, c2.Analysis)
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _, err := pipeline.Batch(ctx, func(emit func([]graph.Span) error) error { return emit(all) },
		pipeline.BatchConfig{Analysis: c2.Analysis, Range: q, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if fromStore.Traces == 0 || fromStore.Traces == int64(len(c.Spans)) {
		t.Fatalf("range selects %d of %d traces: not a cut", fromStore.Traces, len(c.Spans))
	}
	if got, want := docJSON(t, doc), docJSON(t, fromStore); got != want {
		t.Fatalf("analyze over a range differs from report:\n got %s\nwant %s", got, want)
	}
}
