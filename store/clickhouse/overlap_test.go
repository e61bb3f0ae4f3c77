package clickhouse

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

var _ store.SpanWriteStarter = (*Store)(nil)

// Span writes overlap (store.SpanWriteStarter): sequences follow the
// order the writes started, whichever insert is acknowledged first; a
// write whose commit fails keeps its number (the next write gets a higher
// one) and stores nothing; SpansAfter reads the writes stored in sequence
// order, skipping the failed one; Close waits for a commit in flight.
func TestOverlappingSpanWrites(t *testing.T) {
	dsn := freshDatabase(t, server(t))
	s := open(t, dsn, time.Hour)
	defer s.Close()
	c := storetest.NewCorpus(t, 4, time.Now().Truncate(time.Hour), time.Second)
	ctx := context.Background()
	var seqs [4]uint64
	var commits [4]func(context.Context) error
	for i := range 4 {
		var err error
		if seqs[i], commits[i], err = s.StartSpans(ctx, c.Spans[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 4; i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("sequences %v: not taken in the order the writes started", seqs)
		}
	}
	// Committed out of order: the last first; the second never reaches
	// the server (its context ended before the insert was sent).
	if err := commits[3](ctx); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := commits[1](gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit with an ended context: %v, want context.Canceled", err)
	}
	if err := commits[0](ctx); err != nil {
		t.Fatal(err)
	}
	if err := commits[0](ctx); err == nil {
		t.Fatal("a write committed twice")
	}
	// The store closes before the last commit: Close waits for it.
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a write started and not committed", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := commits[2](ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	s = open(t, dsn, time.Hour)
	defer s.Close()
	var got []uint64
	var spans [][]graph.Span
	if err := s.SpansAfter(ctx, 0, func(seq uint64, sp []graph.Span) error {
		got = append(got, seq)
		spans = append(spans, slices.Clone(sp))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{seqs[0], seqs[2], seqs[3]}; !slices.Equal(got, want) {
		t.Fatalf("writes read back %v, want %v (the failed one, %d, skipped)", got, want, seqs[1])
	}
	for k, i := range []int{0, 2, 3} {
		if !sameSpans(spans[k], c.Spans[i]) {
			t.Errorf("write %d read back with other spans", got[k])
		}
	}
	// The failed write's number is not reused.
	seq, err := s.WriteSpans(ctx, c.Spans[1])
	if err != nil {
		t.Fatal(err)
	}
	if seq != seqs[3]+1 {
		t.Fatalf("write after reopening got sequence %d, want %d", seq, seqs[3]+1)
	}
}

// sameSpans reports whether a and b hold the same spans, in any order.
func sameSpans(a, b []graph.Span) bool {
	key := func(s []graph.Span) []graph.SpanID {
		ids := make([]graph.SpanID, len(s))
		for i := range s {
			ids[i] = s[i].SpanID
		}
		slices.SortFunc(ids, func(x, y graph.SpanID) int { return slices.Compare(x[:], y[:]) })
		return ids
	}
	return slices.Equal(key(a), key(b))
}
