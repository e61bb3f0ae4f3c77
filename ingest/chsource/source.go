// Package chsource reads the spans users already keep in ClickHouse: the
// table the OpenTelemetry Collector's clickhouseexporter writes
// (otel_traces), as a source of spans like the OTLP receivers, the Kafka
// consumer and trace files. It reads the table's real columns first and
// adapts to the exporter's shapes (a Duration of UInt64 or Int64, scope
// columns or none), refusing with one clear error what it cannot read;
// then it reads only the columns and attributes the analysis uses (never
// SELECT *), the time range pushed down to the table's partitions, and
// hands each row to ingest.Decoder.AppendRow, which applies the span
// conventions of docs/SPEC.md §2 as for OTLP (docs/ARCHITECTURE.md,
// "Sources").
package chsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/internal/chdsn"
	"github.com/stormradius/stormradius/internal/secret"
)

// DefaultTable is the exporter's default table name.
const DefaultTable = "otel_traces"

// PasswordEnv holds the source's ClickHouse password when its DSN has
// none (nor a password_file): never a flag.
const PasswordEnv = "STORMRADIUS_SOURCE_PASSWORD"

// ErrTable wraps every error that says the table cannot be read as
// spans: missing, not a traces table, a column missing or of a type the
// source cannot read.
var ErrTable = errors.New("not a table of spans the source can read")

// Source reads one table. Open it with Open; it is safe for one reader at
// a time.
type Source struct {
	conn      driver.Conn
	db, table string
	cols      map[string]string // name → type
	log       *slog.Logger
}

