package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
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
	alt := make([]analysis.TraceResult, len(c.Traces))
	for i, tr := range c.Traces {
		alt[i] = ev.Evaluate(tr, analysis.NewState())
	}
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
				r = store.NewRecord(c.Traces[i], &alt[i], seq)
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

// A database written before partitions (migrations up to 0011) becomes
// the default partition's: its write log and sequences, records, window
// states and their markers, dirty minutes, rollup generations and
// checkpoint are read as partition ""'s, and no other partition's.
func TestMigrateToPartitions(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	o, _, err := parseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The schema as 0011 left it.
	old := &Store{db: o.Auth.Database, core: &core{log: quiet, window: time.Hour}, part: newPart("", nil)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(old.createDatabase(ctx, ch.Open, o, false))
	old.conn, err = ch.Open(o)
	must(err)
	defer old.conn.Close()
	ms, err := schema.Load("clickhouse")
	must(err)
	must(old.exec(ctx, "create migrations table", migrationsTable))
	for _, m := range ms {
		if m.Version > 11 {
			continue
		}
		run, _, err := forServer(m, old.server, nil)
		must(err)
		for _, q := range run {
			if err := old.exec(ctx, "migrate", q); err != nil && !dropped(q, err) {
				t.Fatal(err)
			}
		}
		must(old.insert(ctx, "record migration", "schema_migrations", []string{"version", "name", "applied_at", "server", "skipped"},
			[]uint32{uint32(m.Version)}, []string{m.Name}, []time.Time{time.Now()}, []string{"18.16"}, []uint32{0}))
	}

	// What a store of that release wrote: a write (sequence 3) of two
	// traces, their records, the window's state (written after its dirty
	// marker: exact), a minute left dirty, a recomputed minute (its rows
	// at generation 0 no longer count), the window length and checkpoint.
	// Written before partitions: before sampled traffic was weighted too.
	c := storetest.NewUnsampledCorpus(t, 4, time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC), 70*time.Second)
	w := c.Results[0].Window
	day := dayDate(dayOf(c.Results[0].Start))
	var enc graph.TraceEncoder
	logRow := append([]byte{logMarker}, c.Traces[0].ID[:]...)
	logRow = append(logRow, c.Traces[1].ID[:]...)
	must(old.insert(ctx, "old spans", "trace_spans", []string{"day", "trace_id", "seq", "data"},
		[]time.Time{day, day, day}, [][]byte{logID[:], c.Traces[0].ID[:], c.Traces[1].ID[:]}, []uint64{3, 3, 3},
		[]string{string(logRow), string(enc.AppendSpans(nil, c.Spans[0])), string(enc.AppendSpans(nil, c.Spans[1]))}))
	var recs recordBlock
	for i := range c.Traces {
		recs.add(&old.enc, c.Record(i, 3), 100+uint64(i), false, "")
	}
	recs.finish()
	must(old.insert(ctx, "old records", "records", recordColumns[:12], recs.columns()[:12]...))
	st := c.Windows.State(w)
	stJSON, err := json.Marshal(st)
	must(err)
	wday := dayDate(dayOf(w * int64(time.Hour)))
	must(old.insert(ctx, "old state", "states", []string{"day", "win", "version", "deleted", "state"},
		[]time.Time{wday}, []int64{w}, []uint64{200}, []uint8{0}, []string{string(stJSON)}))
	dirtyMinute, recomputed := analysis.MinuteOf(c.Results[0].Start), analysis.MinuteOf(c.Results[3].Start)
	must(old.insert(ctx, "old markers", "dirty", []string{"kind", "id", "day", "dirty", "version"},
		[]int8{kindWindow, kindMinute}, []int64{w, dirtyMinute}, []time.Time{wday, day}, []uint8{1, 1}, []uint64{150, 150}))
	// The recomputed minute: trace 3 at its generation 7, trace 2 (not
	// there any more, say) at generation 0.
	var ups rollupBlock
	one := func(i int) *analysis.Report {
		r := analysis.NewReport()
		r.Add(c.Results[i], 1)
		// A release before sampled traffic kept no tail counts (0014).
		for _, a := range r.APIs {
			a.TailClean16, a.TailClean2, a.TailClean, a.TailFailed2, a.TailFailed = 0, 0, 0, 0, 0
		}
		return r
	}
	ups.add(bucketKey{tierMinute, recomputed}, 7, one(3))
	ups.add(bucketKey{tierMinute, recomputed}, 0, one(2))
	must(old.insert(ctx, "old rollups", "rollups", rollupColumns, ups.columns()...))
	must(old.insert(ctx, "old generations", "rollup_gens", []string{"tier", "bucket", "day", "gen", "version"},
		[]uint8{tierMinute}, []int64{recomputed}, []time.Time{day}, []uint64{7}, []uint64{300}))
	must(old.insert(ctx, "old meta", "meta", []string{"key", "value", "version"}, []string{metaWindow, metaWatermark},
		[]int64{int64(time.Hour), 3}, []uint64{1, 2}))

	s := open(t, dsn, 0) // migrates
	defer s.Close()
	if wm, err := s.Watermark(ctx); err != nil || wm != 3 {
		t.Fatalf("watermark %d, %v; want 3", wm, err)
	}
	var seqs []uint64
	n := 0
	must(s.SpansAfter(ctx, 0, func(seq uint64, spans []graph.Span) error {
		seqs, n = append(seqs, seq), n+len(spans)
		return nil
	}))
	if len(seqs) != 1 || seqs[0] != 3 || n != len(c.Spans[0])+len(c.Spans[1]) {
		t.Fatalf("the old write log: writes %v, %d spans; want [3], %d", seqs, n, len(c.Spans[0])+len(c.Spans[1]))
	}
	if seq, err := s.WriteSpans(ctx, c.Spans[2]); err != nil || seq != 4 {
		t.Fatalf("the next write: sequence %d, %v; want 4", seq, err)
	}
	got, exact, err := s.State(ctx, w)
	if err != nil || !exact || stateJSON(t, got) != string(stJSON) {
		t.Fatalf("the old state: exact %v, %v, equal %v", exact, err, got != nil && stateJSON(t, got) == string(stJSON))
	}
	k := 0
	must(s.WindowRecords(ctx, w, nil, func(*store.Record) error { k++; return nil }))
	if k != len(c.Traces) {
		t.Fatalf("%d old records in the window, want %d", k, len(c.Traces))
	}
	if _, ok := s.repair[dirtyMinute]; !ok {
		t.Fatalf("the old dirty minute %d is not to repair: %v", dirtyMinute, s.repair)
	}
	rep, err := s.Report(ctx, store.Query{From: store.MinuteStart(recomputed), To: store.MinuteStart(recomputed + 1)})
	must(err)
	if want := one(3); doc(t, rep) != doc(t, want) {
		t.Fatalf("the recomputed minute counts its old generation:\n got %s\nwant %s", doc(t, rep), doc(t, want))
	}
	// Another partition has none of it, and sees the state as its peer's.
	p := view(t, s, "p")
	defer p.Close()
	k = 0
	must(p.WindowRecords(ctx, w, nil, func(*store.Record) error { k++; return nil }))
	if wm, err := p.Watermark(ctx); err != nil || wm != 0 || k != 0 {
		t.Fatalf("partition p: watermark %d, %d window records, %v; want none", wm, k, err)
	}
	if peers, err := p.PeerState(ctx, w); err != nil || stateJSON(t, peers) != string(stJSON) {
		t.Fatalf("partition p's peer state is not the old one: %v", err)
	}
	if seq, err := p.WriteSpans(ctx, c.Spans[3]); err != nil || seq != 1 {
		t.Fatalf("partition p's first write: sequence %d, %v; want 1", seq, err)
	}
}

