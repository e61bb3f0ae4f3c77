package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// view returns partition p's view of s as a *Store.
func view(t *testing.T, s *Store, p string) *Store {
	t.Helper()
	v, err := s.Partition(p)
	if err != nil {
		t.Fatal(err)
	}
	return v.(*Store)
}

// sumOf returns the document of the report over everything of s and that
// of the sum of the results of recs (records of any partition).
func sumOf(t *testing.T, s *Store, q store.Query, recs map[graph.TraceID]*store.Record) (string, string) {
	t.Helper()
	got, err := s.Report(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	want := analysis.NewReport()
	for _, r := range recs {
		if q.Contains(r.Start) {
			want.Add(r.Result, 1)
		}
	}
	want.Prune()
	return doc(t, got), doc(t, want)
}

// ledger is what a test expects stored: each trace's record, as the
// store holds it, whichever partition wrote it.
type ledger struct {
	mu  sync.Mutex
	now map[graph.TraceID]*store.Record
}

func (l *ledger) applied(changes []store.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range changes {
		if c.New == nil {
			delete(l.now, c.ID())
		} else {
			l.now[c.ID()] = c.New
		}
	}
}

func (l *ledger) get(id graph.TraceID) *store.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.now[id]
}

// checkSum fails unless the reports of s (over everything, and over a
// range that cuts the corpus's minutes) are the sum of what l holds, and
// l holds what the store holds.
func (l *ledger) checkSum(t *testing.T, s *Store, c *storetest.Corpus, when string) {
	t.Helper()
	recs, err := s.Records(context.Background(), traceIDs(c))
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	n := len(l.now)
	for id, r := range l.now {
		if got := recs[id]; got == nil || got.Seq != r.Seq {
			t.Fatalf("%s: trace %s stored as %v, want seq %d", when, id, got, r.Seq)
		}
	}
	l.mu.Unlock()
	if len(recs) != n {
		t.Fatalf("%s: %d records stored, want %d", when, len(recs), n)
	}
	first := analysis.MinuteOf(c.Results[0].Start)
	for _, q := range []store.Query{{}, {From: store.MinuteStart(first + 1), To: store.MinuteStart(first + 3)}} {
		if g, w := sumOf(t, s, q, recs); g != w {
			t.Fatalf("%s: report %+v is not the sum of the %d records stored:\n got %s\nwant %s", when, q, len(recs), g, w)
		}
	}
}

