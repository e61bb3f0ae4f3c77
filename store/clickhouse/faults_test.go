package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// faultyConn is a connection whose statements fail, as if the server had
// gone away, while one of fail's substrings is in their text: an Apply
// stopped at a chosen step, as a crash would stop it.
type faultyConn struct {
	driver.Conn
	mu   sync.Mutex
	fail []string
	land bool // the failing inserts are sent all the same: they land, the caller sees an error
}

var errInjected = &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}

func (c *faultyConn) failing(q string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.fail {
		if strings.Contains(q, f) {
			return true
		}
	}
	return false
}

func (c *faultyConn) set(fail ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail, c.land = fail, false
}

// landing makes the inserts that contain one of fail land and then fail,
// as an insert whose connection died after the server had the data.
func (c *faultyConn) landing(fail ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail, c.land = fail, true
}

func (c *faultyConn) Exec(ctx context.Context, q string, args ...any) error {
	if c.failing(q) {
		return errInjected
	}
	return c.Conn.Exec(ctx, q, args...)
}

func (c *faultyConn) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if c.failing(q) {
		c.mu.Lock()
		land := c.land
		c.mu.Unlock()
		if !land {
			return nil, errInjected
		}
		b, err := c.Conn.PrepareBatch(ctx, q, opts...)
		return landedBatch{b}, err
	}
	return c.Conn.PrepareBatch(ctx, q, opts...)
}

// landedBatch is sent, then reported failed.
type landedBatch struct{ driver.Batch }

func (b landedBatch) Send() error {
	if err := b.Batch.Send(); err != nil {
		return err
	}
	return errInjected
}

