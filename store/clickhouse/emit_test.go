package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// TestEmitSQL drives every method of the store against a connection that
// records the statements it is sent — inserts rendered as INSERT … VALUES
// with the values the store appended — and answers queries with canned
// rows, so that every branch issues its statements. The server claims to
// be a current release: the list holds the DDL with its extras.
//
// With STORMRADIUS_EMIT_SQL=file it writes the list there as JSON, for
// scripts/chdb-check.sh to run on a current ClickHouse engine (chdb):
// the statements are the code's own, so the check follows the code.
func TestEmitSQL(t *testing.T) {
	rec := &recorder{answers: map[string][][]any{
		"SELECT version()": {{"26.7.2.1"}},
	}}
	ctx := context.Background()
	// Recent data: the TTL (7 days) would drop older rows at once.
	base := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	c := storetest.NewCorpus(t, 6, base.Add(10*time.Hour+58*time.Minute), 30*time.Second)
	id := c.Traces[0].ID
	w := c.Results[0].Window
	minute := analysis.MinuteOf(c.Results[0].Start)

	s, err := Open(ctx, Options{DSN: "clickhouse://127.0.0.1:9000/default?ttl=168h", Window: time.Hour, Logger: quiet,
		dial: func(*ch.Options) (driver.Conn, error) { return rec, nil }})
	if err != nil {
		t.Fatal(err)
	}
	// Trace ids sent as an external table: chdb gets them as a temporary
	// table of the same name and structure.
	s.sentIDs = func(ids []graph.TraceID) {
		rec.record("CREATE TEMPORARY TABLE IF NOT EXISTS " + idsTable + " (id FixedString(16))")
		rec.record("TRUNCATE TABLE " + idsTable)
		rows := make([]string, len(ids))
		for i := range ids {
			rows[i] = "(" + idList(ids[i:i+1]) + ")"
		}
		rec.record("INSERT INTO " + idsTable + " (id) VALUES " + strings.Join(rows, ", "))
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Spans: one write within a day, one across two days.
	_, err = s.WriteSpans(ctx, c.Spans[0])
	must(err)
	_, err = s.WriteSpans(ctx, nil) // logged all the same
	must(err)
	late := append([]graph.Span(nil), c.Spans[1]...)
	late[0].Start -= int64(24 * time.Hour)
	_, err = s.WriteSpans(ctx, late)
	must(err)
	// Records: new ones with their states and a checkpoint; then a
	// replacement, a move to another minute and a deletion.
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 2)})
	}
	states := map[int64]*analysis.State{}
	for _, x := range c.Windows.Indexes() {
		states[x] = c.Windows.State(x)
	}
	must(s.Apply(ctx, store.Batch{Changes: changes, States: states, Watermark: 2}))
	moved := *changes[1].New
	moved.Start -= int64(time.Minute)
	must(s.Apply(ctx, store.Batch{Changes: []store.Change{
		{Old: changes[0].New, New: c.Record(0, 3)},
		{Old: changes[1].New, New: &moved},
		{Old: changes[2].New},
	}, States: map[int64]*analysis.State{w: analysis.NewState()}}))
	// A minute to repair (as an Apply that did not finish leaves it):
	// recomputed from the records, with its hour and day, under a new
	// generation. One without records (the canned answers hold none), so
	// that the rollups still agree with the records the check sums.
	s.repair[analysis.MinuteOf(base.Add(-72*time.Hour).UnixNano())] = struct{}{}
	must(s.Apply(ctx, store.Batch{}))
	// An analysis partition's view: its span write, a batch that takes a
	// record of the default partition (as the lookup answers), a repair
	// of a minute of its own (with the moves), its reads.
	pv, err := s.Partition(store.KafkaPartition("otlp_spans", 3))
	must(err)
	_, err = pv.WriteSpans(ctx, c.Spans[3])
	must(err)
	rec.answers["deleted, part FROM records WHERE"] = [][]any{{c.Traces[3].ID, c.Results[3].Window,
		analysis.MinuteOf(c.Results[3].Start), uint64(1), uint8(0), ""}}
	must(pv.Apply(ctx, store.Batch{Changes: []store.Change{{Old: changes[3].New, New: c.Record(3, 4)}},
		States: map[int64]*analysis.State{c.Results[3].Window: c.Windows.State(c.Results[3].Window)}, Watermark: 1}))
	pv.(*Store).repair[analysis.MinuteOf(base.Add(-72*time.Hour).UnixNano())] = struct{}{}
	must(pv.Apply(ctx, store.Batch{}))
	_, err = pv.PeerState(ctx, w)
	must(err)
	_, err = pv.PeerWindows(ctx, base.UnixNano())
	must(err)
	_, _, err = pv.State(ctx, w)
	if err != nil && !errorsIsNotFound(err) {
		t.Fatal(err)
	}
	must(pv.WindowRecords(ctx, w, nil, func(*store.Record) error { return nil }))
	_, err = pv.Watermark(ctx)
	must(err)
	must(pv.Close())
	// Reads.
	rec.answers["FROM record_index"] = [][]any{{id, w, minute, c.Results[0].Start, uint64(1), uint8(0)}}
	_, err = s.Records(ctx, []graph.TraceID{id, {0xde, 0xad}})
	must(err)
	must(s.WindowRecords(ctx, w, nil, func(*store.Record) error { return nil }))
	must(s.WindowRecords(ctx, w, []uint64{1, 1 << 63}, func(*store.Record) error { return nil }))
	h := func(hh, mm int) int64 {
		return base.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute).UnixNano()
	}
	rec.answers["GROUP BY tier, bucket, part LIMIT"] = manyGens(2) // as literals
	_, err = s.Report(ctx, store.Query{From: h(9, 45), To: h(12, 17), API: "front GET /dispatch"})
	must(err)
	_, err = s.Report(ctx, store.Query{})
	must(err)
	// The owned minutes found first narrow the second read.
	rec.answers["GROUP BY bucket, cityHash64"] = [][]any{{analysis.MinuteOf(h(10, 2)), "driver", "GET /driver"},
		{analysis.MinuteOf(h(10, 3)), "redis", "GetDriver"}}
	// Read whole, as the answers are made for (not in pieces of an hour
	// through the tier cache).
	_, err = s.readHotMinutes(ctx, analysis.MinuteOf(h(-2, 0)), analysis.MinuteOf(h(12, 17)), 5, 0.1)
	must(err)
	rec.answers["SELECT DISTINCT partition_id"] = [][]any{{base.Add(-24 * time.Hour).Format("20060102")}}
	must(s.Compact(ctx, h(12, 0)))
	_, err = s.HotMinutes(ctx, store.Query{From: h(9, 45), To: h(12, 17)}, 0, 0.1)
	must(err)
	_, _, err = s.LastMinute(ctx, store.Query{})
	must(err)
	_, err = s.Examples(ctx, store.Query{From: h(9, 45), To: h(12, 17)}, graph.Node{Service: "driver", Operation: "GET /driver"}, 3)
	must(err)
	_, _, err = s.State(ctx, w)
	if err != nil && !errorsIsNotFound(err) {
		t.Fatal(err)
	}
	must(s.PutSummaries(ctx, c.Windows.Summaries(analysis.Config{})))
	_, err = s.Summaries(ctx, w-1, w+1)
	must(err)
	_, err = s.StaleSummaries(ctx)
	must(err)
	_, err = s.Watermark(ctx)
	must(err)
	rec.answers["FROM trace_spans WHERE trace_id = "] = [][]any{{uint64(2), append([]byte{logMarker}, id[:]...)}}
	var enc graph.TraceEncoder
	rec.answers["FROM trace_spans WHERE trace_id IN"] = [][]any{{id, uint64(1), enc.AppendSpans(nil, c.Spans[0])}}
	must(s.SpansAfter(ctx, 0, func(uint64, []graph.Span) error { return nil }))
	_, err = s.TraceSpans(ctx, id, nil)
	must(err)
	old := base.Add(-48 * time.Hour).Format("20060102")
	rec.answers["FROM system.parts"] = [][]any{{"trace_spans", old}, {"states", old}, {"record_index", base.AddDate(0, -2, 0).Format("200601")}}
	must(s.DeleteBefore(ctx, h(10, 20)))
	must(s.Close())
	// The dry run and a reader's open.
	_, err = migrations(ctx, &Store{conn: rec, db: "default", core: &core{log: quiet}, part: newPart("", nil)})
	must(err)
	rec.answers["FROM system.tables"] = [][]any{{"MergeTree", "MergeTree ORDER BY version SETTINGS index_granularity = 8192"}}
	ms, err := schema.Load("clickhouse")
	must(err)
	var applied [][]any // the reader finds every migration applied
	for _, m := range ms {
		applied = append(applied, []any{uint32(m.Version)})
	}
	rec.answers["FROM schema_migrations"] = applied
	r, err := Open(ctx, Options{DSN: "clickhouse://127.0.0.1:9000/default", Existing: true, Logger: quiet,
		dial: func(*ch.Options) (driver.Conn, error) { return rec, nil }})
	must(err)
	r.Close()

	// Every rollup recomputed, every table written.
	all := strings.Join(rec.sql, "\n")
	for _, want := range []string{"INSERT INTO trace_spans", "FROM trace_spans WHERE trace_id IN", "DROP TABLE IF EXISTS writes_mv", "INSERT INTO records", "INSERT INTO states",
		"INSERT INTO summaries", "INSERT INTO dirty", "INSERT INTO meta", "INSERT INTO schema_migrations",
		"INSERT INTO rollup_gens", "FROM records FINAL", "DROP PARTITION ID", "record_index DROP PARTITION", "MODIFY TTL",
		"OPTIMIZE TABLE node_minutes PARTITION ID", "GROUP BY bucket, cityHash64", "FROM trace_buckets",
		"trace_id_bloom", "INSERT INTO record_moves", "FROM record_moves FINAL", "FROM states_by_part FINAL",
		"INSERT INTO changes", "FROM changes WHERE at >= ", "AND (tier, bucket, gen) NOT IN ((0, 0, 0), (0, 1, 0))"} {
		if !strings.Contains(all, want) {
			t.Errorf("no statement has %q", want)
		}
	}
	// Deltas by the two batches (the third recomputes an empty minute; the
	// partition's batch replaces a record with one of the same figures).
	n := 0
	for _, q := range rec.sql {
		if strings.HasPrefix(q, "INSERT INTO rollups (") && strings.Contains(q, ") VALUES") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("rollups written %d times, want 2", n)
	}
	if path := os.Getenv("STORMRADIUS_EMIT_SQL"); path != "" {
		b, err := json.MarshalIndent(rec.sql, "", "  ")
		must(err)
		must(os.WriteFile(path, b, 0o644))
		t.Logf("%d statements written to %s", len(rec.sql), path)
	}
}

func errorsIsNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), store.ErrNotFound.Error())
}

// recorder is a driver.Conn that records statements and answers queries
// with the rows of the first answers key found in their text (once each
// key, so that loops end).
type recorder struct {
	driver.Conn
	mu      sync.Mutex // the store runs independent statements at once
	sql     []string
	answers map[string][][]any
}

func (r *recorder) record(q string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sql = append(r.sql, q)
}

func (r *recorder) answer(q string) [][]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, rows := range r.answers {
		if strings.Contains(q, k) {
			if k != "SELECT version()" {
				delete(r.answers, k)
			}
			return rows
		}
	}
	return nil
}

func (r *recorder) Exec(_ context.Context, q string, _ ...any) error {
	r.record(q)
	return nil
}

func (r *recorder) Query(_ context.Context, q string, _ ...any) (driver.Rows, error) {
	r.record(q)
	return &cannedRows{rows: r.answer(q), i: -1}, nil
}

func (r *recorder) QueryRow(_ context.Context, q string, _ ...any) driver.Row {
	r.record(q)
	rows := &cannedRows{rows: r.answer(q), i: -1}
	rows.Next()
	return rows
}

func (r *recorder) PrepareBatch(_ context.Context, q string, _ ...driver.PrepareBatchOption) (driver.Batch, error) {
	return &recordedBatch{r: r, head: q}, nil
}

