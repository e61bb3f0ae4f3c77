package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// The test server (skipping without STORMRADIUS_CLICKHOUSE) and fresh
// databases on it, dropped when the test ends: internal/chtest's.
var (
	server        = chtest.Server
	freshDatabase = chtest.FreshDatabase
	dropDatabase  = chtest.DropDatabase
)

// onServer makes the tests use the server u (server) until t ends: the
// tests t runs, run there.
func onServer(t *testing.T, u *url.URL) {
	was := server
	server = func(testing.TB) *url.URL { return u }
	t.Cleanup(func() { server = was })
}

func open(t testing.TB, dsn string, window time.Duration) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{DSN: dsn, Window: window, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var quiet = slog.New(slog.DiscardHandler)

func TestConformance(t *testing.T) {
	u := server(t)
	var mu sync.Mutex
	dsns := map[string]string{} // by subtest
	storetest.Run(t, func(t *testing.T, fresh bool) store.Store {
		mu.Lock()
		dsn := dsns[t.Name()]
		if fresh || dsn == "" {
			dsn = freshDatabase(t, u)
			dsns[t.Name()] = dsn
		}
		mu.Unlock()
		return open(t, dsn, time.Hour)
	}, storetest.Optional{IncidentReader: true, SeriesReader: true, Compactor: true, Partitioned: true})
}

func TestLeaseConformance(t *testing.T) {
	u := server(t)
	var mu sync.Mutex
	dsns := map[string]string{} // by subtest
	storetest.Lease(t, func(t *testing.T, clock func() time.Time) store.Store {
		mu.Lock()
		dsn := dsns[t.Name()]
		if dsn == "" {
			dsn = freshDatabase(t, u)
			dsns[t.Name()] = dsn
		}
		mu.Unlock()
		s, err := Open(context.Background(), Options{DSN: dsn, Window: time.Hour, Logger: quiet, LeaseClock: clock,
			LeaseSettle: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// WindowRecords with edges reads a few traces one by one and many by
// reading their window whole: both give the window's records that use
// one of the edges, in their latest version, without deleted ones or
// those that moved to another window.
func TestWindowRecordsByEdges(t *testing.T) {
	ctx := context.Background()
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	c := storetest.NewCorpus(t, 40, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	w := c.Results[0].Window
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	if err := s.Apply(ctx, store.Batch{Changes: changes}); err != nil {
		t.Fatal(err)
	}
	// Later versions: trace 0 deleted, trace 1 moved to the next window,
	// trace 2 now without edges, trace 3 replaced as it was.
	moved := *changes[1].New
	moved.Window, moved.Start = w+1, (w+1)*int64(time.Hour)
	bare := *changes[2].New
	bare.Edges = nil
	same := *changes[3].New
	same.Seq = 2
	if err := s.Apply(ctx, store.Batch{Changes: []store.Change{{Old: changes[0].New}, {Old: changes[1].New, New: &moved},
		{Old: changes[2].New, New: &bare}, {Old: changes[3].New, New: &same}}}); err != nil {
		t.Fatal(err)
	}
	want := map[graph.TraceID]uint64{}
	var edges []uint64
	for i, tr := range c.Traces {
		es := store.TraceEdges(tr, nil)
		if i == 0 {
			edges = es // every edge of trace 0
		}
		if i >= 3 && c.Results[i].Window == w && store.SharesEdge(es, edges) {
			want[tr.ID] = 1
		}
	}
	want[c.Traces[3].ID] = 2
	if len(want) < 10 {
		t.Fatalf("only %d traces use trace 0's edges", len(want))
	}
	for _, max := range []int{edgeReadMax, len(want), len(want) - 1, 0} {
		s.edgeReadMax = max
		got := map[graph.TraceID]uint64{}
		if err := s.WindowRecords(ctx, w, edges, func(r *store.Record) error { got[r.TraceID] = r.Seq; return nil }); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("at most %d read one by one: %d records %v, want %d %v", max, len(got), got, len(want), want)
		}
	}
}

// A database remembers its window: reopening with another is refused,
// with none adopts it.
func TestWindowRecorded(t *testing.T) {
	dsn := freshDatabase(t, server(t))
	ctx := context.Background()
	s := open(t, dsn, 10*time.Minute)
	s.Close()
	if _, err := Open(ctx, Options{DSN: dsn, Window: time.Hour}); err == nil {
		t.Fatal("reopened with another window")
	}
	s = open(t, dsn, 0)
	if s.Window() != 10*time.Minute {
		t.Fatalf("window %v, want 10m", s.Window())
	}
	s.Close()
	s = open(t, freshDatabase(t, server(t)), 0)
	if s.Window() != analysis.DefaultWindow {
		t.Fatalf("new database: window %v, want %v", s.Window(), analysis.DefaultWindow)
	}
	s.Close()
}

// The dry run lists every migration for a new database, none for a
// current one; a reader does not create a database.
func TestMigrationsDryRun(t *testing.T) {
	dsn := freshDatabase(t, server(t))
	ctx := context.Background()
	ms, err := Migrations(ctx, Options{DSN: dsn})
	if err != nil || len(ms) == 0 {
		t.Fatalf("new database: %d migrations, %v", len(ms), err)
	}
	if _, err := Open(ctx, Options{DSN: dsn, Existing: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("existing store in a new database: %v, want ErrNotFound", err)
	}
	open(t, dsn, 0).Close()
	if ms, err := Migrations(ctx, Options{DSN: dsn}); err != nil || len(ms) != 0 {
		t.Fatalf("current database: %d migrations, %v", len(ms), err)
	}
	s, err := Open(ctx, Options{DSN: dsn, Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// A server that cannot be reached is store.ErrUnavailable, at Open and
// when it goes away under an open store; so is a timeout.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = Open(ctx, Options{DSN: "clickhouse://" + addr + "/x?dial_timeout=500ms"})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("open against a closed port: %v, want ErrUnavailable", err)
	}
	if _, err := Migrations(ctx, Options{DSN: "clickhouse://" + addr + "/x?dial_timeout=500ms"}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("dry run against a closed port: %v, want ErrUnavailable", err)
	}

	// Through a proxy that is cut once the store is open.
	u := server(t)
	dsn, _ := url.Parse(freshDatabase(t, u))
	p := newProxy(t, u.Host)
	dsn.Host = p.addr
	q := dsn.Query()
	q.Set("dial_timeout", "500ms")
	q.Set("read_timeout", "2s")
	dsn.RawQuery = q.Encode()
	s := open(t, dsn.String(), time.Hour)
	defer s.Close()
	c := storetest.NewCorpus(t, 3, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	if _, err := s.WriteSpans(ctx, c.Spans[0]); err != nil {
		t.Fatal(err)
	}
	p.cut()
	if _, err := s.WriteSpans(ctx, c.Spans[1]); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write with the server gone: %v, want ErrUnavailable", err)
	}
	if err := s.Apply(ctx, store.Batch{Changes: []store.Change{{New: c.Record(1, 1)}}}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("apply with the server gone: %v, want ErrUnavailable", err)
	}
	if _, err := s.Report(ctx, store.Query{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("report with the server gone: %v, want ErrUnavailable", err)
	}
	// Back: the failed batch goes through, its minute repaired.
	p.resume()
	if err := s.Apply(ctx, store.Batch{Changes: []store.Change{{New: c.Record(1, 1)}}}); err != nil {
		t.Fatalf("apply once the server is back: %v", err)
	}
	rep, err := s.Report(ctx, store.Query{})
	if err != nil || rep.Traces != 1 {
		t.Fatalf("report once the server is back: %v traces, %v", rep, err)
	}
	s.Close()
	if _, err := s.WriteSpans(ctx, c.Spans[2]); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
}

// proxy forwards TCP connections to a server until cut; cut closes every
// connection and refuses new ones until resumed.
type proxy struct {
	addr   string
	target string
	l      net.Listener
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String(), target: target, l: l}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.down {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// A window's state is exact unless an Apply that touched it did not
// finish: one cut off by the server going away leaves it dirty until a
// later Apply writes its state; retention that cuts a window marks it
// dirty too.
func TestStateExactness(t *testing.T) {
	ctx := context.Background()
	u := server(t)
	dsn, _ := url.Parse(freshDatabase(t, u))
	p := newProxy(t, u.Host)
	dsn.Host = p.addr
	s := open(t, dsn.String(), time.Hour)
	defer s.Close()
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
		t.Fatalf("after a whole Apply: exact %v, %v", exact, err)
	}
	// An Apply whose records are written but whose state is not: a batch
	// that changes records of w without giving its state (what a crash
	// between the two writes leaves).
	if err := s.Apply(ctx, store.Batch{Changes: changes[5:]}); err != nil {
		t.Fatal(err)
	}
	if _, exact, err := s.State(ctx, w); err != nil || exact {
		t.Fatalf("records changed without the state: exact %v, %v", exact, err)
	}
	// Still not exact for another process, and after a reopen.
	s.Close()
	s = open(t, dsn.String(), time.Hour)
	if _, exact, err := s.State(ctx, w); err != nil || exact {
		t.Fatalf("after reopen: exact %v, %v", exact, err)
	}
	// Cut off half way: not exact either.
	p.cut()
	if err := s.Apply(ctx, store.Batch{States: map[int64]*analysis.State{w: st}}); err == nil {
		t.Fatal("apply through a cut connection succeeded")
	}
	p.resume()
	if _, exact, err := s.State(ctx, w); err != nil || exact {
		t.Fatalf("after a failed Apply: exact %v, %v", exact, err)
	}
	// A later Apply writes the state: exact again.
	if err := s.Apply(ctx, store.Batch{States: map[int64]*analysis.State{w: st}}); err != nil {
		t.Fatal(err)
	}
	if _, exact, err := s.State(ctx, w); err != nil || !exact {
		t.Fatalf("state rewritten: exact %v, %v", exact, err)
	}
	// A window with records but no state yet, dirty: returned empty, not
	// exact, so that the caller rebuilds it.
	w2 := w + 3
	r := c.Record(0, 1)
	r2 := *r
	r2.TraceID = graph.TraceID{0xaa}
	r2.Window = w2
	r2.Start = w2 * int64(time.Hour)
	if err := s.Apply(ctx, store.Batch{Changes: []store.Change{{New: &r2}}}); err != nil {
		t.Fatal(err)
	}
	if got, exact, err := s.State(ctx, w2); err != nil || exact || got == nil {
		t.Fatalf("dirty window without a state: %v exact %v, %v", got, exact, err)
	}
	// Retention cutting a window marks it dirty: 7-hour windows, one from
	// 22:00 on the 28th to 05:00 on the 1st, cut at midnight.
	sd := open(t, freshDatabase(t, u), 7*time.Hour)
	defer sd.Close()
	cd := storetest.NewCorpus(t, 10, time.Date(2026, 2, 28, 23, 55, 0, 0, time.UTC), time.Minute)
	wd := analysis.WindowOf(cd.Results[0].Start, 7*time.Hour)
	if wd != analysis.WindowOf(cd.Results[9].Start, 7*time.Hour) {
		t.Fatal("the corpus is not in one window")
	}
	var dchanges []store.Change
	for i := range cd.Traces {
		r := cd.Record(i, 1)
		r.Window = wd // the corpus is analysed with hourly windows
		dchanges = append(dchanges, store.Change{New: r})
	}
	anyState := cd.Windows.State(cd.Results[0].Window)
	if err := sd.Apply(ctx, store.Batch{Changes: dchanges, States: map[int64]*analysis.State{wd: anyState}}); err != nil {
		t.Fatal(err)
	}
	if _, exact, err := sd.State(ctx, wd); err != nil || !exact {
		t.Fatalf("window across midnight: exact %v, %v", exact, err)
	}
	if err := sd.DeleteBefore(ctx, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if _, exact, err := sd.State(ctx, wd); err != nil || exact {
		t.Fatalf("window cut by retention: exact %v, %v", exact, err)
	}
	n := 0
	if err := sd.WindowRecords(ctx, wd, nil, func(*store.Record) error { n++; return nil }); err != nil || n != 5 {
		t.Fatalf("%d records left in the cut window, want the 5 after midnight: %v", n, err)
	}
}

// reportOf sums results the way storetest does: what q selects, the
// per-API rows of q.API only.
func reportOf(results map[graph.TraceID]*analysis.TraceResult, q store.Query) *analysis.Report {
	rep := analysis.NewReport()
	for _, r := range results {
		if !q.Contains(r.Start) {
			continue
		}
		if q.API != "" && r.API != q.API {
			one := *r
			one.API = ""
			rep.Add(&one, 1)
			continue
		}
		rep.Add(r, 1)
	}
	rep.Prune()
	return rep
}

// Reports read whole days from the day tier, whole hours from the hour
// tier and the rest from the minutes, all kept by the same Apply: the
// figures are exact right after it, for ranges that cut days and hours,
// through replacements, moves and deletions.
func TestRollupTiers(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	s := open(t, dsn, time.Hour)
	defer func() { s.Close() }()
	c := storetest.NewCorpus(t, 200, time.Date(2026, 3, 1, 21, 30, 0, 0, time.UTC), 11*time.Minute) // to the 3rd, ~10:00
	current := map[graph.TraceID]*analysis.TraceResult{}
	stored := map[graph.TraceID]*store.Record{}
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	apply := func(changes []store.Change) {
		t.Helper()
		if err := s.Apply(ctx, store.Batch{Changes: changes}); err != nil {
			t.Fatal(err)
		}
		for _, ch := range changes {
			if ch.New == nil {
				delete(current, ch.ID())
				delete(stored, ch.ID())
			} else {
				current[ch.ID()], stored[ch.ID()] = ch.New.Result, ch.New
			}
		}
	}
	apply(changes[:120])
	apply(changes[120:])
	at := func(d, hh, mm int) int64 { return time.Date(2026, 3, d, hh, mm, 0, 0, time.UTC).UnixNano() }
	queries := []store.Query{{}, {From: at(1, 22, 0), To: at(3, 9, 0)}, {From: at(1, 23, 45), To: at(3, 0, 17)},
		{From: at(2, 0, 0), To: at(3, 0, 0)}, {From: at(2, 5, 31), To: at(2, 5, 32)},
		{From: at(1, 21, 31), To: at(3, 2, 2), API: "front GET /dispatch"}}
	check := func(when string) {
		t.Helper()
		for _, q := range queries {
			got, err := s.Report(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := doc(t, got), doc(t, reportOf(current, q)); g != w {
				t.Fatalf("%s, query %+v:\n got %s\nwant %s", when, q, g, w)
			}
		}
	}
	check("stored")
	// Replace the records of the 2nd (evaluated against an empty window:
	// other figures), move every fifth a minute earlier, delete every
	// seventh.
	ev := analysis.NewEvaluator(analysis.Config{})
	changes = changes[:0]
	for i, tr := range c.Traces {
		old := stored[tr.ID]
		switch {
		case i%7 == 0:
			changes = append(changes, store.Change{Old: old})
		case i%5 == 0:
			moved := *old
			moved.Start -= int64(time.Minute)
			changes = append(changes, store.Change{Old: old, New: &moved})
		case old.Start >= at(2, 0, 0) && old.Start < at(3, 0, 0):
			nr := ev.Evaluate(tr, analysis.NewState())
			changes = append(changes, store.Change{Old: old, New: store.NewRecord(tr, &nr, 2)})
		}
	}
	apply(changes)
	check("changed")
	// Recomputed from the records (as after an Apply that did not
	// finish): the same figures, under new generations.
	for _, r := range stored {
		s.repair[r.Minute()] = struct{}{}
	}
	if err := s.Apply(ctx, store.Batch{}); err != nil {
		t.Fatal(err)
	}
	if len(s.gens) == 0 {
		t.Fatal("nothing recomputed")
	}
	check("recomputed")
	s.Close()
	s = open(t, dsn, time.Hour)
	check("reopened")
}

// Retention drops the day partitions before the cutoff's day.
func TestRetentionDropsPartitions(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	testRetentionDropsPartitions(t, s)
}

func testRetentionDropsPartitions(t *testing.T, s *Store) {
	ctx := context.Background()
	c := storetest.NewCorpus(t, 72, time.Date(2026, 2, 27, 12, 0, 0, 0, time.UTC), time.Hour) // three days
	var changes []store.Change
	states := map[int64]*analysis.State{}
	for i := range c.Traces {
		if _, err := s.WriteSpans(ctx, c.Spans[i]); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, store.Change{New: c.Record(i, uint64(i+1))})
		states[c.Results[i].Window] = c.Windows.State(c.Results[i].Window)
	}
	if err := s.Apply(ctx, store.Batch{Changes: changes, States: states}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, store.Batch{}); err != nil { // hourly rollups too
		t.Fatal(err)
	}
	if err := s.PutSummaries(ctx, c.Windows.Summaries(analysis.Config{})); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC)
	if err := s.DeleteBefore(ctx, cut.UnixNano()); err != nil {
		t.Fatal(err)
	}
	days := map[string]bool{}
	err := s.query(ctx, "parts", `SELECT DISTINCT table, partition_id FROM `+s.partsSource()+` WHERE database = `+quote(s.db)+
		` AND active`, func(r driver.Rows) error {
		var table, id string
		if err := r.Scan(&table, &id); err != nil {
			return err
		}
		table = strings.TrimSuffix(table, localSuffix) // a cluster's
		if id < "20260301" && id != "all" && !(table == "record_index" && id == "202603") {
			t.Errorf("%s keeps partition %s", table, id)
		}
		days[id] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !days["20260301"] {
		t.Fatalf("the cutoff's day was dropped: %v", days)
	}
	keep := map[graph.TraceID]*analysis.TraceResult{}
	var ids []graph.TraceID
	for i, r := range c.Results {
		ids = append(ids, c.Traces[i].ID)
		if r.Start >= time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano() {
			keep[c.Traces[i].ID] = r
		}
	}
	recs, err := s.Records(ctx, ids)
	if err != nil || len(recs) != len(keep) {
		t.Fatalf("%d records after retention, want %d: %v", len(recs), len(keep), err)
	}
	got, err := s.Report(ctx, store.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := doc(t, got), doc(t, reportOf(keep, store.Query{})); g != w {
		t.Fatalf("report after retention:\n got %s\nwant %s", g, w)
	}
	n := 0
	if err := s.SpansAfter(ctx, 0, func(_ uint64, spans []graph.Span) error { n += len(spans); return nil }); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("retention dropped the spans written today")
	}
}

// Incidents read from ClickHouse are those the embedded store finds in the
// same records: hot minutes, the last minute, example traces, whole
// incidents, also after a bucket was recomputed.
func TestIncidentsAgreeWithSQLite(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	testIncidentsAgreeWithSQLite(t, s)
}

func testIncidentsAgreeWithSQLite(t *testing.T, s *Store) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, sqlite.Options{Dir: t.TempDir(), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	// 20 minutes across an hour boundary: the hour tier that narrows the
	// hot-minute search is asked on both sides of it.
	c := storetest.NewCorpus(t, 600, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 2*time.Second)
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
	}
	states := map[int64]*analysis.State{}
	for _, w := range c.Windows.Indexes() {
		states[w] = c.Windows.State(w)
	}
	// In two batches, every other trace: each node's minutes are rows of
	// two inserts, to be summed.
	var even, odd []store.Change
	for i, ch := range changes {
		if i%2 == 0 {
			even = append(even, ch)
		} else {
			odd = append(odd, ch)
		}
	}
	for _, st := range []store.Store{s, lite} {
		if err := st.Apply(ctx, store.Batch{Changes: even}); err != nil {
			t.Fatal(err)
		}
		if err := st.Apply(ctx, store.Batch{Changes: odd, States: states}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutSummaries(ctx, c.Windows.Summaries(analysis.Config{})); err != nil {
			t.Fatal(err)
		}
	}
	cfg := analysis.Config{Window: time.Hour}
	at := func(hh, mm int) int64 { return time.Date(2026, 3, 1, hh, mm, 0, 0, time.UTC).UnixNano() }
	compare := func(when string) {
		t.Helper()
		for _, q := range []store.Query{{}, {From: at(9, 53), To: at(10, 4)}, {From: at(10, 1), To: at(10, 9)}} {
			for _, rules := range [][2]float64{{3, 0.2}, {1, 0.05}, {6, 0.05}, {1000, 0}} {
				a, err := s.HotMinutes(ctx, q, int64(rules[0]), rules[1])
				if err != nil {
					t.Fatal(err)
				}
				b, _ := lite.HotMinutes(ctx, q, int64(rules[0]), rules[1])
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%s: hot minutes of %+v, %v:\n got %v\nwant %v", when, q, rules, a, b)
				}
			}
			m1, ok1, err := s.LastMinute(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			m2, ok2, _ := lite.LastMinute(ctx, q)
			if m1 != m2 || ok1 != ok2 {
				t.Fatalf("%s: last minute of %+v: %d %v, want %d %v", when, q, m1, ok1, m2, ok2)
			}
			find := func(r query.Reader) []analysis.IncidentDoc {
				t.Helper()
				var out []analysis.IncidentDoc
				var err error
				if q.From == 0 {
					out, err = query.DocumentIncidents(ctx, r, q, cfg)
				} else {
					out, err = query.FindIncidents(ctx, r, q, cfg, true)
				}
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			a, b := find(s), find(lite)
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Fatalf("%s: incidents of %+v:\n got %s\nwant %s", when, q, ja, jb)
			}
			if len(b) == 0 {
				t.Fatalf("%s: the corpus has no incident in %+v", when, q)
			}
			if hot, _ := lite.HotMinutes(ctx, q, 3, 0.2); len(hot) == 0 {
				t.Fatalf("%s: no hot minute in %+v: the comparison above proves nothing", when, q)
			}
		}
	}
	compare("stored")
	day := analysis.MinuteOf(at(0, 0)) / 1440
	// split: the day is in several parts (Compact merges it; no answer
	// depends on it).
	split := func() bool {
		t.Helper()
		ids, err := s.splitDays(ctx, `partition_id = `+quote(dayID(day)))
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(ids, dayID(day))
	}
	if !split() {
		t.Fatal("the day is in one part before Compact: the comparison below compares nothing new")
	}
	if err := s.Compact(ctx, at(23, 0)); err != nil {
		t.Fatal(err)
	}
	if !split() {
		t.Fatal("Compact merged the day it was asked to leave")
	}
	if err := s.Compact(ctx, at(24, 0)); err != nil {
		t.Fatal(err)
	}
	if split() {
		t.Fatal("the day is in several parts after Compact")
	}
	compare("compacted")
	// A late change to the settled day (a trace removed): summed again.
	late := store.Batch{Changes: []store.Change{{Old: changes[len(changes)/2].New}}}
	for _, st := range []store.Store{s, lite} {
		if err := st.Apply(ctx, late); err != nil {
			t.Fatal(err)
		}
	}
	if !split() {
		t.Fatal("the day is in one part after a late insert")
	}
	compare("late change")
	changes = slices.Delete(changes, len(changes)/2, len(changes)/2+1)
	for _, ch := range changes {
		s.repair[ch.New.Minute()] = struct{}{}
	}
	if err := s.Apply(ctx, store.Batch{}); err != nil {
		t.Fatal(err)
	}
	compare("recomputed")
}
