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
// "Sources"). Over ClickHouse's HTTP interface it decodes the answer in the
// Native format itself, a block at a time, allocating nothing per row
// (native.go); over the native protocol it scans clickhouse-go's rows.
package chsource

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	chcolumn "github.com/ClickHouse/clickhouse-go/v2/lib/column"
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
	// http, for a server reached over its HTTP interface, reads Read's
	// answer in the Native format a block at a time (readNative); over
	// the native protocol, Read scans clickhouse-go's rows (readRows).
	// rowsOnly makes Read scan rows over HTTP too (tests compare the two).
	http     *httpClient
	rowsOnly bool
	// jsonAttrs: the attribute columns are of the JSON type (the
	// exporter's json: true tables): read as JSON text and flattened here
	// (jsonattrs.go), through readRows.
	jsonAttrs bool
	// answer holds the columns of Read's answer, reused from block to
	// block and Read to Read.
	answer  []*column
	scratch []byte
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
	if o.Protocol == ch.HTTP {
		s.http = newHTTPClient(o)
	}
	if err := s.inspect(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Close closes the connection.
func (s *Source) Close() error {
	if s.http != nil {
		s.http.close()
	}
	return s.conn.Close()
}

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
	jsons := 0
	for name, types := range optional {
		if t, ok := s.cols[name]; ok && !slices.Contains(types, baseType(t)) {
			if strings.HasSuffix(name, "Attributes") && baseType(t) == "JSON" {
				jsons++
				continue
			}
			wrong = append(wrong, fmt.Sprintf("%s is %s, want %s(String, String)", name, t, types[0]))
		}
	}
	_, span := s.cols["SpanAttributes"]
	_, res := s.cols["ResourceAttributes"]
	switch {
	case jsons > 0 && jsons != btoi(span)+btoi(res):
		wrong = append(wrong, "SpanAttributes and ResourceAttributes are one of each: Map and JSON (the exporter writes both alike)")
	case jsons > 0:
		s.jsonAttrs = true
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
// and attributes dec reads are fetched, filtered on the server; the
// answer is streamed, a block at a time (memory is bounded by a block and
// a batch, not by the range). Rows come in the table's order: traces are
// not grouped (offline.Analyze and the pipeline group them).
func (s *Source) Read(ctx context.Context, from, to time.Time, dec *ingest.Decoder, emit func([]graph.Span) error) (Stats, error) {
	return s.read(ctx, from, to, 0, 1, dec, emit)
}

// read is Read of the traces of shard of shards (shards ≤ 1: every trace).
func (s *Source) read(ctx context.Context, from, to time.Time, shard, shards int, dec *ingest.Decoder,
	emit func([]graph.Span) error) (Stats, error) {
	ra := dec.RowAttributes()
	sk := sink{s: s, dec: dec, emit: emit, res: ra.Resource, filter: newAttrFilter(ra)}
	q := s.query(ra, from, to) + shardFilter(shard, shards)
	var err error
	if s.http != nil && !s.rowsOnly && !s.jsonAttrs {
		err = s.readNative(ctx, q, &sk)
	} else {
		err = s.readRows(ctx, q, &sk)
	}
	if err == nil && len(sk.batch) > 0 {
		err = emit(sk.batch)
	}
	return sk.st, err
}

// sink turns the rows Read reads into spans and hands them on in batches.
type sink struct {
	s     *Source
	dec   *ingest.Decoder
	emit  func([]graph.Span) error
	r     ingest.Row
	batch []graph.Span
	st    Stats
	// res are the resource attributes the query asked for, in order.
	res []string
	// filter keeps the span attributes the decoder reads (json: true
	// tables, whose attributes are filtered here).
	filter attrFilter
}

// add appends the span of the row in k.r, emitting a full batch.
func (k *sink) add() error {
	k.st.Spans++
	k.batch = k.dec.AppendRow(k.batch, &k.r)
	if len(k.batch) < batchRows {
		return nil
	}
	err := k.emit(k.batch)
	k.batch = k.batch[:0]
	return err
}

// bad counts a row whose ids are not hex of the right length, and logs
// the first few.
func (k *sink) bad(trace, span, parent string) {
	k.st.Bad++
	if k.st.Bad <= 5 {
		k.s.log.Warn("source: a row with a bad trace or span id is skipped", "table", k.s.Name(),
			"trace_id", trace, "span_id", span, "parent_span_id", parent)
	}
}

// The columns of Read's answer, in order (query): aliases that no
// exporter's column has.
const (
	cTrace = iota
	cSpan
	cParent
	cState
	cName
	cKind
	cService
	cStart
	cDuration
	cStatus
	cAttrs
	cRes
)

// answerColumns returns Read's columns (their names and kinds).
func answerColumns() []*column {
	return []*column{
		{name: "sr_trace", kind: kindText},
		{name: "sr_span", kind: kindText},
		{name: "sr_parent", kind: kindText},
		{name: "sr_state", kind: kindText},
		{name: "sr_name", kind: kindText},
		{name: "sr_kind", kind: kindText},
		{name: "sr_service", kind: kindText},
		{name: "sr_start", kind: kindInt64},
		{name: "sr_duration", kind: kindInt64},
		{name: "sr_status", kind: kindText},
		{name: "sr_attrs", kind: kindMap},
		{name: "sr_res", kind: kindArray},
	}
}

// query is the SELECT of Read: the columns of answerColumns; the ids as
// the table has them (checked and decoded here: a regular expression on
// the server costs it more); the span attributes dec reads filtered on the
// server (mapFilter), the resource's few as an array of one element per
// key of ra.Resource, "+" and the value or "" when absent (element access
// costs the server less than a mapFilter over a resource's many
// attributes); the time range on Timestamp (the table's partition key and
// its min-max index). The range's ends are integers formatted here, as
// clickhouse-go's ? binding would (the HTTP path sends the query as it
// is).
func (s *Source) query(ra ingest.RowAttributes, from, to time.Time) string {
	str := func(c string) string { return "toString(assumeNotNull(" + c + "))" }
	state := "''"
	if _, ok := s.cols["TraceState"]; ok {
		state = str("TraceState")
	}
	spanFilter := "k IN (" + quoteAll(ra.Span) + ")"
	for _, pre := range ra.SpanPrefixes {
		spanFilter += " OR startsWith(k, " + quote(pre) + ")"
	}
	attrs := "CAST(map(), 'Map(LowCardinality(String), String)')"
	if m := s.mapColumn("SpanAttributes"); m != "" {
		attrs = "mapFilter((k, v) -> " + spanFilter + ", " + m + ")"
	}
	res := make([]string, len(ra.Resource))
	for i, k := range ra.Resource {
		res[i] = "''"
		if m := s.mapColumn("ResourceAttributes"); m != "" {
			res[i] = "if(mapContains(" + m + ", " + quote(k) + "), concat('+', " + m + "[" + quote(k) + "]), '')"
		}
	}
	if s.jsonAttrs { // flattened here (jsonattrs.go)
		attrs, res = "toJSONString(SpanAttributes)", []string{"toJSONString(ResourceAttributes)"}
	}
	sel := []string{
		str("TraceId") + " AS sr_trace",
		str("SpanId") + " AS sr_span",
		str("ParentSpanId") + " AS sr_parent",
		state + " AS sr_state",
		str("SpanName") + " AS sr_name",
		str("SpanKind") + " AS sr_kind",
		str("ServiceName") + " AS sr_service",
		"assumeNotNull(toUnixTimestamp64Nano(Timestamp)) AS sr_start",
		"assumeNotNull(toInt64(Duration)) AS sr_duration",
		str("StatusCode") + " AS sr_status",
		attrs + " AS sr_attrs",
		"CAST([" + strings.Join(res, ", ") + "], 'Array(String)') AS sr_res",
	}
	return "SELECT " + strings.Join(sel, ", ") + " FROM " + s.db + "." + s.table +
		" WHERE Timestamp >= fromUnixTimestamp64Nano(toInt64(" + strconv.FormatInt(from.UnixNano(), 10) + "))" +
		" AND Timestamp < fromUnixTimestamp64Nano(toInt64(" + strconv.FormatInt(to.UnixNano(), 10) + "))"
}

// mapColumn is the expression of the attributes column name as a Map of
// String keys (LowCardinality or not) and String values, "" when the
// table has no such column.
func (s *Source) mapColumn(name string) string {
	t, ok := s.cols[name]
	switch {
	case !ok:
		return ""
	case t == "Map(LowCardinality(String), String)" || t == "Map(String, String)":
		return name
	}
	return "CAST(" + name + ", 'Map(String, String)')"
}

// readNative reads the answer to q over HTTP in the Native format, a block
// at a time, handing each row to k with its strings viewed in the block's
// buffers (AppendRow keeps none of them).
func (s *Source) readNative(ctx context.Context, q string, k *sink) error {
	body, err := s.http.post(ctx, q)
	if err != nil {
		return fmt.Errorf("source: %s: %s", s.Name(), err)
	}
	defer body.Close()
	if s.answer == nil {
		s.answer = answerColumns()
	}
	c := s.answer
	rd := newNativeReader(body)
	var kinds []graph.Kind
	var errs []bool
	for {
		n, err := rd.block(c, &s.scratch)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if text, ok := rd.exception(); ok {
				return fmt.Errorf("source: %s: the server failed while answering (after %d rows): %s", s.Name(), k.st.Rows, text)
			}
			return fmt.Errorf("source: %s: reading the answer (at byte %d, after %d rows): %w", s.Name(), rd.offset(), k.st.Rows, err)
		}
		kinds = kinds[:0]
		for i := range c[cKind].text.dict.len() {
			kinds = append(kinds, ingest.KindOfName(view(c[cKind].text.dict.at(i))))
		}
		errs = errs[:0]
		for i := range c[cStatus].text.dict.len() {
			errs = append(errs, ingest.StatusErrorOfName(view(c[cStatus].text.dict.at(i))))
		}
		for i := range n {
			if err := k.nativeRow(c, i, kinds, errs); err != nil {
				return err
			}
		}
	}
}

// nativeRow hands row i of the block in c to k.
func (k *sink) nativeRow(c []*column, i int, kinds []graph.Kind, errs []bool) error {
	k.st.Rows++
	r := &k.r
	trace, span, parent := c[cTrace].text.at(i), c[cSpan].text.at(i), c[cParent].text.at(i)
	if !parseID(r.TraceID[:], trace) || !parseID(r.SpanID[:], span) || !parseParent(r.ParentID[:], parent) {
		k.bad(string(trace), string(span), string(parent))
		return nil
	}
	r.TraceState = view(c[cState].text.at(i))
	r.Name = view(c[cName].text.at(i))
	r.Service = view(c[cService].text.at(i))
	r.Kind = kinds[c[cKind].text.idx[i]]
	r.StatusError = errs[c[cStatus].text.idx[i]]
	r.Start = c[cStart].int64(i)
	r.End = r.Start + c[cDuration].int64(i) // an end before the start wraps UInt64 Duration: as OTLP had it
	r.AttrKeys, r.AttrValues = c[cAttrs].appendPairs(i, r.AttrKeys[:0], r.AttrValues[:0])
	r.ResKeys, r.ResValues = r.ResKeys[:0], r.ResValues[:0]
	lo, hi := c[cRes].pairs(i)
	for j := lo; j < min(hi, lo+len(k.res)); j++ {
		if v := c[cRes].vals.at(j); len(v) > 0 {
			r.ResKeys, r.ResValues = append(r.ResKeys, k.res[j-lo]), append(r.ResValues, view(v[1:]))
		}
	}
	return k.add()
}

// parseID decodes the hex b into dst (len(b) == 2 len(dst)).
func parseID(dst, b []byte) bool {
	if len(b) != 2*len(dst) {
		return false
	}
	_, err := hex.Decode(dst, b)
	return err == nil
}

// parseParent decodes a parent span id: none ("") is the zero id.
func parseParent(dst, b []byte) bool {
	if len(b) == 0 {
		clear(dst)
		return true
	}
	return parseID(dst, b)
}

// appendPairs appends row i's keys and values (views) of the Map column c.
func (c *column) appendPairs(i int, keys, vals []string) ([]string, []string) {
	lo, hi := c.pairs(i)
	for j := lo; j < hi; j++ {
		keys = append(keys, view(c.keys.at(j)))
		vals = append(vals, view(c.vals.at(j)))
	}
	return keys, vals
}

// view is b as a string without a copy: valid while b is.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// readRows reads the answer to q through clickhouse-go's rows (the native
// protocol's path), scanning each row into k.
func (s *Source) readRows(ctx context.Context, q string, k *sink) error {
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("source: %s: %w", s.Name(), err)
	}
	defer rows.Close()
	var (
		trace, span, parent, kindName, status string
		duration                              int64
		attrs                                 pairs
		res                                   []string
		attrsJSON                             string
	)
	r := &k.r
	dest := []any{&trace, &span, &parent, &r.TraceState, &r.Name, &kindName, &r.Service, &r.Start, &duration, &status, &attrs, &res}
	if s.jsonAttrs {
		dest[10] = &attrsJSON
	}
	for rows.Next() {
		attrs.keys, attrs.vals = r.AttrKeys[:0], r.AttrValues[:0]
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("source: %s: %w", s.Name(), err)
		}
		k.st.Rows++
		if !parseID(r.TraceID[:], []byte(trace)) || !parseID(r.SpanID[:], []byte(span)) || !parseParent(r.ParentID[:], []byte(parent)) {
			k.bad(trace, span, parent)
			continue
		}
		r.Kind, r.StatusError = ingest.KindOfName(kindName), ingest.StatusErrorOfName(status)
		r.End = r.Start + duration
		r.AttrKeys, r.AttrValues = attrs.keys, attrs.vals
		r.ResKeys, r.ResValues = r.ResKeys[:0], r.ResValues[:0]
		if s.jsonAttrs {
			if err := k.jsonAttrs(attrsJSON, res); err != nil {
				return fmt.Errorf("source: %s: span %s of trace %s: %w", s.Name(), span, trace, err)
			}
		} else {
			for j, v := range res[:min(len(res), len(k.res))] {
				if v != "" {
					r.ResKeys, r.ResValues = append(r.ResKeys, k.res[j]), append(r.ResValues, v[1:])
				}
			}
		}
		if err := k.add(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("source: %s: %w", s.Name(), err)
	}
	return nil
}

