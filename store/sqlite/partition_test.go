package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// latestVersion returns the version of the last migration of dir.
func latestVersion(t *testing.T, dir string) int {
	t.Helper()
	ms, err := schema.Load(dir)
	if err != nil || len(ms) == 0 {
		t.Fatal(ms, err)
	}
	return ms[len(ms)-1].Version
}

// applyUpTo applies the migrations of dir up to version n, as a release
// that had no later ones did.
func applyUpTo(t *testing.T, path, dir string, n int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := schema.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > n {
			break
		}
		for _, st := range m.Statements() {
			if _, err := db.Exec(st); err != nil {
				t.Fatalf("%s %d: %v", dir, m.Version, err)
			}
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = ` + strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
}

// A store made before partitions (spans.db at version 1, results.db at 8,
// written as that release wrote them) is migrated in place: everything in
// it is the default partition's, which reads it as before; another
// partition sees none of it but the window state, as its peer's.
func TestPartitionsMigrated(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c := storetest.NewCorpus(t, 30, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Minute) // one hourly window
	idx := c.Windows.Indexes()
	if len(idx) != 1 {
		t.Fatalf("corpus has %d windows", len(idx))
	}
	w := idx[0]
	applyUpTo(t, filepath.Join(dir, "spans.db"), "sqlite/spans", 1)
	applyUpTo(t, filepath.Join(dir, "results.db"), "sqlite/results", 8)

	// The previous release's rows: two span writes, the records, the
	// window's state, the checkpoint, an expired lease.
	spans, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "spans.db"))
	if err != nil {
		t.Fatal(err)
	}
	var enc graph.TraceEncoder
	row := int64(0)
	for seq, traces := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29}} {
		first := row + 1
		for _, i := range traces {
			row++
			if _, err := spans.Exec(`INSERT INTO spans (rowid, trace_id, seq, n, data) VALUES (?, ?, ?, ?, ?)`,
				row, c.Traces[i].ID[:], seq+1, len(c.Spans[i]), enc.AppendSpans(nil, c.Spans[i])); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := spans.Exec(`INSERT INTO writes (seq, first_row, last_row, written_at) VALUES (?, ?, ?, ?)`,
			seq+1, first, row, time.Now().UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	spans.Close()
	results, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	var renc analysis.ResultEncoder
	for i := range c.Traces {
		r := c.Record(i, 2)
		eds := make([]byte, 0, 8*len(r.Edges))
		for _, e := range r.Edges {
			eds = binary.BigEndian.AppendUint64(eds, e)
		}
		if _, err := results.Exec(`INSERT INTO records (trace_id, start, win, api, seq, edges, result, facts) VALUES (?,?,?,?,?,?,?,?)`,
			r.TraceID[:], r.Start, r.Window, r.API, 2, eds, renc.Append(nil, r.Result), r.Facts); err != nil {
			t.Fatal(err)
		}
	}
	state, _ := json.Marshal(c.Windows.State(w))
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO states (win, state) VALUES (?, ?)`, []any{w, state}},
		{`INSERT INTO meta (key, value) VALUES ('window_ns', ?), ('watermark', 2)`, []any{int64(time.Hour)}},
		{`INSERT INTO lease (name, holder, host, pid, started, namespace, expires) VALUES ('analysis', 'old', 'h', 1, 0, '', 0)`, nil},
	} {
		if _, err := results.Exec(q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	results.Close()

	s, err := Open(ctx, Options{Dir: dir, Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for db, want := range map[*sql.DB]int{s.spansR: latestVersion(t, "sqlite/spans"), s.resR: latestVersion(t, "sqlite/results")} {
		var v int
		if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != want {
			t.Fatalf("schema version %d %v, want %d", v, err, want)
		}
	}
	// Every row is the default partition's.
	for _, q := range []struct {
		db  *sql.DB
		sql string
		n   int
	}{
		{s.spansR, `SELECT count(*) FROM writes WHERE part = ''`, 2},
		{s.resR, `SELECT count(*) FROM records WHERE part = ''`, len(c.Traces)},
		{s.resR, `SELECT count(*) FROM states WHERE part = '' AND win = ` + strconv.FormatInt(w, 10), 1},
	} {
		var n int
		if err := q.db.QueryRow(q.sql).Scan(&n); err != nil || n != q.n {
			t.Errorf("%s: %d %v, want %d", q.sql, n, err, q.n)
		}
	}

	all := make([]graph.TraceID, len(c.Traces))
	for i, tr := range c.Traces {
		all[i] = tr.ID
	}
	p, err := s.Partition("p1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The store reads it as it was; p1 has none of it but the state of
	// its peer, the default partition.
	for _, v := range []struct {
		name              string
		s                 store.PartitionStore
		writes, wm, inWin int
		state, peer       string
		peers             []int64
	}{
		{"store", s, 2, 2, len(c.Traces), string(state), "null", nil},
		{"p1", p, 0, 0, 0, "", string(state), []int64{w}},
	} {
		var seqs []uint64
		n := 0
		if err := v.s.SpansAfter(ctx, 0, func(seq uint64, sp []graph.Span) error { seqs = append(seqs, seq); n += len(sp); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(seqs) != v.writes {
			t.Errorf("%s: SpansAfter read writes %v, want %d", v.name, seqs, v.writes)
		}
		if wm, err := v.s.Watermark(ctx); err != nil || wm != uint64(v.wm) {
			t.Errorf("%s: watermark %d %v, want %d", v.name, wm, err, v.wm)
		}
		in := 0
		if err := v.s.WindowRecords(ctx, w, nil, func(*store.Record) error { in++; return nil }); err != nil || in != v.inWin {
			t.Errorf("%s: %d records in the window, %v; want %d", v.name, in, err, v.inWin)
		}
		if got, err := v.s.Records(ctx, all); err != nil || len(got) != len(all) {
			t.Errorf("%s: %d records, %v; want %d", v.name, len(got), err, len(all))
		}
		st, _, err := v.s.State(ctx, w)
		if v.state == "" {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: state %v, want ErrNotFound", v.name, err)
			}
		} else if b, _ := json.Marshal(st); err != nil || string(b) != v.state {
			t.Errorf("%s: state differs from the one stored before partitions (%v)", v.name, err)
		}
		peer, err := v.s.PeerState(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if v.peer == "null" {
			if peer.Traces != 0 {
				t.Errorf("%s: peers' state of %d traces, want none", v.name, peer.Traces)
			}
		} else if b, _ := json.Marshal(peer); string(b) != v.peer {
			t.Errorf("%s: peers' state differs from the default partition's", v.name)
		}
		// The migrated state was written at the migration, a moment ago.
		ws, err := v.s.PeerWindows(ctx, time.Now().Add(-time.Minute).UnixNano())
		if err != nil || !slices.Equal(ws, v.peers) {
			t.Errorf("%s: peer windows %v %v, want %v", v.name, ws, err, v.peers)
		}
	}
	// The old release's expired lease is taken over; p1's is another.
	if _, err := s.AcquireLease(ctx, store.NewLeaseHolder(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AcquireLease(ctx, store.NewLeaseHolder(), time.Minute); err != nil {
		t.Fatal(err)
	}
	// New writes follow the old ones, whichever partition makes them.
	if seq, err := p.WriteSpans(ctx, c.Spans[0]); err != nil || seq != 3 {
		t.Fatalf("p1's first write: sequence %d %v, want 3", seq, err)
	}
}

// The window scan that finds the records using flipped edges is matched
// on the window and the partition in records_by_window, and reads the
// trace id and edges of the rows alone: not the partition, stored after
// the large columns (docs/ARCHITECTURE.md, "Keeping stored results right
// when a window changes").
func TestWindowScanReadsEdgesAlone(t *testing.T) {
	s, err := Open(context.Background(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var plan string
	rows, err := s.resR.Query(`EXPLAIN QUERY PLAN `+windowEdgesQuery, 1, "p")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, parent, unused int
		var detail string
		rows.Scan(&id, &parent, &unused, &detail)
		plan += detail + "\n"
	}
	rows.Close()
	if !strings.Contains(plan, "USING INDEX records_by_window (win=? AND part=?)") {
		t.Fatalf("plan:\n%s\nwant a search of records_by_window on the window and the partition", plan)
	}
	var root int
	if err := s.resR.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'records'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	cols := map[string]int{}
	trows, err := s.resR.Query(`SELECT name, cid FROM pragma_table_info('records')`)
	if err != nil {
		t.Fatal(err)
	}
	for trows.Next() {
		var name string
		var cid int
		trows.Scan(&name, &cid)
		cols[name] = cid
	}
	trows.Close()
	// The bytecode: the table's cursor is the one opened on its root page;
	// the columns read through it are Column p1=cursor p2=column.
	rows, err = s.resR.Query(`EXPLAIN `+windowEdgesQuery, 1, "p")
	if err != nil {
		t.Fatal(err)
	}
	cursor := -1
	var read []int
	for rows.Next() {
		var addr, p1, p2, p3, p5 int
		var op string
		var p4, comment any
		if err := rows.Scan(&addr, &op, &p1, &p2, &p3, &p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		switch {
		case op == "OpenRead" && p2 == root:
			cursor = p1
		case op == "Column" && p1 == cursor:
			read = append(read, p2)
		}
	}
	rows.Close()
	slices.Sort(read)
	if want := []int{cols["trace_id"], cols["edges"]}; !slices.Equal(read, want) {
		t.Fatalf("the window scan reads columns %v of records, want %v (trace_id, edges)", read, want)
	}
}

// Each partition view has its lease and write fence: a view whose lease
// is lost refuses its writes, the other views and the store keep writing;
// a closed view refuses writes and has released its lease; the store's
// Close releases its views'.
func TestPartitionFences(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	clk := storetest.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	open := func() *Store {
		s, err := Open(ctx, Options{Dir: dir, Window: time.Hour, LeaseClock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c := storetest.NewCorpus(t, 10, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Minute)
	a := open()
	defer a.Close()
	view := func(s *Store, p string) store.PartitionStore {
		v, err := s.Partition(p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	p1, p2 := view(a, "p1"), view(a, "p2")
	const ttl = 30 * time.Second // deadline: 27 s after a renewal
	for _, s := range []store.Store{a, p1, p2} {
		if _, err := s.AcquireLease(ctx, store.NewLeaseHolder(), ttl); err != nil {
			t.Fatal(err)
		}
	}
	writes := func(s store.Store, i int) map[string]error {
		_, spans := s.WriteSpans(ctx, c.Spans[i])
		return map[string]error{
			"WriteSpans":   spans,
			"Apply":        s.Apply(ctx, store.Batch{Changes: []store.Change{{New: c.Record(i, 1)}}}),
			"PutSummaries": s.PutSummaries(ctx, nil),
			"DeleteBefore": s.DeleteBefore(ctx, 0),
		}
	}
	clk.Add(20 * time.Second)
	for _, s := range []store.Store{a, p2} { // not p1
		if _, err := s.RenewLease(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(8 * time.Second) // past p1's deadline, before the others'
	for what, err := range writes(p1, 0) {
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("p1 past its deadline: %s: %v, want ErrLeaseLost", what, err)
		}
	}
	for k, s := range []store.Store{a, p2} {
		for what, err := range writes(s, 1+k) {
			if err != nil {
				t.Errorf("%s beside p1's lost lease: %s: %v", []string{"store", "p2"}[k], what, err)
			}
		}
	}
	if _, err := p1.RenewLease(ctx); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("p1's renewal past its deadline: %v, want ErrLeaseLost", err)
	}

	// Another process: p2 is held, until p2's view closes; p1 expired.
	b := open()
	defer b.Close()
	b1, b2, b3 := view(b, "p1"), view(b, "p2"), view(b, "p3")
	clk.Add(3 * time.Second) // p1's lease expired
	if _, err := b1.AcquireLease(ctx, store.NewLeaseHolder(), ttl); err != nil {
		t.Fatalf("p1 after its lease expired: %v", err)
	}
	if _, err := b2.AcquireLease(ctx, store.NewLeaseHolder(), ttl); !errors.Is(err, store.ErrLeaseHeld) || !strings.Contains(err.Error(), `partition "p2"`) {
		t.Fatalf("p2 while held: %v, want ErrLeaseHeld naming the partition", err)
	}
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	for what, err := range writes(p2, 4) {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("p2 closed: %s: %v, want ErrClosed", what, err)
		}
	}
	if _, err := b2.AcquireLease(ctx, store.NewLeaseHolder(), ttl); err != nil {
		t.Fatalf("p2 after its view closed: %v", err)
	}
	// The processes' span writes interleave, each following the last.
	var last uint64
	for i, s := range []store.Store{b2, a, b1, a, b2} {
		seq, err := s.WriteSpans(ctx, c.Spans[5+i%5])
		if err != nil || seq <= last {
			t.Fatalf("write %d: sequence %d after %d, %v", i, seq, last, err)
		}
		last = seq
	}

	// The store's Close releases its views' leases: p3 (a view of a) is
	// taken at once by b's.
	a3 := view(a, "p3")
	if _, err := a3.AcquireLease(ctx, store.NewLeaseHolder(), ttl); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b3.AcquireLease(ctx, store.NewLeaseHolder(), ttl); err != nil {
		t.Fatalf("p3 after its store closed: %v", err)
	}
	if err := a3.Close(); err != nil {
		t.Fatalf("closing a view of a closed store: %v", err)
	}
	if _, err := a.Partition("p4"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a view of a closed store: %v, want ErrClosed", err)
	}
}

// A partition's lease behaves as the store's: the lease suite, run on
// views of one partition.
func TestPartitionLeaseConformance(t *testing.T) {
	storetest.Lease(t, func(t *testing.T, clock func() time.Time) store.Store {
		dir := filepath.Join(filepath.Dir(t.TempDir()), "data")
		s, err := Open(context.Background(), Options{Dir: dir, Window: time.Hour, LeaseClock: clock})
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.Partition(store.KafkaPartition("otlp_spans", 3))
		if err != nil {
			t.Fatal(err)
		}
		return viewAndStore{v, s}
	})
}

// viewAndStore is a view whose Close closes its store too.
type viewAndStore struct {
	store.PartitionStore
	s *Store
}

func (v viewAndStore) Close() error { return errors.Join(v.PartitionStore.Close(), v.s.Close()) }

// A read-only store's views read and refuse every write.
func TestPartitionReadOnly(t *testing.T) {
	ctx := context.Background()
	c := storetest.NewCorpus(t, 30, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), 10*time.Second)
	dir := t.TempDir()
	w, err := Open(ctx, Options{Dir: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Fill(t, w, c, 20)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{Dir: dir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{"", "p1"} {
		v, err := s.Partition(p)
		if err != nil {
			t.Fatal(err)
		}
		storetest.ReadOnly(t, v, c, 20)
		if wm, err := v.Watermark(ctx); err != nil || wm != map[string]uint64{"": 20, "p1": 0}[p] {
			t.Errorf("partition %q: watermark %d %v", p, wm, err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A partition that empties its state of a window drops it (it reads as
// none, and counts for nothing in its peers' sum), and its peers see the
// window change.
func TestPartitionEmptiedState(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := storetest.NewCorpus(t, 10, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Minute)
	w := c.Windows.Indexes()[0]
	p1, err := s.Partition("p1")
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	one := analysis.NewState()
	one.Add(c.Traces[0], 1)
	if err := p1.Apply(ctx, store.Batch{States: map[int64]*analysis.State{w: one}}); err != nil {
		t.Fatal(err)
	}
	if peer, err := s.PeerState(ctx, w); err != nil || peer.Traces != 1 {
		t.Fatalf("the store's peers: %v traces, %v; want p1's one", peer, err)
	}
	since := time.Now().UnixNano()
	if err := p1.Apply(ctx, store.Batch{States: map[int64]*analysis.State{w: analysis.NewState()}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p1.State(ctx, w); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("emptied state: %v, want ErrNotFound", err)
	}
	if peer, err := s.PeerState(ctx, w); err != nil || peer.Traces != 0 {
		t.Fatalf("the store's peers after p1 emptied its state: %v traces, %v; want none", peer, err)
	}
	if ws, err := s.PeerWindows(ctx, since); err != nil || !slices.Equal(ws, []int64{w}) {
		t.Fatalf("the store's peer windows since p1 emptied its state: %v %v, want [%d]", ws, err, w)
	}
	if ws, err := p1.PeerWindows(ctx, 0); err != nil || len(ws) != 0 {
		t.Fatalf("p1's peer windows: %v %v, want none (its own are not its peers')", ws, err)
	}
}
