package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// A range selects the same traces and windows in `analyze` (offline) as in
// `report` (the store): the two documents are equal for a range that cuts
// a window.
func TestAnalyzeRangeEqualsReport(t *testing.T) {
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
	doc, _, _, err := offline.Analyze(ctx, func(emit func([]graph.Span) error) error { return emit(all) },
		offline.Config{Analysis: c2.Analysis, Range: q, TempDir: t.TempDir()})
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