// pairs receives a Map column's row from clickhouse-go in its order
// (column.IterableOrderedMap), without a Go map.
type pairs struct{ keys, vals []string }

func (p *pairs) Put(k, v any) {
	ks, _ := k.(string)
	vs, _ := v.(string)
	p.keys, p.vals = append(p.keys, ks), append(p.vals, vs)
}

func (p *pairs) Iterator() chcolumn.MapIterator { return &pairsIter{p: p, i: -1} }

type pairsIter struct {
	p *pairs
	i int
}

func (it *pairsIter) Next() bool {
	it.i++
	return it.i < len(it.p.keys)
}

func (it *pairsIter) Key() any   { return it.p.keys[it.i] }
func (it *pairsIter) Value() any { return it.p.vals[it.i] }

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

// shardFilter is the condition that keeps shard of shards ("" for every
// trace).
func shardFilter(shard, shards int) string {
	if shards <= 1 {
		return ""
	}
	return " AND cityHash64(TraceId) % " + strconv.Itoa(shards) + " = " + strconv.Itoa(shard)
}

// count returns how many rows of shard of shards (shards ≤ 1: every
// trace) the table holds with a Timestamp in [from, to).
func (s *Source) count(ctx context.Context, from, to time.Time, shard, shards int) (int64, error) {
	q := "SELECT count() FROM " + s.db + "." + s.table +
		" WHERE Timestamp >= fromUnixTimestamp64Nano(toInt64(" + strconv.FormatInt(from.UnixNano(), 10) + "))" +
		" AND Timestamp < fromUnixTimestamp64Nano(toInt64(" + strconv.FormatInt(to.UnixNano(), 10) + "))" + shardFilter(shard, shards)
	var n uint64
	if err := s.conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("source: %s: counting its rows: %w", s.Name(), err)
	}
	return int64(n), nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// jsonAttrs sets k's row's attributes from a json: true table's JSON
// text: the span's (attrs) and the resource's (res, one element).
func (k *sink) jsonAttrs(attrs string, res []string) error {
	r := &k.r
	var err error
	if r.AttrKeys, r.AttrValues, err = flattenJSON(attrs, k.filter.keep, r.AttrKeys[:0], r.AttrValues[:0]); err != nil {
		return err
	}
	if len(res) == 0 {
		return nil
	}
	r.ResKeys, r.ResValues, err = flattenJSON(res[0], func(key string) bool { return slices.Contains(k.res, key) }, r.ResKeys, r.ResValues)
	return err
}