// Open connects to the DSN's server (clickhouse:// or http(s)://, with
// the store's TLS and password parameters, docs/operations.md
// "ClickHouse") and checks that the table (its table= parameter, default
// otel_traces, in the DSN's database, default "default") is one it can
// read. password, when not empty, is the password (a file or the
// environment's, as the store takes it).
func Open(ctx context.Context, dsn, password string, log *slog.Logger) (*Source, error) {
	d, err := chdsn.Parse(dsn, "table")
	if err != nil {
		return nil, fmt.Errorf("source: DSN: %w", err)
	}
	o := d.Options
	if password != "" && o.Auth.Password == "" {
		o.Auth.Password = password
	}
	s := &Source{db: o.Auth.Database, table: d.Own.Get("table"), log: log}
	if s.db == "" {
		s.db = "default"
	}
	if s.table == "" {
		s.table = DefaultTable
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	for _, n := range []string{s.db, s.table} {
		if !identifier.MatchString(n) {
			return nil, fmt.Errorf("source: %q: want letters, digits and underscores (a database or table name)", n)
		}
	}
	conn, err := ch.Open(o)
	if err != nil {
		return nil, fmt.Errorf("source: %s", secret.Scrub(err.Error(), dsn))
	}
	s.conn = conn
	if err := s.inspect(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Close closes the connection.
func (s *Source) Close() error { return s.conn.Close() }

// Name is the table's name as the source reads it: database.table.
func (s *Source) Name() string { return s.db + "." + s.table }

// required are the columns the source cannot do without, with the types it
// reads them as (a LowCardinality or Nullable wrapper is taken off first).
var required = []struct {
	name  string
	types []string
}{
	{"Timestamp", []string{"DateTime64"}},
	{"TraceId", []string{"String", "FixedString"}},
	{"SpanId", []string{"String", "FixedString"}},
	{"ParentSpanId", []string{"String", "FixedString"}},
	{"SpanName", []string{"String"}},
	{"SpanKind", []string{"String"}},
	{"ServiceName", []string{"String"}},
	{"Duration", []string{"UInt64", "Int64", "UInt32", "Int32"}},
	{"StatusCode", []string{"String"}},
}

// optional columns: read when present, with these types.
var optional = map[string][]string{
	"TraceState":         {"String"},
	"SpanAttributes":     {"Map"},
	"ResourceAttributes": {"Map"},
}

// baseType strips LowCardinality(…) and Nullable(…), and a type's
// arguments: LowCardinality(String) → String, DateTime64(9, 'UTC') →
// DateTime64, Map(LowCardinality(String), String) → Map.
func baseType(t string) string {
	for {
		switch {
		case strings.HasPrefix(t, "LowCardinality(") && strings.HasSuffix(t, ")"):
			t = t[len("LowCardinality(") : len(t)-1]
		case strings.HasPrefix(t, "Nullable(") && strings.HasSuffix(t, ")"):
			t = t[len("Nullable(") : len(t)-1]
		default:
			if i := strings.IndexByte(t, '('); i >= 0 {
				return t[:i]
			}
			return t
		}
	}
}

// inspect reads the table's columns and checks them.
func (s *Source) inspect(ctx context.Context) error {
	rows, err := s.conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", s.db, s.table)
	if err != nil {
		return fmt.Errorf("source: %s: reading its columns: %w", s.Name(), err)
	}
	defer rows.Close()
	s.cols = map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return fmt.Errorf("source: %s: reading its columns: %w", s.Name(), err)
		}
		s.cols[name] = typ
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("source: %s: reading its columns: %w", s.Name(), err)
	}
	return s.check()
}

// check says what keeps the table's columns from being read as spans.
func (s *Source) check() error {
	if len(s.cols) == 0 {
		return fmt.Errorf("source: %w: no table %s (or no right to read it: the source needs SELECT on it and on system.columns)", ErrTable, s.Name())
	}
	var missing, wrong []string
	for _, c := range required {
		t, ok := s.cols[c.name]
		switch {
		case !ok:
			missing = append(missing, c.name)
		case !slices.Contains(c.types, baseType(t)):
			wrong = append(wrong, fmt.Sprintf("%s is %s, want %s", c.name, t, strings.Join(c.types, " or ")))
		}
	}
	for name, types := range optional {
		if t, ok := s.cols[name]; ok && !slices.Contains(types, baseType(t)) {
			if baseType(t) == "JSON" || baseType(t) == "Object" {
				wrong = append(wrong, fmt.Sprintf("%s is %s: the exporter's json: true tables are not read yet (their attributes are JSON, not Map(String, String))", name, t))
				continue
			}
			wrong = append(wrong, fmt.Sprintf("%s is %s, want %s(String, String)", name, t, types[0]))
		}
	}
	switch {
	case len(missing) == len(required):
		return fmt.Errorf("source: %w: %s is not a table of spans: it has none of the exporter's span columns (%s)%s",
			ErrTable, s.Name(), columnNames(), s.looksLike())
	case len(missing) > 0:
		return fmt.Errorf("source: %w: %s has no column %s (the clickhouseexporter's traces table has them all)%s",
			ErrTable, s.Name(), strings.Join(missing, ", "), s.looksLike())
	case len(wrong) > 0:
		slices.Sort(wrong)
		return fmt.Errorf("source: %w: %s: %s", ErrTable, s.Name(), strings.Join(wrong, "; "))
	}
	return nil
}

func columnNames() string {
	var n []string
	for _, c := range required {
		n = append(n, c.name)
	}
	return strings.Join(n, ", ")
}

// looksLike names the exporter's other tables a table resembles.
func (s *Source) looksLike() string {
	_, body := s.cols["Body"]
	_, value := s.cols["Value"]
	_, metric := s.cols["MetricName"]
	switch {
	case body:
		return ": it looks like the exporter's logs table (it has Body)"
	case metric || value:
		return ": it looks like one of the exporter's metrics tables"
	}
	return ""
}

// Stats counts what Read read.
type Stats struct {
	Rows, Spans int64
	// Bad counts rows whose trace or span id is not hex of the right
	// length: skipped, the first few logged.
	Bad int64
}

// batchRows is how many rows Read hands on at a time.
const batchRows = 4096

// Read reads the spans whose Timestamp (their start) is in [from, to) and
// hands them to emit in batches, decoded by dec (docs/SPEC.md §2). The
// time range is pushed down to the table's partitions; only the columns
// and attributes dec reads are fetched.
func (s *Source) Read(ctx context.Context, from, to time.Time, dec *ingest.Decoder, emit func([]graph.Span) error) (Stats, error) {
	return s.read(ctx, from, to, 0, 1, dec, emit)
}

// read is Read of the traces of shard of shards (shards ≤ 1: every trace).
func (s *Source) read(ctx context.Context, from, to time.Time, shard, shards int, dec *ingest.Decoder,
	emit func([]graph.Span) error) (Stats, error) {
	var st Stats
	q, args := s.query(dec.RowAttributes(), from, to)
	if shards > 1 {
		q += " AND cityHash64(TraceId) % ? = ?"
		args = append(args, uint64(shards), uint64(shard))
	}
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return st, fmt.Errorf("source: %s: %w", s.Name(), err)
	}
	defer rows.Close()
	var (
		r                         ingest.Row
		traceID, spanID, parentID string
		kind, status              string
		start, duration           int64
		attrs, res                map[string]string
		batch                     []graph.Span
	)
	dest := []any{&traceID, &spanID, &parentID, &r.TraceState, &r.Name, &kind, &r.Service, &start, &duration, &status, &attrs, &res}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return st, fmt.Errorf("source: %s: %w", s.Name(), err)
		}
		st.Rows++
		if !parseID(r.TraceID[:], traceID) || !parseID(r.SpanID[:], spanID) || (parentID != "" && !parseID(r.ParentID[:], parentID)) {
			st.Bad++
			if st.Bad <= 5 {
				s.log.Warn("source: a row with a bad trace or span id is skipped", "table", s.Name(), "trace_id", traceID, "span_id", spanID, "parent_span_id", parentID)
			}
			continue
		}
		if parentID == "" {
			r.ParentID = graph.SpanID{}
		}
		r.Kind, r.StatusError = ingest.KindOfName(kind), ingest.StatusErrorOfName(status)
		r.Start, r.End = start, start+duration // an end before the start wraps UInt64 Duration: as OTLP had it
		r.AttrKeys, r.AttrValues = pairs(attrs, r.AttrKeys[:0], r.AttrValues[:0])
		r.ResKeys, r.ResValues = pairs(res, r.ResKeys[:0], r.ResValues[:0])
		batch = dec.AppendRow(batch, &r)
		st.Spans++
		if len(batch) == batchRows {
			if err := emit(batch); err != nil {
				return st, err
			}
			batch = batch[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("source: %s: %w", s.Name(), err)
	}
	if len(batch) > 0 {
		if err := emit(batch); err != nil {
			return st, err
		}
	}
	return st, nil
}

