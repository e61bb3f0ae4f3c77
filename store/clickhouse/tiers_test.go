package clickhouse

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

// tierRecord is a record of a trace of one hop starting at at.
func tierRecord(id uint64, at time.Time) *store.Record {
	res := &analysis.TraceResult{API: "a GET /", Start: at.UnixNano(), Spans: 3, Hops: 3, Counterfactual: 3,
		Window: analysis.WindowOf(at.UnixNano(), time.Hour)}
	binary.BigEndian.PutUint64(res.TraceID[8:], id)
	return &store.Record{TraceID: res.TraceID, Start: res.Start, Window: res.Window, API: res.API, Seq: 1, Result: res, Facts: []byte{0}}
}

// writerReader opens a fresh database twice: a writer and another
// process's handle, closed when the test ends.
func writerReader(t *testing.T) (dsn string, w, r *Store) {
	dsn = freshDatabase(t, server(t))
	w, r = open(t, dsn, time.Hour), open(t, dsn, time.Hour)
	t.Cleanup(func() {
		r.Close()
		w.Close()
	})
	return dsn, w, r
}

// TestHeldMinutes: the minutes of a write another process began and has
// not announced done (its intent row without its done row) are held:
// ranges holding them are read each time, never kept, and kept again
// once the write is done. A process's own writes hold nothing, and a
// finished write holds nothing. A reader's kept ranges of a minute
// another process changed are dropped.
func TestHeldMinutes(t *testing.T) {
	dsn, w, r := writerReader(t)
	x := context.Background()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	m1 := day.Add(10*time.Hour + 5*time.Minute)
	minute := func(t time.Time) int64 { return t.Unix() / 60 }
	apply := func(id uint64, at time.Time) {
		t.Helper()
		if err := w.Apply(x, store.Batch{Changes: []store.Change{{New: tierRecord(id, at)}}}); err != nil {
			t.Fatal(err)
		}
	}
	// held waits for the reader to read the change log (its position
	// reads it at most every 250 ms) until its held edges are want.
	held := func(s *Store, want []int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := s.Position(x); err != nil {
				t.Fatal(err)
			}
			got := s.feed.heldEdges()
			slices.Sort(got)
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("held edges %v, want %v", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	q := store.Query{From: day.Add(10 * time.Hour).UnixNano(), To: day.Add(12 * time.Hour).UnixNano()} // hours 10 and 11: one range
	hours := tierKey(bucketRange{tierHour, minute(day)/60 + 10, minute(day)/60 + 12}, "")
	traces := func(s *Store) int64 {
		t.Helper()
		rep, err := s.Report(x, q)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Traces
	}
	apply(1, m1)
	held(r, nil) // done: nothing held
	held(w, nil)
	if n := traces(r); n != 1 {
		t.Fatalf("%d traces, want 1", n)
	}
	if _, ok, _ := r.tiers.Lookup(hours); !ok {
		t.Error("the hours of a finished write were not kept")
	}
	// A third process begins a write of m1's minute: its intent holds
	// it, and drops what the reader kept of it.
	o := open(t, dsn, time.Hour)
	defer o.Close()
	c := change{lo: minute(m1), hi: minute(m1) + 1}
	if err := o.announce(x, kindIntent, 7, c); err != nil {
		t.Fatal(err)
	}
	held(r, []int64{minute(m1), minute(m1) + 1})
	if _, ok, _ := r.tiers.Lookup(hours); ok {
		t.Error("an intent did not drop the range holding its minute")
	}
	if n := traces(r); n != 1 {
		t.Fatalf("%d traces, want 1", n)
	}
	if _, ok, _ := r.tiers.Lookup(hours); ok {
		t.Error("a range holding a held minute was kept")
	}
	if err := o.announce(x, kindDone, 7, c); err != nil {
		t.Fatal(err)
	}
	held(r, nil)
	if n := traces(r); n != 1 {
		t.Fatalf("%d traces, want 1", n)
	}
	if _, ok, _ := r.tiers.Lookup(hours); !ok {
		t.Error("the hours of a write announced done were not kept")
	}
	// Another write to m1's hour drops what the reader kept of it, once
	// the reader has read the change log (its position moves).
	pos, err := r.Position(x)
	if err != nil {
		t.Fatal(err)
	}
	apply(2, m1.Add(time.Minute))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, err := r.Position(x)
		if err != nil {
			t.Fatal(err)
		}
		if p != pos {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader's position did not move after another process's write")
		}
	}
	if n := traces(r); n != 2 {
		t.Fatalf("%d traces after a write to a kept hour, want 2", n)
	}
}

// TestLastMinuteHint: after a write, the last minute is looked for first
// in the day up to the one found before, then before that day; a write
// that deletes every trace of that day sends the search before it.
func TestLastMinuteHint(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	x := context.Background()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	apply := func(c ...store.Change) {
		t.Helper()
		if err := s.Apply(x, store.Batch{Changes: c}); err != nil {
			t.Fatal(err)
		}
	}
	q := store.Query{From: day.UnixNano(), To: day.Add(72 * time.Hour).UnixNano()}
	last := func(want time.Time) {
		t.Helper()
		m, ok, err := s.LastMinute(x, q)
		if err != nil || !ok || m != want.Unix()/60 {
			t.Fatalf("last minute %d (%v, %v), want %d (%v)", m, ok, err, want.Unix()/60, want)
		}
	}
	early, late := tierRecord(1, day.Add(10*time.Hour)), tierRecord(2, day.Add(58*time.Hour))
	apply(store.Change{New: early}, store.Change{New: late})
	last(day.Add(58 * time.Hour))
	apply(store.Change{Old: late}) // the day up to the hint holds none now
	last(day.Add(10 * time.Hour))
	apply(store.Change{New: tierRecord(3, day.Add(59*time.Hour))})
	last(day.Add(59 * time.Hour))
	apply(store.Change{New: tierRecord(4, day.Add(59*time.Hour+30*time.Minute))}) // the hint's day
	last(day.Add(59*time.Hour + 30*time.Minute))
}
