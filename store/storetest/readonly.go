package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

// Fill stores the spans of the corpus's first n traces, one write each,
// and their records in one batch whose checkpoint is write n.
func Fill(t testing.TB, w store.Store, c *Corpus, n int) {
	t.Helper()
	ctx := context.Background()
	var changes []store.Change
	for i := range c.Traces[:n] {
		if _, err := w.WriteSpans(ctx, c.Spans[i]); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, store.Change{New: c.Record(i, uint64(n))})
	}
	if err := w.Apply(ctx, store.Batch{Changes: changes, Watermark: uint64(n)}); err != nil {
		t.Fatal(err)
	}
}

// ReadOnly checks a store opened read-only over what Fill(c, n) stored,
// with a window of an hour: it reads the stored figures and spans, and
// refuses every write with store.ErrReadOnly (write n+5 of the corpus's
// traces, as a probe).
func ReadOnly(t *testing.T, s store.Store, c *Corpus, n int) {
	t.Helper()
	ctx := context.Background()
	if s.Window() != time.Hour {
		t.Errorf("window %v, want the stored 1h", s.Window())
	}
	rep, err := s.Report(ctx, store.Query{})
	if err != nil || rep.Traces-rep.TracesExcess != int64(n) {
		t.Fatalf("report of the read-only store: %v, %v; want the %d traces written (received)", rep, err, n)
	}
	var est int64
	for _, r := range c.Results[:n] {
		est += r.W()
	}
	if rep.Traces != est {
		t.Fatalf("report of the read-only store: %d traces estimated, want %d (the written traces' weights)", rep.Traces, est)
	}
	if spans, err := s.TraceSpans(ctx, c.Traces[3].ID, nil); err != nil || len(spans) != len(c.Spans[3]) {
		t.Fatalf("spans of trace 3: %d, %v; want %d", len(spans), err, len(c.Spans[3]))
	}
	later := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC).UnixNano()
	more := store.Batch{Changes: []store.Change{{New: c.Record(n+5, uint64(n+10))}}, Watermark: uint64(n + 10)}
	writes := map[string]error{}
	_, writes["WriteSpans"] = s.WriteSpans(ctx, c.Spans[n+5])
	writes["Apply"] = s.Apply(ctx, more)
	writes["PutSummaries"] = s.PutSummaries(ctx, c.Windows.Summaries(analysis.Config{}))
	writes["DeleteBefore"] = s.DeleteBefore(ctx, later)
	if cp, ok := s.(store.Compactor); ok {
		writes["Compact"] = cp.Compact(ctx, later)
	}
	_, writes["AcquireLease"] = s.AcquireLease(ctx, store.NewLeaseHolder(), time.Minute)
	for what, err := range writes {
		if !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly", what, err)
		}
	}
}