// Two processes (two stores over one database) analyse two partitions,
// whose traces fall in the same minutes and window. One's Apply fails
// half way (its rollups not written, or written and reported failed) and
// is repaired by its next, while the other goes on writing deltas to the
// same minutes: each repairs its own share under its own generation, so
// the reports stay the sum of the records. (A repair that recomputed
// the minutes whole, under a generation shared by the partitions, would
// count the other's records once more, or drop the deltas it writes at
// the generation it knew.)
func TestPartitionsRepairConcurrently(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	sa, fc := openFaulty(t, dsn)
	defer sa.Close()
	sb := open(t, dsn, time.Hour)
	defer sb.Close()
	a, b := view(t, sa, "kafka:spans/0"), view(t, sb, "kafka:spans/1")
	defer a.Close()
	defer b.Close()
	// 480 traces in four minutes of one hourly window: even ones a's, odd
	// ones b's.
	c := storetest.NewCorpus(t, 480, time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC), time.Second/2)
	l := &ledger{now: map[graph.TraceID]*store.Record{}}
	// A batch replaces or adds the partition's traces of [lo, hi): each
	// with its result in the corpus or the one it gets against an empty
	// window (other figures), or deletes it, by trace and sequence.
	ev := analysis.NewEvaluator(analysis.Config{})
	batch := func(part, lo, hi int, seq uint64) []store.Change {
		var out []store.Change
		for i := lo; i < min(hi, len(c.Traces)); i++ {
			if i%2 != part {
				continue
			}
			r := c.Record(i, seq)
			old := l.get(r.TraceID)
			switch (uint64(i) + seq) % 5 {
			case 0, 1:
				res := ev.Evaluate(c.Traces[i], analysis.NewState())
				r = store.NewRecord(c.Traces[i], &res, seq)
			case 2:
				if old != nil {
					r = nil
				}
			}
			if old != nil || r != nil {
				out = append(out, store.Change{Old: old, New: r})
			}
		}
		return out
	}
	apply := func(s *Store, changes []store.Change) error {
		err := s.Apply(ctx, store.Batch{Changes: changes})
		if err == nil {
			l.applied(changes)
		}
		return err
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// In turns first: both write the first half, a's next batch fails
	// after its records are written, b writes more, a repairs, b writes
	// more again.
	must(apply(a, batch(0, 0, 240, 1)))
	must(apply(b, batch(1, 0, 240, 1)))
	failed := batch(0, 120, 360, 2) // replaces and adds
	fc.set("INSERT INTO rollups")
	if err := apply(a, failed); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a's apply stopped at the rollups: %v, want ErrUnavailable", err)
	}
	fc.set()
	l.applied(failed) // its records are stored
	if g, w := sumOf(t, sa, store.Query{}, l.now); g == w {
		t.Fatal("the stopped apply left rollups that agree with the records: nothing to repair")
	}
	must(apply(b, batch(1, 120, 360, 2)))
	must(apply(a, nil)) // repairs a's minutes
	must(apply(b, batch(1, 200, 480, 3)))
	l.checkSum(t, sb, c, "a repaired between b's writes")

	// At once: a's every third Apply has its rollups land and fail, the
	// one after repairs; b writes all along.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for k := range 12 {
			changes := batch(0, (k*40)%480, (k*40)%480+120, uint64(10+k))
			if k%3 == 1 {
				fc.landing("INSERT INTO rollups")
				err := a.Apply(ctx, store.Batch{Changes: changes})
				fc.set()
				if err == nil {
					errs <- fmt.Errorf("a's apply %d whose rollups landed succeeded", k)
					return
				}
				l.applied(changes) // stored, rollups and all
				continue
			}
			if err := apply(a, changes); err != nil {
				errs <- fmt.Errorf("a's apply %d: %w", k, err)
				return
			}
		}
		errs <- apply(a, nil)
	}()
	go func() {
		defer wg.Done()
		for k := range 12 {
			if err := apply(b, batch(1, (k*40+20)%480, (k*40+20)%480+120, uint64(10+k))); err != nil {
				errs <- fmt.Errorf("b's apply %d: %w", k, err)
				return
			}
		}
		errs <- nil
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		must(err)
	}
	l.checkSum(t, sa, c, "written at once")
	// Each partition's window records are its own traces.
	w := c.Results[0].Window
	for k, v := range []*Store{a, b} {
		n := 0
		must(v.WindowRecords(ctx, w, nil, func(r *store.Record) error {
			n++
			if i := traceIndex(c, r.TraceID); i%2 != k {
				t.Errorf("partition %d reads trace %d", k, i)
			}
			return nil
		}))
		want := 0
		for id := range l.now {
			if traceIndex(c, id)%2 == k {
				want++
			}
		}
		if n != want || want < 100 {
			t.Errorf("partition %d: %d window records, want %d", k, n, want)
		}
	}
	// A third process reads the same.
	r := open(t, dsn, time.Hour)
	defer r.Close()
	l.checkSum(t, r, c, "read by another store")
}

func traceIndex(c *storetest.Corpus, id graph.TraceID) int {
	for i, tr := range c.Traces {
		if tr.ID == id {
			return i
		}
	}
	return -1
}

