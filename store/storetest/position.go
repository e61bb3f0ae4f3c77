package storetest

import (
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
	pos := func(s store.Store) uint64 {
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
	moved := func(what string, write func() error) {
		t.Helper()
		before := pos(s)
		if err := write(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if after := pos(s); after <= before {
			t.Fatalf("%s: position %d after, %d before: want it to move", what, after, before)
		}
	}
	var changes []store.Change
	for i := range c.Traces[:30] {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	states := map[int64]*analysis.State{}
	for _, w := range c.Windows.Indexes() {
		states[w] = c.Windows.State(w)
	}
	moved("Apply", func() error { return s.Apply(x, store.Batch{Changes: changes, States: states, Watermark: 1}) })
	moved("PutSummaries", func() error { return s.PutSummaries(x, c.Windows.Summaries(analysis.Config{})) })
	moved("Apply of one more record", func() error {
		return s.Apply(x, store.Batch{Changes: []store.Change{{New: c.Record(35, 2)}}})
	})

	// Another handle sees a write within a few poll intervals.
	other := open(t, false)
	defer other.Close()
	seen := pos(other)
	moved("Apply seen by another handle", func() error {
		return s.Apply(x, store.Batch{Changes: []store.Change{{New: c.Record(36, 3)}}})
	})
	deadline := time.Now().Add(10 * time.Second)
	for pos(other) == seen {
		if time.Now().After(deadline) {
			t.Fatal("another handle's position did not move within 10 s of a write")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Reads do not move it. A database may move it now and then by itself
	// (ClickHouse merging parts in the background): three tries, each
	// after the position held still over two poll intervals.
	read := func() {
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
	still := false
	for try := 0; try < 3 && !still; try++ {
		p := settled(t, func() uint64 { return pos(s) })
		read()
		time.Sleep(300 * time.Millisecond) // past a poll interval: the store reads its position again
		still = pos(s) == p
	}
	if !still {
		t.Fatal("reads moved the position (three tries)")
	}

	// Span writes do not move it: they have their own sequence.
	still = false
	for try := 0; try < 3 && !still; try++ {
		p := settled(t, func() uint64 { return pos(s) })
		if _, err := s.WriteSpans(x, c.Spans[37]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		still = pos(s) == p
	}
	if !still {
		t.Fatal("span writes moved the position (three tries)")
	}

	seen = pos(other)
	moved("DeleteBefore", func() error {
		return s.DeleteBefore(x, time.Date(2026, 3, 2, 0, 30, 0, 0, time.UTC).UnixNano())
	})
	deadline = time.Now().Add(10 * time.Second)
	for pos(other) == seen {
		if time.Now().After(deadline) {
			t.Fatal("another handle's position did not move within 10 s of a deletion")
		}
		time.Sleep(20 * time.Millisecond)
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
