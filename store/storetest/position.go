package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// testPosition: every kind of write moves the write position before it
// returns; reads do not move it; a second handle over the same data (what
// another process sees) sees a write within a few poll intervals.
func testPosition(t *testing.T, open Opener) {
	start := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	c := NewCorpus(t, 40, start, 5*time.Minute) // 22:00 on the 1st to 01:15 on the 2nd
	s := open(t, true)
	defer s.Close()
	x := ctx(t)
	var changes []store.Change
	for i := range c.Traces[:30] {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	states := map[int64]*analysis.State{}
	for _, w := range c.Windows.Indexes() {
		states[w] = c.Windows.State(w)
	}
	movesPosition(t, x, s, "Apply", func() error { return s.Apply(x, store.Batch{Changes: changes, States: states, Watermark: 1}) })
	movesPosition(t, x, s, "PutSummaries", func() error { return s.PutSummaries(x, c.Windows.Summaries(analysis.Config{})) })
	movesPosition(t, x, s, "Apply of one more record", func() error {
		return s.Apply(x, store.Batch{Changes: []store.Change{{New: c.Record(35, 2)}}})
	})

	// Another handle sees a write within a few poll intervals.
	other := open(t, false)
	defer other.Close()
	seen := positionOf(t, x, other)
	movesPosition(t, x, s, "Apply seen by another handle", func() error {
		return s.Apply(x, store.Batch{Changes: []store.Change{{New: c.Record(36, 3)}}})
	})
	positionMovesFrom(t, x, other, seen, "a write")

	// Reads do not move it, nor do span writes: they have their own
	// sequence.
	keepsPosition(t, x, s, "reads", func() { readAll(t, x, s, c, start) })
	keepsPosition(t, x, s, "span writes", func() {
		if _, err := s.WriteSpans(x, c.Spans[37]); err != nil {
			t.Fatal(err)
		}
	})

	seen = positionOf(t, x, other)
	movesPosition(t, x, s, "DeleteBefore", func() error {
		return s.DeleteBefore(x, time.Date(2026, 3, 2, 0, 30, 0, 0, time.UTC).UnixNano())
	})
	positionMovesFrom(t, x, other, seen, "a deletion")
}

// positionOf returns s's write position, which is positive.
func positionOf(t *testing.T, x context.Context, s store.Store) uint64 {
	t.Helper()
	p, err := s.Position(x)
	if err != nil {
		t.Fatal(err)
	}
	if p == 0 {
		t.Fatal("position 0: positions are positive")
	}
	return p
}

// movesPosition checks that write, what, has moved s's position when it
// returns.
func movesPosition(t *testing.T, x context.Context, s store.Store, what string, write func() error) {
	t.Helper()
	before := positionOf(t, x, s)
	if err := write(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if after := positionOf(t, x, s); after <= before {
		t.Fatalf("%s: position %d after, %d before: want it to move", what, after, before)
	}
}

// positionMovesFrom waits until other's position is no longer seen, at
// most 10 s after what, a write through another handle.
func positionMovesFrom(t *testing.T, x context.Context, other store.Store, seen uint64, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for positionOf(t, x, other) == seen {
		if time.Now().After(deadline) {
			t.Fatalf("another handle's position did not move within 10 s of %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keepsPosition checks that f, what, does not move s's position. A
// database may move it now and then by itself (ClickHouse merging parts
// in the background): three tries, each after the position held still
// over two poll intervals.
func keepsPosition(t *testing.T, x context.Context, s store.Store, what string, f func()) {
	t.Helper()
	for try := 0; try < 3; try++ {
		p := settled(t, func() uint64 { return positionOf(t, x, s) })
		f()
		time.Sleep(300 * time.Millisecond) // past a poll interval: the store reads its position again
		if positionOf(t, x, s) == p {
			return
		}
	}
	t.Fatalf("%s moved the position (three tries)", what)
}

// readAll reads from s through every read of store.Store, over c's
// records from start.
func readAll(t *testing.T, x context.Context, s store.Store, c *Corpus, start time.Time) {
	t.Helper()
	q := store.Query{From: start.UnixNano(), To: start.Add(4 * time.Hour).UnixNano()}
	if _, err := s.Report(x, q); err != nil {
		t.Fatal(err)
	}
	lo, hi := store.WindowRange(q, s.Window())
	if _, err := s.Summaries(x, lo, hi); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Records(x, []graph.TraceID{c.Traces[0].ID, c.Traces[9].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Watermark(x); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.State(x, c.Results[0].Window); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TraceSpans(x, c.Traces[0].ID, nil); err != nil {
		t.Fatal(err)
	}
}

// settled returns s's position once two reads a poll interval apart agree
// (at most 10 s).
func settled(t *testing.T, pos func() uint64) uint64 {
	t.Helper()
	p := pos()
	for i := 0; i < 30; i++ {
		time.Sleep(300 * time.Millisecond)
		q := pos()
		if q == p {
			return p
		}
		p = q
	}
	t.Fatal("the position did not hold still for 300 ms within 10 s")
	return 0
}