// A record another partition re-opens moves to it (the conformance test
// checks the report right after). Its old result stays in the rollups of
// the partition it leaves, taken away in those of the one that takes it:
// each partition's repair of the minute keeps that (record_moves), so the
// reports stay the sum of the records whichever repairs it, also when the
// move is applied twice (a retry after a failure). The partition it left
// has its window marked dirty: its state counted the record.
func TestPartitionMoveRepair(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	sa, fc := openFaulty(t, dsn)
	defer sa.Close()
	sb := open(t, dsn, time.Hour)
	defer sb.Close()
	a, b := view(t, sa, "a"), view(t, sb, "b")
	c := storetest.NewCorpus(t, 30, time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC), 4*time.Second) // two minutes
	w := c.Results[0].Window
	l := &ledger{now: map[graph.TraceID]*store.Record{}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// b stores every trace, with its window's state.
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	must(b.Apply(ctx, store.Batch{Changes: changes, States: map[int64]*analysis.State{w: c.Windows.State(w)}}))
	l.applied(changes)
	if _, exact, err := b.State(ctx, w); err != nil || !exact {
		t.Fatalf("b's state: exact %v, %v", exact, err)
	}
	// a takes traces 0..9: the first time its records are not written
	// (the moves are), then again.
	var moves []store.Change
	for i := range 10 {
		nr := c.Record(i, 7)
		if i%2 == 0 { // a result of its own: what a's analysis made of it
			ev := analysis.NewEvaluator(analysis.Config{})
			res := ev.Evaluate(c.Traces[i], analysis.NewState())
			nr = store.NewRecord(c.Traces[i], &res, 7)
		}
		moves = append(moves, store.Change{Old: l.get(c.Traces[i].ID), New: nr})
	}
	fc.set("INSERT INTO records")
	if err := a.Apply(ctx, store.Batch{Changes: moves}); err == nil {
		t.Fatal("apply stopped at the records succeeded")
	}
	fc.set()
	must(a.Apply(ctx, store.Batch{Changes: moves}))
	l.applied(moves)
	l.checkSum(t, sb, c, "moved")
	var n uint64
	must(a.queryRow(ctx, "count moves", `SELECT count() FROM record_moves FINAL`, &n))
	if n != 10 {
		t.Fatalf("%d moves stored, want 10 (each once)", n)
	}
	if _, exact, err := b.State(ctx, w); err != nil || exact {
		t.Fatalf("b's state after a took 10 of its traces: exact %v, %v; want not exact", exact, err)
	}
	// Each partition recomputes the minutes (as after a failed Apply):
	// b, then a, then both again.
	minutes := map[int64]struct{}{}
	for _, ch := range changes {
		minutes[ch.New.Minute()] = struct{}{}
	}
	for k, v := range []*Store{b, a, b, a} {
		for m := range minutes {
			v.repair[m] = struct{}{}
		}
		must(v.Apply(ctx, store.Batch{}))
		l.checkSum(t, sb, c, fmt.Sprintf("repair %d (partition %s)", k, v.name))
	}
	// b's records are the ones it kept; a's the ones it took.
	for k, v := range []*Store{a, b} {
		got := 0
		must(v.WindowRecords(ctx, w, nil, func(r *store.Record) error {
			if i := traceIndex(c, r.TraceID); (i < 10) != (k == 0) {
				t.Errorf("partition %s reads trace %d", v.name, i)
			}
			got++
			return nil
		}))
		if want := []int{10, 20}[k]; got != want {
			t.Errorf("partition %s: %d window records, want %d", v.name, got, want)
		}
	}
	// Moved back: b takes trace 0 again; repaired by both.
	back := []store.Change{{Old: l.get(c.Traces[0].ID), New: c.Record(0, 9)}}
	must(b.Apply(ctx, store.Batch{Changes: back}))
	l.applied(back)
	l.checkSum(t, sb, c, "moved back")
	for _, v := range []*Store{a, b} {
		for m := range minutes {
			v.repair[m] = struct{}{}
		}
		must(v.Apply(ctx, store.Batch{}))
	}
	l.checkSum(t, sa, c, "moved back, repaired")
}