// pairs appends m's keys and values, sorted by key (AppendRow reads the
// first of a key's slot: the order must not depend on the map's).
func pairs(m map[string]string, keys, vals []string) ([]string, []string) {
	start := len(keys)
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys[start:])
	for _, k := range keys[start:] {
		vals = append(vals, m[k])
	}
	return keys, vals
}

// query is the SELECT of Read: the columns it reads, the attributes
// filtered on the server, the time range on Timestamp.
func (s *Source) query(ra ingest.RowAttributes, from, to time.Time) (string, []any) {
	col := func(name, expr, absent string) string {
		if _, ok := s.cols[name]; ok {
			return expr
		}
		return absent
	}
	spanFilter := "k IN (" + quoteAll(ra.Span) + ")"
	for _, p := range ra.SpanPrefixes {
		spanFilter += " OR startsWith(k, " + quote(p) + ")"
	}
	attrs := col("SpanAttributes", "CAST(mapFilter((k, v) -> "+spanFilter+", SpanAttributes), 'Map(String, String)')", "map()::Map(String, String)")
	res := col("ResourceAttributes", "CAST(mapFilter((k, v) -> k IN ("+quoteAll(ra.Resource)+"), ResourceAttributes), 'Map(String, String)')",
		"map()::Map(String, String)")
	q := "SELECT toString(TraceId), toString(SpanId), toString(ParentSpanId), " + col("TraceState", "toString(TraceState)", "''") +
		", toString(SpanName), toString(SpanKind), toString(ServiceName), toUnixTimestamp64Nano(Timestamp), toInt64(Duration), toString(StatusCode), " +
		attrs + ", " + res + " FROM " + s.db + "." + s.table +
		" WHERE Timestamp >= fromUnixTimestamp64Nano(toInt64(?)) AND Timestamp < fromUnixTimestamp64Nano(toInt64(?))"
	return q, []any{from.UnixNano(), to.UnixNano()}
}

// quote is a ClickHouse string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func quoteAll(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s)
	}
	return strings.Join(out, ", ")
}

// parseID decodes hex s into dst (len(s) == 2 len(dst)).
func parseID(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// count returns how many rows of shard of shards (shards ≤ 1: every
// trace) the table holds with a Timestamp in [from, to).
func (s *Source) count(ctx context.Context, from, to time.Time, shard, shards int) (int64, error) {
	q := "SELECT count() FROM " + s.db + "." + s.table +
		" WHERE Timestamp >= fromUnixTimestamp64Nano(toInt64(?)) AND Timestamp < fromUnixTimestamp64Nano(toInt64(?))"
	args := []any{from.UnixNano(), to.UnixNano()}
	if shards > 1 {
		q += " AND cityHash64(TraceId) % ? = ?"
		args = append(args, uint64(shards), uint64(shard))
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("source: %s: counting its rows: %w", s.Name(), err)
	}
	return int64(n), nil
}
