package clickhouse

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// The store on a ClickHouse cluster of two shards (one replica each,
// ZooKeeper for the Replicated tables and ON CLUSTER DDL): the cluster
// STORMRADIUS_TEST_CLICKHOUSE_CLUSTER names, which scripts/chcluster.sh
// runs (.ci/run does). The conformance suite, the lease's, retention,
// incidents against the embedded store, and where the rows land. The
// service end to end against a single server is TestServiceOnCluster
// (e2e_test.go).
func TestCluster(t *testing.T) {
	u, name := chtest.Cluster(t)
	t.Parallel() // with TestServiceOnCluster: each waits on the servers' DDL queue
	// A migration on a cluster is 85 ON CLUSTER statements (~12 s); the
	// databases the subtests need (22) are migrated from the start, a
	// few at a time, as the subtests run.
	pool := newClusterPool(t, u, 22)
	// The subtests side by side: each waits on databases and round trips
	// more than on the machine.
	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		dsns := map[string]string{} // by subtest
		storetest.Run(t, func(t *testing.T, fresh bool) store.Store {
			mu.Lock()
			dsn := dsns[t.Name()]
			if fresh || dsn == "" {
				dsn = pool.take(t)
				dsns[t.Name()] = dsn
			}
			mu.Unlock()
			return open(t, dsn, time.Hour)
		}, storetest.Optional{IncidentReader: true, SeriesReader: true, Compactor: true, Partitioned: true})
	})
	t.Run("Lease", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		dsns := map[string]string{} // by subtest
		storetest.Lease(t, func(t *testing.T, clock func() time.Time) store.Store {
			mu.Lock()
			dsn := dsns[t.Name()]
			if dsn == "" {
				dsn = pool.take(t)
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
	})
	t.Run("Retention", func(t *testing.T) {
		t.Parallel()
		s := open(t, pool.take(t), time.Hour)
		defer s.Close()
		testRetentionDropsPartitions(t, s)
	})
	t.Run("Incidents", func(t *testing.T) {
		t.Parallel()
		s := open(t, pool.take(t), time.Hour)
		defer s.Close()
		testIncidentsAgreeWithSQLite(t, s)
	})
	t.Run("Shards", func(t *testing.T) { t.Parallel(); testShards(t, pool.take(t), name) })
	t.Run("Reopen", func(t *testing.T) { t.Parallel(); testClusterReopen(t, u, pool.take(t), name) })
}

// clusterPool migrates cluster databases in the background, a few at a
// time (the first are ready soon, the others come while tests run), and
// hands them out; past the ones it was asked for, it migrates one when
// asked.
type clusterPool struct {
	t    *testing.T
	u    *url.URL
	dsns chan string
	errs chan error
	left atomic.Int32 // databases started and not handed out
}

// poolWorkers is how many databases the pool migrates at once: the
// servers run one DDL statement at a time, so more only delays the first.
const poolWorkers = 6

func newClusterPool(t *testing.T, u *url.URL, n int) *clusterPool {
	p := &clusterPool{t: t, u: u, dsns: make(chan string, n), errs: make(chan error, n)}
	p.left.Store(int32(n))
	todo := make(chan string, n)
	for range n {
		todo <- chtest.FreshClusterDatabase(t, u) // dropped when TestCluster ends
	}
	close(todo)
	for range poolWorkers {
		go func() {
			for dsn := range todo {
				if err := migrate(dsn); err != nil {
					p.errs <- err
					continue
				}
				p.dsns <- dsn
			}
		}()
	}
	return p
}

func migrate(dsn string) error {
	s, err := Open(context.Background(), Options{DSN: dsn, Window: time.Hour, Logger: quiet})
	if err != nil {
		return err
	}
	return s.Close()
}

// take returns the DSN of a migrated database no other test uses.
func (p *clusterPool) take(t *testing.T) string {
	t.Helper()
	if p.left.Add(-1) < 0 {
		dsn := chtest.FreshClusterDatabase(p.t, p.u)
		if err := migrate(dsn); err != nil {
			t.Fatalf("migrating a cluster database: %v", err)
		}
		return dsn
	}
	select {
	case dsn := <-p.dsns:
		return dsn
	case err := <-p.errs:
		t.Fatalf("migrating a cluster database: %v", err)
	case <-time.After(5 * time.Minute):
		t.Fatal("no cluster database migrated in 5 minutes")
	}
	return ""
}

// shard is one server of the cluster, its shard number and a connection
// to it (its own tables, not the Distributed ones).
type shard struct {
	num  uint32
	addr string
	conn driver.Conn
}

// clusterShards connects to every server of cluster name, as
// system.clusters lists them.
func clusterShards(t *testing.T, s *Store, name string) []shard {
	t.Helper()
	ctx := context.Background()
	var out []shard
	err := s.query(ctx, "list shards", `SELECT shard_num, host_address, port FROM system.clusters WHERE cluster = `+quote(name)+
		` ORDER BY shard_num, replica_num`, func(r driver.Rows) error {
		var sh shard
		var host string
		var port uint16
		if err := r.Scan(&sh.num, &host, &port); err != nil {
			return err
		}
		sh.addr = fmt.Sprintf("%s:%d", host, port)
		out = append(out, sh)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("cluster %s has %d servers, want the two shards of scripts/chcluster.sh: %+v", name, len(out), out)
	}
	for i := range out {
		conn, err := ch.Open(&ch.Options{Addr: []string{out[i].addr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		out[i].conn = conn
	}
	return out
}

func (sh shard) count(t *testing.T, q string) uint64 {
	t.Helper()
	var n uint64
	if err := sh.conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("shard %d: %s: %v", sh.num, q, err)
	}
	return n
}

func (sh shard) strings(t *testing.T, q string) []string {
	t.Helper()
	rows, err := sh.conn.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("shard %d: %s: %v", sh.num, q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// testShards writes a corpus through a cluster store and reads each
// shard's own tables: the rows are spread over both shards, each where
// its sharding key sends it (computed by the server from the key, not
// read from the store), what belongs together lies together, the
// Distributed tables see the sum, and every table is replicated through
// ZooKeeper under its path.
func testShards(t *testing.T, dsn, name string) {
	ctx := context.Background()
	s := open(t, dsn, time.Hour)
	defer s.Close()
	shards := clusterShards(t, s, name)
	c := storetest.NewCorpus(t, 120, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 10*time.Second)
	var changes []store.Change
	for i := range c.Traces {
		if _, err := s.WriteSpans(ctx, c.Spans[i]); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, store.Change{New: c.Record(i, uint64(i+1))})
	}
	states := map[int64]*analysis.State{}
	for _, w := range c.Windows.Indexes() {
		states[w] = c.Windows.State(w)
	}
	if err := s.Apply(ctx, store.Batch{Changes: changes, States: states}); err != nil {
		t.Fatal(err)
	}
	db := s.db

	// Every table's rows: some on each shard, all of them through the
	// Distributed table, none twice.
	for _, table := range []string{"trace_spans", "records", "record_index", "rollups", "node_minutes", "trace_buckets", "rollup_gens_by_part"} {
		var total uint64
		if err := s.queryRow(ctx, "count", `SELECT count() FROM `+table, &total); err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, sh := range shards {
			n := sh.count(t, `SELECT count() FROM `+db+`.`+table+localSuffix)
			if n == 0 && table != "rollup_gens_by_part" {
				t.Errorf("%s: no row on shard %d", table, sh.num)
			}
			sum += n
		}
		if sum != total {
			t.Errorf("%s: the shards hold %d rows, the Distributed table reads %d", table, sum, total)
		}
	}
	if n := shards[0].count(t, `SELECT count() FROM `+db+`.records_local`) + shards[1].count(t, `SELECT count() FROM `+db+`.records_local`); n != uint64(len(c.Traces)) {
		t.Errorf("%d record rows on the shards, want one per trace, %d", n, len(c.Traces))
	}

	// Each row where its key sends it: the Distributed engine picks
	// shard k (1, 2) for key % 2 == k-1 (equal weights).
	for _, sh := range shards {
		for _, q := range []string{
			`SELECT count() FROM ` + db + `.records_local WHERE cityHash64(trace_id) % 2 != ` + utoa(uint64(sh.num-1)),
			`SELECT count() FROM ` + db + `.trace_spans_local WHERE cityHash64(trace_id) % 2 != ` + utoa(uint64(sh.num-1)),
			`SELECT count() FROM ` + db + `.record_index_local WHERE cityHash64(trace_id) % 2 != ` + utoa(uint64(sh.num-1)),
			`SELECT count() FROM ` + db + `.rollups_local WHERE cityHash64(tier, bucket) % 2 != ` + utoa(uint64(sh.num-1)),
			`SELECT count() FROM ` + db + `.node_minutes_local WHERE cityHash64(tier, bucket) % 2 != ` + utoa(uint64(sh.num-1)),
			`SELECT count() FROM ` + db + `.states_by_part_local WHERE cityHash64(win, part) % 2 != ` + utoa(uint64(sh.num-1)),
		} {
			if n := sh.count(t, q); n != 0 {
				t.Errorf("shard %d holds %d rows of another shard's keys: %s", sh.num, n, q)
			}
		}
		// The views fill the shard's own tables: a trace's index entry
		// lies with its record, a bucket's node minutes with its rollups.
		recs := sh.strings(t, `SELECT DISTINCT hex(trace_id) FROM `+db+`.records_local`)
		if idx := sh.strings(t, `SELECT DISTINCT hex(trace_id) FROM `+db+`.record_index_local`); !slices.Equal(idx, recs) {
			t.Errorf("shard %d: the record index holds %d traces, the records %d", sh.num, len(idx), len(recs))
		}
		buckets := sh.strings(t, `SELECT DISTINCT concat(toString(tier), ':', toString(bucket)) FROM `+db+`.rollups_local WHERE stat = 'node_requests' AND tier = 0`)
		if nm := sh.strings(t, `SELECT DISTINCT concat(toString(tier), ':', toString(bucket)) FROM `+db+`.node_minutes_local`); !slices.Equal(nm, buckets) {
			t.Errorf("shard %d: node minutes of %d buckets, node rollups of %d", sh.num, len(nm), len(buckets))
		}
	}

	// Replicated through ZooKeeper: every local table on every server,
	// under /clickhouse/tables/{shard}/<db>/<table>, writable.
	ms, err := schema.Load("clickhouse")
	if err != nil {
		t.Fatal(err)
	}
	cs := newClusterSchema(db, name)
	for _, m := range ms {
		if _, _, err := forServer(m, s.server, cs); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for table, ct := range cs.tables {
		if !ct.view {
			want = append(want, table)
		}
	}
	want = append(want, "schema_migrations")
	slices.Sort(want)
	if len(want) < 13 {
		t.Fatalf("the migrations leave %d tables, want the 13 of migration 0011 at least: %v", len(want), want)
	}
	for _, sh := range shards {
		var got []string
		for _, table := range want {
			path := fmt.Sprintf("/clickhouse/tables/%d/%s/%s", sh.num, db, table)
			var zkPath, replica string
			var readonly uint8
			err := sh.conn.QueryRow(ctx, `SELECT zookeeper_path, replica_name, is_readonly FROM system.replicas WHERE database = `+
				quote(db)+` AND table = `+quote(table+localSuffix)).Scan(&zkPath, &replica, &readonly)
			if err != nil {
				t.Errorf("shard %d: %s%s is not a replicated table: %v", sh.num, table, localSuffix, err)
				continue
			}
			if zkPath != path || replica != "replica1" || readonly != 0 {
				t.Errorf("shard %d: %s%s replicates at %s as %s (read-only %d), want %s as replica1", sh.num, table, localSuffix, zkPath, replica, readonly, path)
			}
			if n := sh.count(t, `SELECT count() FROM system.zookeeper WHERE path = `+quote(path+"/replicas")+` AND name = 'replica1'`); n != 1 {
				t.Errorf("shard %d: no replica1 under %s/replicas in ZooKeeper", sh.num, path)
			}
			got = append(got, table)
		}
		if !slices.Equal(got, want) {
			t.Errorf("shard %d replicates %v, want %v", sh.num, got, want)
		}
		if n := sh.count(t, `SELECT count() FROM system.tables WHERE database = `+quote(db)+` AND engine = 'Distributed'`); n != uint64(len(want)) {
			t.Errorf("shard %d: %d Distributed tables, want %d", sh.num, n, len(want))
		}
	}

	// Identical blocks both count (Replicated tables would drop the
	// second by default): the same rollup delta twice is two deltas.
	delta := func() error {
		return s.insert(ctx, "delta", "rollups", []string{"tier", "bucket", "day", "gen", "stat", "n"},
			[]uint8{0}, []int64{1}, []time.Time{dayDate(0)}, []uint64{0}, []int8{1}, []int64{5})
	}
	for range 2 {
		if err := delta(); err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	if err := s.queryRow(ctx, "sum", `SELECT sum(n) FROM rollups WHERE bucket = 1 AND tier = 0`, &n); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Errorf("two identical deltas of 5 sum to %d, want 10", n)
	}
}

// testClusterReopen: a database keeps the cluster it was made for. A
// store opened without a cluster uses it (readers need no flag); a store
// asking for another cluster, or a cluster for a database made on one
// server, is refused; the dry run of an up-to-date database is empty,
// and that of a new one lists the rewritten statements.
func testClusterReopen(t *testing.T, u *url.URL, dsn, name string) {
	ctx := context.Background()
	plain := strings.Replace(dsn, "cluster="+url.QueryEscape(name), "", 1)
	r, err := Open(ctx, Options{DSN: plain, Existing: true, ReadOnly: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if r.cluster != name {
		t.Errorf("a reader without a cluster opened the cluster's database on cluster %q", r.cluster)
	}
	if _, err := r.HotMinutes(ctx, store.Query{}, 1, 0.1); err != nil { // reads every shard's parts
		t.Errorf("a read-only cluster store lists parts: %v", err)
	}
	r.Close()
	if _, err := Open(ctx, Options{DSN: plain, Cluster: "another", Logger: quiet}); err == nil || !strings.Contains(err.Error(), "not another") {
		t.Errorf("opening the database on another cluster: %v", err)
	}
	if _, err := Open(ctx, Options{DSN: dsn, Cluster: "another", Logger: quiet}); err == nil || !strings.Contains(err.Error(), "cluster=") {
		t.Errorf("a cluster option that disagrees with the DSN: %v", err)
	}
	if ms, err := Migrations(ctx, Options{DSN: dsn}); err != nil || len(ms) != 0 {
		t.Errorf("dry run of a migrated cluster database: %d migrations, %v", len(ms), err)
	}
	// A database made on one server of the cluster is not the cluster's.
	single := chtest.FreshDatabase(t, &url.URL{Scheme: "clickhouse", Host: u.Host})
	s := open(t, single, time.Hour)
	s.Close()
	if _, err := Open(ctx, Options{DSN: single, Cluster: name, Logger: quiet}); err == nil || !strings.Contains(err.Error(), "created on one server") {
		t.Errorf("opening a single server's database on the cluster: %v", err)
	}
	// A cluster the servers do not know.
	if _, err := Open(ctx, Options{DSN: strings.Replace(single, "stormradius_test_", "stormradius_nocluster_", 1), Cluster: "nosuch", Logger: quiet}); err == nil ||
		!strings.Contains(err.Error(), "knows no cluster nosuch") {
		t.Errorf("a cluster the servers do not know: %v", err)
	}
	// The dry run of a new database: the rewritten statements.
	fresh, _ := chtest.NewDatabase(u)
	ms, err := Migrations(ctx, Options{DSN: plain[:strings.LastIndex(plain, "/")+1] + fresh, Cluster: name})
	if err != nil {
		t.Fatal(err)
	}
	all := ""
	for _, m := range ms {
		all += m.SQL
	}
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS " + fresh + ".records_local ON CLUSTER " + quote(name),
		"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/" + fresh + "/records', '{replica}', version)",
		"ENGINE = Distributed(" + quote(name) + ", " + quote(fresh) + ", 'records_local', cityHash64(trace_id))",
		"TO " + fresh + ".record_index_local AS SELECT",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the dry run has no %q", want)
		}
	}
	conn, err := ch.Open(&ch.Options{Addr: []string{u.Host}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.databases WHERE name = `+quote(fresh)).Scan(&n); err != nil || n != 0 {
		t.Errorf("the dry run created database %s: %d, %v", fresh, n, err)
	}
}

// The rewrite of every kind of statement a migration has, and of those
// it refuses.
func TestClusterRewrite(t *testing.T) {
	c := newClusterSchema("db", "c1")
	run := func(sql, shardBy string) []string {
		t.Helper()
		out, err := c.rewrite(statement{sql: sql, shardBy: shardBy})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, ";\n"), strings.Join(want, ";\n"))
		}
	}
	check(run("CREATE TABLE IF NOT EXISTS t (day Date, trace_id FixedString(16), win Int64, v UInt64, s String DEFAULT 'a(b') "+
		"ENGINE = ReplacingMergeTree(v)\nPARTITION BY day\nORDER BY (win, trace_id)\nSETTINGS index_granularity = 256", ""),
		"CREATE TABLE IF NOT EXISTS db.t_local ON CLUSTER 'c1' (day Date, trace_id FixedString(16), win Int64, v UInt64, s String DEFAULT 'a(b') "+
			"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}', v)\nPARTITION BY day\nORDER BY (win, trace_id)\nSETTINGS index_granularity = 256",
		"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER 'c1' AS db.t_local ENGINE = Distributed('c1', 'db', 't_local', cityHash64(trace_id))")
	check(run("CREATE TABLE u (k String, n Int64) ENGINE = SummingMergeTree((n)) ORDER BY k", ""),
		"CREATE TABLE IF NOT EXISTS db.u_local ON CLUSTER 'c1' (k String, n Int64) ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/db/u', '{replica}', (n)) ORDER BY k",
		"CREATE TABLE IF NOT EXISTS db.u ON CLUSTER 'c1' AS db.u_local ENGINE = Distributed('c1', 'db', 'u_local', cityHash64(k))")
	check(run("CREATE TABLE w (a UInt8, b Int64) ENGINE = MergeTree ORDER BY (a, b)", "cityHash64(a)"),
		"CREATE TABLE IF NOT EXISTS db.w_local ON CLUSTER 'c1' (a UInt8, b Int64) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/db/w', '{replica}') ORDER BY (a, b)",
		"CREATE TABLE IF NOT EXISTS db.w ON CLUSTER 'c1' AS db.w_local ENGINE = Distributed('c1', 'db', 'w_local', cityHash64(a))")
	check(run("CREATE MATERIALIZED VIEW IF NOT EXISTS u_mv TO u AS\nSELECT toString(win) AS k, sum(v) AS n FROM t GROUP BY k", ""),
		"CREATE MATERIALIZED VIEW IF NOT EXISTS db.u_mv ON CLUSTER 'c1' TO db.u_local AS SELECT toString(win) AS k, sum(v) AS n FROM db.t_local GROUP BY k")
	// Columns change: the local table, then its Distributed table again.
	check(run("ALTER TABLE t ADD COLUMN part String, DROP COLUMN s", ""),
		"ALTER TABLE db.t_local ON CLUSTER 'c1' ADD COLUMN part String, DROP COLUMN s",
		"DROP TABLE IF EXISTS db.t ON CLUSTER 'c1'",
		"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER 'c1' AS db.t_local ENGINE = Distributed('c1', 'db', 't_local', cityHash64(trace_id))")
	check(run("ALTER TABLE t MODIFY SETTING ttl_only_drop_parts = 1", ""), "ALTER TABLE db.t_local ON CLUSTER 'c1' MODIFY SETTING ttl_only_drop_parts = 1")
	check(run("INSERT INTO u (k, n) SELECT toString(win), 1 FROM t", ""), "INSERT INTO u (k, n) SELECT toString(win), 1 FROM t")
	check(run("DROP TABLE IF EXISTS u_mv", ""), "DROP TABLE IF EXISTS db.u_mv ON CLUSTER 'c1'")
	check(run("DROP TABLE u", ""), "DROP TABLE IF EXISTS db.u ON CLUSTER 'c1'", "DROP TABLE IF EXISTS db.u_local ON CLUSTER 'c1'")
	if _, err := c.rewrite(statement{sql: "ALTER TABLE t ADD COLUMN y UInt8", shardBy: "cityHash64(y)"}); err == nil ||
		!strings.Contains(err.Error(), "creates no table") {
		t.Errorf("a shard key before an ALTER: %v", err)
	}
	for _, bad := range []struct{ sql, why string }{
		{"CREATE TABLE m (x UInt8) ENGINE = Memory", "MergeTree family"},
		{"CREATE TABLE n (x UInt8) ENGINE = MergeTree ORDER BY tuple()", "-- shard by:"},
		{"CREATE MATERIALIZED VIEW v TO nosuch AS SELECT x FROM t", "target nosuch"},
		{"CREATE MATERIALIZED VIEW v TO w AS SELECT a, b FROM t WHERE b IN (SELECT b FROM w)", "one FROM"},
		{"ALTER TABLE nosuch ADD COLUMN x UInt8", "not a table"},
		{"INSERT INTO u (k, n) VALUES ('a', 1)", "not a table"},
		{"OPTIMIZE TABLE t FINAL", "not a statement"},
		{"RENAME TABLE t TO t2", "not a statement"},
	} {
		if _, err := c.rewrite(statement{sql: bad.sql}); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("%s: %v, want an error saying %q", bad.sql, err, bad.why)
		}
	}
	// Every shipped migration rewrites (a new one that breaks the
	// conventions of docs/ARCHITECTURE.md fails here, no cluster needed);
	// the store's tables shard as the schema says.
	ms, err := schema.Load("clickhouse")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []serverVersion{{18, 16}, {26, 7}} {
		cs := newClusterSchema("db", "c1")
		for _, m := range ms {
			if _, _, err := forServer(m, v, cs); err != nil {
				t.Fatal(err)
			}
		}
		keys := map[string]string{}
		for table, ct := range cs.tables {
			keys[table] = ct.shardKey
		}
		for table, key := range map[string]string{
			"trace_spans": "cityHash64(trace_id)", "records": "cityHash64(trace_id)", "record_index": "cityHash64(trace_id)",
			"rollups": "cityHash64(tier, bucket)", "node_minutes": "cityHash64(tier, bucket)",
			"trace_buckets": "cityHash64(tier, bucket)", "summaries": "cityHash64(win)",
			"meta": "cityHash64(key)", "leases": "cityHash64(name)",
			// Per analysis partition (0012): a key's rows on one shard.
			"states_by_part": "cityHash64(win, part)", "dirty_by_part": "cityHash64(kind, id, part)",
			"rollup_gens_by_part": "cityHash64(tier, bucket, part)", "record_moves": "cityHash64(trace_id)",
		} {
			if keys[table] != key {
				t.Errorf("%v: %s shards by %q, want %q", v, table, keys[table], key)
			}
		}
	}
}