func (r *recorder) Close() error { return nil }

// cannedRows serves canned rows (driver.Rows and driver.Row).
type cannedRows struct {
	driver.Rows
	rows [][]any
	i    int
}

func (c *cannedRows) Next() bool   { c.i++; return c.i < len(c.rows) }
func (c *cannedRows) Close() error { return nil }
func (c *cannedRows) Err() error   { return nil }

// Scan sets dest from the current row; without one (an aggregate over
// nothing) it leaves dest at its zero values.
func (c *cannedRows) Scan(dest ...any) error {
	if c.i < 0 || c.i >= len(c.rows) {
		return nil
	}
	row := c.rows[c.i]
	for i, d := range dest {
		if i >= len(row) {
			break
		}
		dv := reflect.ValueOf(d).Elem()
		sv := reflect.ValueOf(row[i])
		switch {
		case sv.Type().AssignableTo(dv.Type()):
			dv.Set(sv)
		case sv.Type().ConvertibleTo(dv.Type()):
			dv.Set(sv.Convert(dv.Type()))
		default:
			return fmt.Errorf("canned %T into %T", row[i], d)
		}
	}
	return nil
}

func (c *cannedRows) ScanStruct(any) error { return nil }

// recordedBatch renders an insert as INSERT … VALUES.
type recordedBatch struct {
	driver.Batch
	r    *recorder
	head string
	cols []any
}