func stateJSON(t *testing.T, s *analysis.State) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each partition's view holds its own lease and fence: one that lost its
// lease has its writes refused, the other partitions' views of the same
// store (and the store itself) write on; a new view of the partition
// starts unfenced, and closing a view releases its lease only.
func TestPartitionLeaseFence(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	dsn := freshDatabase(t, server(t))
	s, err := Open(ctx, Options{DSN: dsn, Window: time.Hour, Logger: quiet, LeaseClock: clock, LeaseSettle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p1, p2 := view(t, s, "p1"), view(t, s, "p2")
	c := storetest.NewCorpus(t, 3, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	if _, err := p1.AcquireLease(ctx, store.NewLeaseHolder(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.AcquireLease(ctx, store.NewLeaseHolder(), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute) // past p1's deadline, not p2's
	mu.Unlock()
	if err := p1.Apply(ctx, store.Batch{Changes: []store.Change{{New: c.Record(0, 1)}}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("p1's apply past its deadline: %v, want ErrLeaseLost", err)
	}
	if _, err := p1.WriteSpans(ctx, c.Spans[0]); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("p1's span write past its deadline: %v, want ErrLeaseLost", err)
	}
	if err := p2.Apply(ctx, store.Batch{Changes: []store.Change{{New: c.Record(1, 1)}}}); err != nil {
		t.Fatalf("p2's apply: %v", err)
	}
	if err := s.Apply(ctx, store.Batch{Changes: []store.Change{{New: c.Record(2, 1)}}}); err != nil {
		t.Fatalf("the store's apply: %v", err)
	}
	// Closed, p1's view forgets it; a new one is unfenced.
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p1.Watermark(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a closed view: %v, want ErrClosed", err)
	}
	again := view(t, s, "p1")
	defer again.Close()
	if err := again.Apply(ctx, store.Batch{Changes: []store.Change{{New: c.Record(0, 1)}}}); err != nil {
		t.Fatalf("a new view of p1: %v", err)
	}
	// p2 still holds its lease: another store is refused it.
	other, err := Open(ctx, Options{DSN: dsn, Window: time.Hour, Logger: quiet, LeaseClock: clock, LeaseSettle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := view(t, other, "p2").AcquireLease(ctx, store.NewLeaseHolder(), time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("p2's lease from another store: %v, want ErrLeaseHeld", err)
	}
	rep, err := s.Report(ctx, store.Query{})
	if err != nil || rep.Traces-rep.TracesExcess != 3 {
		t.Fatalf("report: %v traces received, %v; want 3", rep.Traces-rep.TracesExcess, err)
	}
}

// Hot minutes of days that Compact settled, written by two partitions:
// each node's minute is two rows (one per partition) to be summed, not
// filtered one by one. The same as the embedded store that holds every
// trace, before and after compaction.
func TestPartitionsHotMinutes(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	s := open(t, dsn, time.Hour)
	defer s.Close()
	other := open(t, dsn, time.Hour)
	defer other.Close()
	lite, err := sqlite.Open(ctx, sqlite.Options{Dir: t.TempDir(), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	c := storetest.NewCorpus(t, 600, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 2*time.Second)
	var all [2][]store.Change
	for i := range c.Traces {
		all[i%2] = append(all[i%2], store.Change{New: c.Record(i, 1)})
	}
	a, b := view(t, s, "a"), view(t, other, "b")
	defer a.Close()
	defer b.Close()
	for k, v := range []store.Store{a, b} {
		if err := v.Apply(ctx, store.Batch{Changes: all[k]}); err != nil {
			t.Fatal(err)
		}
		if err := lite.Apply(ctx, store.Batch{Changes: all[k]}); err != nil {
			t.Fatal(err)
		}
	}
	at := func(hh, mm int) int64 { return time.Date(2026, 3, 1, hh, mm, 0, 0, time.UTC).UnixNano() }
	compare := func(when string) {
		t.Helper()
		for _, q := range []store.Query{{}, {From: at(9, 53), To: at(10, 4)}} {
			for _, rules := range [][2]float64{{3, 0.2}, {1, 0.05}, {6, 0.05}, {12, 0.1}} {
				got, err := s.HotMinutes(ctx, q, int64(rules[0]), rules[1])
				if err != nil {
					t.Fatal(err)
				}
				want, _ := lite.HotMinutes(ctx, q, int64(rules[0]), rules[1])
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: hot minutes of %+v, %v:\n got %v\nwant %v", when, q, rules, got, want)
				}
				if len(want) == 0 {
					t.Fatalf("%s: no hot minute in %+v, %v: the comparison proves nothing", when, q, rules)
				}
			}
			m1, ok1, err := s.LastMinute(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if m2, ok2, _ := lite.LastMinute(ctx, q); m1 != m2 || ok1 != ok2 {
				t.Fatalf("%s: last minute of %+v: %d %v, want %d %v", when, q, m1, ok1, m2, ok2)
			}
		}
	}
	compare("stored")
	if err := s.Compact(ctx, at(24, 0)); err != nil {
		t.Fatal(err)
	}
	day := analysis.MinuteOf(at(0, 0)) / 1440
	if ids, err := s.splitDays(ctx, `partition_id = `+quote(dayID(day))); err != nil || len(ids) != 0 {
		t.Fatalf("the day is not in one part after Compact: %v, %v", ids, err)
	}
	compare("compacted")
}