// openFaulty opens a store at dsn whose connection fails on demand.
func openFaulty(t *testing.T, dsn string) (*Store, *faultyConn) {
	t.Helper()
	fc := &faultyConn{}
	s, err := Open(context.Background(), Options{DSN: dsn, Window: time.Hour, Logger: quiet,
		dial: func(o *ch.Options) (driver.Conn, error) {
			c, err := ch.Open(o)
			if err != nil {
				return nil, err
			}
			if o.Auth.Database == "" {
				return c, nil
			}
			fc.Conn = c
			return fc, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return s, fc
}

// doc returns the document of r and every figure r holds (some are not in
// the document: the owners' histograms, nodes, versions).
func doc(t *testing.T, r *analysis.Report) string {
	t.Helper()
	b, err := json.Marshal(r.Document(nil, analysis.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n" + dump(r)
}

// dump prints every figure of r, sorted.
func dump(r *analysis.Report) string {
	lines := []string{fmt.Sprintf("total %d %d %d", r.Spans, r.Traces, r.Fragments)}
	for name, a := range r.APIs {
		c := *a
		c.Radius, c.Amplification, c.Owners = nil, nil, nil
		lines = append(lines, fmt.Sprintf("api %q %+v %v %v", name, c, a.Radius, a.Amplification))
		for n, o := range a.Owners {
			oc := *o
			oc.Radius, oc.Amplification = nil, nil
			lines = append(lines, fmt.Sprintf("owner %q %v %+v %v %v", name, n, oc, o.Radius, o.Amplification))
		}
	}
	for _, v := range r.Services {
		lines = append(lines, fmt.Sprintf("service %+v", *v))
	}
	for n, a := range r.Nodes {
		lines = append(lines, fmt.Sprintf("node %v %+v", n, *a))
	}
	for k, v := range r.Versions {
		vc := *v
		vc.Radius, vc.Amplification = nil, nil
		lines = append(lines, fmt.Sprintf("version %+v %+v %v %v", k, vc, v.Radius, v.Amplification))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// checkRollups fails unless the report over everything is the sum of the
// stored records of c.
func checkRollups(t *testing.T, s *Store, c *storetest.Corpus, when string) {
	t.Helper()
	if g, w, n := rollupsAndRecords(t, s, c); g != w {
		t.Fatalf("%s (%d records stored):\n got %s\nwant %s", when, n, g, w)
	}
}

// rollupsAndRecords returns the document of the report over everything
// and that of the sum of the stored records of c, and how many are stored.
func rollupsAndRecords(t *testing.T, s *Store, c *storetest.Corpus) (string, string, int) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Report(ctx, store.Query{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []graph.TraceID
	for _, tr := range c.Traces {
		ids = append(ids, tr.ID)
	}
	recs, err := s.Records(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	sum := analysis.NewReport()
	for _, r := range recs {
		sum.Add(r.Result, 1)
	}
	sum.Prune()
	return doc(t, got), doc(t, sum), len(recs)
}

// Rollups left wrong by an Apply stopped after its records were written
// are repaired by the next Apply of the same store, or by the first
// Apply of the next store to open the database (after a crash).
func TestRollupRepair(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	s, fc := openFaulty(t, dsn)
	defer func() { s.Close() }()
	c := storetest.NewCorpus(t, 40, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), 10*time.Second)
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	if err := s.Apply(ctx, store.Batch{Changes: changes}); err != nil {
		t.Fatal(err)
	}
	checkRollups(t, s, c, "after the first apply")

	// Delete the first half; stop after the records were written, before
	// the rollups.
	var dels []store.Change
	for _, ch := range changes[:20] {
		dels = append(dels, store.Change{Old: ch.New})
	}
	fc.set("INSERT INTO rollups")
	if err := s.Apply(ctx, store.Batch{Changes: dels}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("apply stopped at the rollups: %v, want ErrUnavailable", err)
	}
	fc.set()
	if g, w, n := rollupsAndRecords(t, s, c); g == w || n != 20 {
		t.Fatalf("the stopped apply left %d records and rollups that agree with them", n)
	}
	if err := s.Apply(ctx, store.Batch{}); err != nil {
		t.Fatal(err)
	}
	checkRollups(t, s, c, "repaired by the same store")

	// Again, then a new store, as after a crash.
	dels = dels[:0]
	for _, ch := range changes[20:30] {
		dels = append(dels, store.Change{Old: ch.New})
	}
	fc.set("INSERT INTO rollups")
	if err := s.Apply(ctx, store.Batch{Changes: dels}); err == nil {
		t.Fatal("apply stopped at the rollups succeeded")
	}
	if g, w, n := rollupsAndRecords(t, s, c); g == w || n != 10 {
		t.Fatalf("the second stopped apply left %d records and rollups that agree with them", n)
	}
	s.Close()
	s = open(t, dsn, time.Hour)
	if err := s.Apply(ctx, store.Batch{}); err != nil {
		t.Fatal(err)
	}
	checkRollups(t, s, c, "repaired by the next store")
}

// Rollup changes that land although the Apply that sent them failed (the
// connection died after the server had them) count for nothing once the
// minutes are repaired: the repair recomputes them under a new generation,
// and so does a later Apply's when it fails the same way.
func TestRollupLateLanding(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	s, fc := openFaulty(t, dsn)
	defer func() { s.Close() }()
	c := storetest.NewCorpus(t, 40, time.Date(2026, 3, 1, 23, 55, 0, 0, time.UTC), 15*time.Second) // across midnight
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	if err := s.Apply(ctx, store.Batch{Changes: changes[:20]}); err != nil {
		t.Fatal(err)
	}
	// The rollups of the second half land, the Apply fails.
	fc.landing("INSERT INTO rollups")
	if err := s.Apply(ctx, store.Batch{Changes: changes[20:]}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("apply whose rollups landed: %v, want ErrUnavailable", err)
	}
	fc.set()
	// The pipeline applies the batch again (its records as now stored are
	// the old ones): the minutes are recomputed, nothing counted twice.
	var again []store.Change
	for _, ch := range changes[20:] {
		again = append(again, store.Change{Old: ch.New, New: ch.New})
	}
	if err := s.Apply(ctx, store.Batch{Changes: again}); err != nil {
		t.Fatal(err)
	}
	checkRollups(t, s, c, "repaired after the late rollups")
	// A repair whose new generation lands although it failed: repaired
	// again by the next Apply.
	var dels []store.Change
	for _, ch := range changes[:10] {
		dels = append(dels, store.Change{Old: ch.New})
	}
	fc.landing("INSERT INTO rollups")
	if err := s.Apply(ctx, store.Batch{Changes: dels}); err == nil {
		t.Fatal("apply whose rollups landed succeeded")
	}
	fc.landing("INSERT INTO rollup_gens")
	if err := s.Apply(ctx, store.Batch{}); err == nil {
		t.Fatal("repair whose generation landed succeeded")
	}
	fc.set()
	if err := s.Apply(ctx, store.Batch{Changes: []store.Change{{Old: changes[10].New}}}); err != nil {
		t.Fatal(err)
	}
	checkRollups(t, s, c, "repaired once more")
	if n := len(s.gens); n == 0 {
		t.Fatal("no bucket was recomputed")
	}
	// Another process reads the same.
	r := open(t, dsn, time.Hour)
	defer r.Close()
	checkRollups(t, r, c, "read by another store")
	for _, q := range []store.Query{{From: time.Date(2026, 3, 1, 23, 58, 0, 0, time.UTC).UnixNano(), To: time.Date(2026, 3, 2, 0, 3, 0, 0, time.UTC).UnixNano()}} {
		got, err := r.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := r.Records(ctx, traceIDs(c))
		if err != nil {
			t.Fatal(err)
		}
		want := analysis.NewReport()
		for _, rec := range recs {
			if q.Contains(rec.Start) {
				want.Add(rec.Result, 1)
			}
		}
		want.Prune()
		if g, w := doc(t, got), doc(t, want); g != w {
			t.Fatalf("query %+v:\n got %s\nwant %s", q, g, w)
		}
	}
}

func traceIDs(c *storetest.Corpus) []graph.TraceID {
	var ids []graph.TraceID
	for _, tr := range c.Traces {
		ids = append(ids, tr.ID)
	}
	return ids
}

// A window whose records an Apply changed but whose state it did not
// write (stopped in between) is not exact, for this store, after a reopen,
// until an Apply writes its state.
func TestStateAfterStoppedApply(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	s, fc := openFaulty(t, dsn)
	defer func() { s.Close() }()
	c := storetest.NewCorpus(t, 10, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	w := c.Results[0].Window
	st := c.Windows.State(w)
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	if err := s.Apply(ctx, store.Batch{Changes: changes[:5], States: map[int64]*analysis.State{w: st}}); err != nil {
		t.Fatal(err)
	}
	if _, exact, err := s.State(ctx, w); err != nil || !exact {
		t.Fatalf("after a whole apply: exact %v, %v", exact, err)
	}
	fc.set("INSERT INTO states")
	if err := s.Apply(ctx, store.Batch{Changes: changes[5:], States: map[int64]*analysis.State{w: st}}); err == nil {
		t.Fatal("apply stopped before the states succeeded")
	}
	fc.set()
	if _, exact, err := s.State(ctx, w); err != nil || exact {
		t.Fatalf("records written, state not: exact %v, %v", exact, err)
	}
	s.Close()
	s = open(t, dsn, time.Hour)
	if _, exact, err := s.State(ctx, w); err != nil || exact {
		t.Fatalf("after a reopen: exact %v, %v", exact, err)
	}
	// The caller rebuilds from the records and applies: exact.
	rebuilt := analysis.NewState()
	if err := s.WindowRecords(ctx, w, nil, func(r *store.Record) error {
		tr, err := graph.DecodeTrace(r.Facts)
		if err != nil {
			return err
		}
		rebuilt.Add(tr, 1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The state counts the traffic each trace stands for (its weight).
	var want int64
	for _, tr := range c.Traces {
		want += tr.W()
	}
	if rebuilt.Traces != want {
		t.Fatalf("rebuilt from records weighing %d, want the 10 traces' %d", rebuilt.Traces, want)
	}
	if err := s.Apply(ctx, store.Batch{States: map[int64]*analysis.State{w: rebuilt}}); err != nil {
		t.Fatal(err)
	}
	if _, exact, err := s.State(ctx, w); err != nil || !exact {
		t.Fatalf("state written again: exact %v, %v", exact, err)
	}
}