type recordedColumn struct {
	b *recordedBatch
	i int
}

func (c recordedColumn) Append(v any) error {
	for len(c.b.cols) <= c.i {
		c.b.cols = append(c.b.cols, nil)
	}
	c.b.cols[c.i] = v
	return nil
}

func (c recordedColumn) AppendRow(any) error { return fmt.Errorf("not recorded") }

func (b *recordedBatch) Column(i int) driver.BatchColumn { return recordedColumn{b, i} }
func (b *recordedBatch) Abort() error                    { return nil }

func (b *recordedBatch) Send() error {
	n := reflect.ValueOf(b.cols[0]).Len()
	var sb strings.Builder
	sb.WriteString(b.head)
	sb.WriteString(" VALUES")
	for row := 0; row < n; row++ {
		if row > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("\n(")
		for i, col := range b.cols {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(literal(reflect.ValueOf(col).Index(row)))
		}
		sb.WriteByte(')')
	}
	b.r.record(sb.String())
	return nil
}

// literal renders one appended value as SQL.
func literal(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Time:
		if x.Equal(x.Truncate(24 * time.Hour)) {
			return "'" + x.UTC().Format("2006-01-02") + "'"
		}
		return "'" + x.UTC().Format("2006-01-02 15:04:05") + "'"
	case []byte:
		var b strings.Builder
		b.WriteByte('\'')
		for _, c := range x {
			fmt.Fprintf(&b, `\x%02x`, c)
		}
		b.WriteByte('\'')
		return b.String()
	case string:
		return quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	switch v.Kind() {
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = literal(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return strconv.FormatUint(v.Uint(), 10)
	}
	panic(fmt.Sprintf("no literal for %s", v.Type()))
}

// TestEmitClusterSQL is TestEmitSQL on a cluster (of a current release):
// the migrations as rewritten for it and the statements that differ
// there (maintenance ON CLUSTER, parts of every shard, GLOBAL IN). With
// STORMRADIUS_EMIT_CLUSTER_SQL=file it writes them there as JSON, for
// scripts/chdb-check.sh to parse on a current ClickHouse engine (chdb
// has no cluster to run them on).
func TestEmitClusterSQL(t *testing.T) {
	rec := &recorder{answers: map[string][][]any{
		"SELECT version()":     {{"26.7.2.1"}},
		"FROM system.clusters": {{uint64(2)}},
	}}
	ctx := context.Background()
	base := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	c := storetest.NewCorpus(t, 6, base.Add(10*time.Hour+58*time.Minute), 30*time.Second)
	s, err := Open(ctx, Options{DSN: "clickhouse://127.0.0.1:9000/sr?ttl=168h&cluster=c1", Window: time.Hour, Logger: quiet,
		dial: func(*ch.Options) (driver.Conn, error) { return rec, nil }})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.WriteSpans(ctx, c.Spans[0])
	must(err)
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 2)})
	}
	must(s.Apply(ctx, store.Batch{Changes: changes}))
	h := func(hh, mm int) int64 {
		return base.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute).UnixNano()
	}
	before := base.Add(-24 * time.Hour).Format("20060102")
	// Too many generations to send as literals: the subqueries.
	rec.answers["GROUP BY tier, bucket, part LIMIT"] = manyGens(maxGensKept + 1)
	_, err = s.HotMinutes(ctx, store.Query{From: h(-26, 0), To: h(12, 17)}, 5, 0.1)
	must(err)
	rec.answers["SELECT DISTINCT partition_id"] = [][]any{{before}}
	must(s.Compact(ctx, h(12, 0)))
	rec.answers["GROUP BY tier, bucket, part LIMIT"] = manyGens(2) // as literals
	_, err = s.Report(ctx, store.Query{})
	must(err)
	old := base.Add(-48 * time.Hour).Format("20060102")
	rec.answers["FROM cluster('c1', system, parts)"] = [][]any{{"trace_spans_local", old}, {"trace_spans_local", old},
		{"records", old}, {"record_index_local", base.AddDate(0, -2, 0).Format("200601")}}
	must(s.DeleteBefore(ctx, h(10, 20)))
	must(s.Close())
	rec.answers["FROM system.clusters"] = [][]any{{uint64(2)}}
	_, err = migrations(ctx, &Store{conn: rec, db: "sr", core: &core{cluster: "c1", log: quiet}, part: newPart("", nil)})
	must(err)

	all := strings.Join(rec.sql, "\n")
	for _, want := range []string{
		"CREATE DATABASE IF NOT EXISTS sr ON CLUSTER 'c1'",
		"CREATE TABLE IF NOT EXISTS sr.schema_migrations_local ON CLUSTER 'c1'",
		"ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/sr/records', '{replica}', version)",
		"ENGINE = Distributed('c1', 'sr', 'records_local', cityHash64(trace_id))",
		"CREATE MATERIALIZED VIEW IF NOT EXISTS sr.record_index_mv ON CLUSTER 'c1' TO sr.record_index_local",
		"ALTER TABLE sr.records_local ON CLUSTER 'c1' DROP COLUMN",
		"ALTER TABLE sr.records_local ON CLUSTER 'c1' ADD INDEX IF NOT EXISTS trace_id_bloom",
		"ALTER TABLE sr.trace_spans_local ON CLUSTER 'c1' MODIFY TTL",
		"INSERT INTO trace_spans", "INSERT INTO records",
		"GLOBAL NOT IN (SELECT tier, bucket, base FROM rollup_gens_by_part", "GLOBAL IN (SELECT tier, bucket, argMax(gen, version)",
		"AND (tier, bucket, gen) NOT IN ((0, 0, 0), (0, 1, 0))) OR (tier, bucket, gen) IN ((0, 0, 7), (0, 1, 7))",
		"FROM cluster('c1', system, parts)",
		"OPTIMIZE TABLE sr.node_minutes_local ON CLUSTER 'c1' PARTITION ID '" + before + "' FINAL",
		"ALTER TABLE sr.trace_spans_local ON CLUSTER 'c1' DROP PARTITION ID '" + old + "'",
		"ALTER TABLE sr.record_index_local ON CLUSTER 'c1' DROP PARTITION ID",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no statement has %q", want)
		}
	}
	for _, q := range rec.sql {
		if strings.Contains(q, "DROP PARTITION") && (strings.Count(q, "DROP PARTITION ID '"+old+"'") > 0) != strings.Contains(q, "trace_spans_local") {
			t.Errorf("a partition dropped that no shard listed (records is no local table), or twice: %s", q)
		}
		if strings.Contains(q, " IN (SELECT tier, bucket") && !strings.Contains(q, "GLOBAL") {
			t.Errorf("a plain IN over another Distributed table: %s", q)
		}
	}
	if n := strings.Count(all, "DROP PARTITION ID '"+old+"'"); n != 1 {
		t.Errorf("trace_spans' partition %s dropped %d times, want once", old, n)
	}
	if path := os.Getenv("STORMRADIUS_EMIT_CLUSTER_SQL"); path != "" {
		b, err := json.MarshalIndent(rec.sql, "", "  ")
		must(err)
		must(os.WriteFile(path, b, 0o644))
		t.Logf("%d statements written to %s", len(rec.sql), path)
	}
}

// manyGens returns n rows of rollup generations as keepGens reads them.
func manyGens(n int) [][]any {
	out := make([][]any, n)
	for i := range out {
		out[i] = []any{uint8(0), int64(i), uint64(0), uint64(7)}
	}
	return out
}
