package oteltable

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/internal/chtest"
)

// The corpus: trace A, a server span (an error, a tracestate, an event,
// int, bool, double, slice and map attributes) and its client span (a
// link to trace B), of service checkout; trace B, one internal span of a
// resource without service.name whose end is before its start.
var (
	base    = time.Date(2026, 3, 14, 9, 26, 53, 998877665, time.UTC)
	traceA  = pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	traceB  = pcommon.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	server  = pcommon.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	client  = pcommon.SpanID{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8}
	tick    = pcommon.SpanID{0x5f, 0xb3, 0x97, 0xbe, 0x34, 0xd2, 0x6b, 0x51}
	linked  = pcommon.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
	lateID  = pcommon.SpanID{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	hexA    = "4bf92f3577b34da6a3ce929d0e0e4736"
	hexB    = "0af7651916cd43dd8448eb211c80319c"
	nanosOf = func(d int64) time.Time { return base.Add(time.Duration(d)) }
)

func ts(d int64) pcommon.Timestamp { return pcommon.NewTimestampFromTime(nanosOf(d)) }

func corpus() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	rs.Resource().Attributes().PutStr("service.version", "1.4.2")
	rs.Resource().Attributes().PutInt("host.cpu.count", 8)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("io.opentelemetry.http")
	ss.Scope().SetVersion("0.9.1")

	s := ss.Spans().AppendEmpty()
	s.SetTraceID(traceA)
	s.SetSpanID(server)
	s.TraceState().FromRaw("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	s.SetName("GET /cart")
	s.SetKind(ptrace.SpanKindServer)
	s.SetStartTimestamp(ts(0))
	s.SetEndTimestamp(ts(41_250_375))
	a := s.Attributes()
	a.PutStr("http.request.method", "GET")
	a.PutInt("http.response.status_code", 503)
	a.PutBool("retry.enabled", true)
	a.PutDouble("server.load", 0.25)
	a.PutEmptySlice("retry.delays_ms").FromRaw([]any{100, 250})
	a.PutEmptyMap("peer").PutStr("name", "<cart>")
	s.Status().SetCode(ptrace.StatusCodeError)
	s.Status().SetMessage("upstream unavailable")
	e := s.Events().AppendEmpty()
	e.SetName("exception")
	e.SetTimestamp(ts(40_000_000))
	e.Attributes().PutStr("exception.type", "io.EOF")
	e.Attributes().PutInt("retry.attempt", 2)

	c := ss.Spans().AppendEmpty()
	c.SetTraceID(traceA)
	c.SetSpanID(client)
	c.SetParentSpanID(server)
	c.SetName("GET cart-db")
	c.SetKind(ptrace.SpanKindClient)
	c.SetStartTimestamp(ts(2_000_100)) // the next second: 09:26:54.000877765
	c.SetEndTimestamp(ts(39_000_000))
	c.Attributes().PutInt("retry.attempt", 1)
	l := c.Links().AppendEmpty()
	l.SetTraceID(traceB)
	l.SetSpanID(linked)
	l.TraceState().FromRaw("congo=ucfJifl5GOE")
	l.Attributes().PutStr("link.kind", "retry-of")

	rs2 := td.ResourceSpans().AppendEmpty()
	rs2.Resource().Attributes().PutInt("process.pid", 4242)
	t2 := rs2.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	t2.SetTraceID(traceB)
	t2.SetSpanID(tick)
	t2.SetName("tick")
	t2.SetKind(ptrace.SpanKindInternal)
	t2.SetStartTimestamp(ts(5_000_000_000))
	t2.SetEndTimestamp(ts(5_000_000_000 - 1000))
	t2.Status().SetCode(ptrace.StatusCodeOk)
	return td
}

// late is a span of trace A inserted after the corpus, in a batch of its own.
func late() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(traceA)
	s.SetSpanID(lateID)
	s.SetParentSpanID(server)
	s.SetName("late retry")
	s.SetKind(ptrace.SpanKindClient)
	s.SetStartTimestamp(ts(10_000_000_000))
	s.SetEndTimestamp(ts(10_000_000_500))
	return td
}

// open connects to the current engine and returns a fresh database name
// (dropped when the test ends) that Create has not created yet.
func open(t *testing.T) (driver.Conn, string) {
	t.Helper()
	u := chtest.Current(t)
	fresh, err := url.Parse(chtest.FreshDatabase(t, u))
	if err != nil {
		t.Fatal(err)
	}
	d := *u
	d.Path = "/default"
	o, err := ch.ParseDSN(d.String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, strings.TrimPrefix(fresh.Path, "/")
}

func createAndFill(t *testing.T, shape Shape) (driver.Conn, string) {
	t.Helper()
	conn, db := open(t)
	ctx := context.Background()
	if err := Create(ctx, conn, db, "otel_traces", shape); err != nil {
		t.Fatal(err)
	}
	if err := Insert(ctx, conn, db, "otel_traces", shape, corpus()); err != nil {
		t.Fatal(err)
	}
	return conn, db
}

// TestCreate: each shape's DDL runs on the current engine (twice, as the
// exporter's IF NOT EXISTS allows) and leaves the tables and the column
// types that tell the shapes apart.
func TestCreate(t *testing.T) {
	want := map[Shape]map[string]string{
		V0165: {"Duration": "UInt64", "SpanAttributes": "Map(LowCardinality(String), String)",
			"ScopeName": "String", "Events.Attributes": "Array(Map(LowCardinality(String), String))",
			"Timestamp": "DateTime64(9)", "ts.Start": "DateTime"},
		V0165JSON: {"Duration": "UInt64", "SpanAttributes": "JSON", "ScopeName": "String",
			"Events.Attributes": "Array(JSON)", "SpanAttributesKeys": "Array(LowCardinality(String))",
			"Timestamp": "DateTime64(9)", "ts.Start": "DateTime"},
		V07x: {"Duration": "Int64", "SpanAttributes": "Map(LowCardinality(String), String)", "ScopeName": "",
			"Events.Attributes": "Array(Map(LowCardinality(String), String))",
			"Timestamp":         "DateTime64(9)", "ts.Start": "DateTime64(9)"},
	}
	for _, shape := range Shapes {
		t.Run(string(shape), func(t *testing.T) {
			conn, db := open(t)
			ctx := context.Background()
			for range 2 {
				if err := Create(ctx, conn, db, "spans", shape); err != nil {
					t.Fatal(err)
				}
			}
			tables := query[string](t, conn, "SELECT name || ' ' || engine FROM system.tables WHERE database = ? ORDER BY name", db)
			wantTables := []string{"spans MergeTree", "spans_trace_id_ts MergeTree", "spans_trace_id_ts_mv MaterializedView"}
			if !reflect.DeepEqual(tables, wantTables) {
				t.Errorf("tables %q, want %q", tables, wantTables)
			}
			for col, typ := range want[shape] {
				table := "spans"
				if name, ok := strings.CutPrefix(col, "ts."); ok {
					table, col = "spans_trace_id_ts", name
				}
				got := query[string](t, conn, "SELECT type FROM system.columns WHERE database = ? AND table = ? AND name = ?", db, table, col)
				if typ == "" && len(got) != 0 || typ != "" && !reflect.DeepEqual(got, []string{typ}) {
					t.Errorf("%s.%s: type %q, want %q", table, col, got, typ)
				}
			}
		})
	}
}

func query[T any](t *testing.T, conn driver.Conn, q string, args ...any) []T {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// row is what TestInsert reads back of a span; attributes only in the
// Map shapes.
type row struct {
	Start                             time.Time
	TraceID, SpanID, Parent, State    string
	Name, Kind, Service               string
	Resource, Attrs                   map[string]string
	ScopeName, ScopeVersion           string
	Duration, Code, Message           string
	EventTimes                        []time.Time
	EventNames                        []string
	EventAttrs                        []map[string]string
	LinkTraces, LinkSpans, LinkStates []string
	LinkAttrs                         []map[string]string
}

func readRows(t *testing.T, conn driver.Conn, db string, shape Shape) []row {
	t.Helper()
	scope, attrs := "ScopeName, ScopeVersion", "ResourceAttributes, SpanAttributes, Events.Attributes, Links.Attributes"
	switch shape {
	case V07x:
		scope = "'', ''"
	case V0165JSON:
		attrs = "map()::Map(String, String), map()::Map(String, String), []::Array(Map(String, String)), []::Array(Map(String, String))" // TestJSONAttributes reads them
	}
	rows, err := conn.Query(context.Background(), `SELECT Timestamp, TraceId, SpanId, ParentSpanId, TraceState,
		SpanName, SpanKind, ServiceName, `+scope+`, toString(Duration), StatusCode, StatusMessage,
		Events.Timestamp, Events.Name, Links.TraceId, Links.SpanId, Links.TraceState, `+attrs+`
		FROM "`+db+`".otel_traces ORDER BY SpanName`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.Start, &r.TraceID, &r.SpanID, &r.Parent, &r.State, &r.Name, &r.Kind, &r.Service,
			&r.ScopeName, &r.ScopeVersion, &r.Duration, &r.Code, &r.Message, &r.EventTimes, &r.EventNames,
			&r.LinkTraces, &r.LinkSpans, &r.LinkStates, &r.Resource, &r.Attrs, &r.EventAttrs, &r.LinkAttrs); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantRows is the corpus as each shape's exporter writes it, worked out by
// hand from the exporter's code (testdata/README.md).
func wantRows(shape Shape) []row {
	srv := row{Start: base, TraceID: hexA, SpanID: "00f067aa0ba902b7", State: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
		Name: "GET /cart", Kind: "Server", Service: "checkout",
		Resource:  map[string]string{"service.name": "checkout", "service.version": "1.4.2", "host.cpu.count": "8"},
		ScopeName: "io.opentelemetry.http", ScopeVersion: "0.9.1",
		Attrs: map[string]string{"http.request.method": "GET", "http.response.status_code": "503",
			"retry.enabled": "true", "server.load": "0.25", "retry.delays_ms": "[100,250]", "peer": `{"name":"<cart>"}`},
		Duration: "41250375", Code: "Error", Message: "upstream unavailable",
		EventTimes: []time.Time{time.Date(2026, 3, 14, 9, 26, 54, 38877665, time.UTC)}, EventNames: []string{"exception"},
		EventAttrs: []map[string]string{{"exception.type": "io.EOF", "retry.attempt": "2"}},
		LinkTraces: []string{}, LinkSpans: []string{}, LinkStates: []string{}, LinkAttrs: []map[string]string{}}
	cli := row{Start: time.Date(2026, 3, 14, 9, 26, 54, 877765, time.UTC), TraceID: hexA, SpanID: "53995c3f42cd8ad8",
		Parent: "00f067aa0ba902b7", Name: "GET cart-db", Kind: "Client", Service: "checkout", Resource: srv.Resource,
		ScopeName: "io.opentelemetry.http", ScopeVersion: "0.9.1", Attrs: map[string]string{"retry.attempt": "1"},
		Duration: "36999900", Code: "Unset", EventTimes: []time.Time{}, EventNames: []string{}, EventAttrs: []map[string]string{},
		LinkTraces: []string{hexB}, LinkSpans: []string{"b7ad6b7169203331"}, LinkStates: []string{"congo=ucfJifl5GOE"},
		LinkAttrs: []map[string]string{{"link.kind": "retry-of"}}}
	tck := row{Start: time.Date(2026, 3, 14, 9, 26, 58, 998877665, time.UTC), TraceID: hexB, SpanID: "5fb397be34d26b51",
		Name: "tick", Kind: "Internal", Resource: map[string]string{"process.pid": "4242"}, Attrs: map[string]string{},
		Duration: "18446744073709550616", Code: "Ok", // 2^64 - 1000: end - start as pcommon.Timestamp wraps
		EventTimes: []time.Time{}, EventNames: []string{}, EventAttrs: []map[string]string{},
		LinkTraces: []string{}, LinkSpans: []string{}, LinkStates: []string{}, LinkAttrs: []map[string]string{}}
	switch shape {
	case V0165JSON:
		for _, r := range []*row{&srv, &cli, &tck} {
			r.Resource, r.Attrs, r.EventAttrs, r.LinkAttrs = map[string]string{}, map[string]string{}, []map[string]string{}, []map[string]string{}
		}
	case V07x:
		srv.Kind, cli.Kind, tck.Kind = "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_INTERNAL"
		srv.Code, cli.Code, tck.Code = "STATUS_CODE_ERROR", "STATUS_CODE_UNSET", "STATUS_CODE_OK"
		tck.Duration = "-1000"
		for _, r := range []*row{&srv, &cli} {
			r.ScopeName, r.ScopeVersion = "", ""
			r.Attrs["otel.scope.name"], r.Attrs["otel.scope.version"] = "io.opentelemetry.http", "0.9.1"
		}
	}
	return []row{srv, cli, tck}
}

// TestInsert: the corpus, inserted in each shape, reads back as that
// shape's exporter writes it: SpanKind "Server" (or "SPAN_KIND_SERVER"),
// StatusCode "Error" (or "STATUS_CODE_ERROR"), Duration = end - start,
// attributes as strings ("503", "true", "0.25", "[100,250]"), the scope in
// columns (or in SpanAttributes), events and links in their arrays.
func TestInsert(t *testing.T) {
	for _, shape := range Shapes {
		t.Run(string(shape), func(t *testing.T) {
			conn, db := createAndFill(t, shape)
			got, want := readRows(t, conn, db, shape), wantRows(shape)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if !g.Start.Equal(w.Start) {
					t.Errorf("%s: Timestamp %v, want %v", w.Name, g.Start, w.Start)
				}
				if len(g.EventTimes) != len(w.EventTimes) || len(w.EventTimes) == 1 && !g.EventTimes[0].Equal(w.EventTimes[0]) {
					t.Errorf("%s: Events.Timestamp %v, want %v", w.Name, g.EventTimes, w.EventTimes)
				}
				g.Start, w.Start, g.EventTimes, w.EventTimes = time.Time{}, time.Time{}, nil, nil
				if !reflect.DeepEqual(g, w) {
					t.Errorf("%s:\n got %+v\nwant %+v", w.Name, g, w)
				}
			}
		})
	}
}

// TestTraceIDTable: the materialized view writes, per insert and trace,
// the least and the greatest span start (not end): in whole seconds in
// v0.165.1 (DateTime), to the nanosecond in v0.7x; a span inserted later
// adds a row of its own.
func TestTraceIDTable(t *testing.T) {
	sec := func(s int) time.Time { return time.Date(2026, 3, 14, 9, 26, s, 0, time.UTC) }
	want := map[Shape][][3]any{
		V0165: {{hexB, sec(58), sec(58)}, {hexA, sec(53), sec(54)}, {hexA, sec(63), sec(63)}},
		V07x: {{hexB, nanosOf(5e9), nanosOf(5e9)}, {hexA, base, nanosOf(2_000_100)},
			{hexA, nanosOf(10e9), nanosOf(10e9)}},
	}
	want[V0165JSON] = want[V0165]
	for _, shape := range Shapes {
		t.Run(string(shape), func(t *testing.T) {
			conn, db := createAndFill(t, shape)
			if err := Insert(context.Background(), conn, db, "otel_traces", shape, late()); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(context.Background(),
				`SELECT TraceId, Start, End FROM "`+db+`".otel_traces_trace_id_ts ORDER BY TraceId, Start`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got [][3]any
			for rows.Next() {
				var id string
				var start, end time.Time
				if err := rows.Scan(&id, &start, &end); err != nil {
					t.Fatal(err)
				}
				got = append(got, [3]any{id, start.UTC(), end.UTC()})
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want[shape]) {
				t.Errorf("trace id rows\n got %v\nwant %v", got, want[shape])
			}
		})
	}
}

// TestJSONAttributes: json: true keeps the attributes' types (JSON paths,
// a dotted key a path of its own) and lists the flattened keys, sorted.
func TestJSONAttributes(t *testing.T) {
	conn, db := createAndFill(t, V0165JSON)
	type attrs struct {
		Paths, ResPaths  map[string]string
		Status, Load     string
		Keys, ResKeys    []string
		Events, LinkJSON []string
	}
	rows, err := conn.Query(context.Background(), `SELECT JSONAllPathsWithTypes(SpanAttributes),
		JSONAllPathsWithTypes(ResourceAttributes), toString(SpanAttributes.http.response.status_code),
		toString(SpanAttributes.server.load), SpanAttributesKeys, ResourceAttributesKeys,
		arrayMap(a -> toJSONString(a), Events.Attributes), arrayMap(a -> toJSONString(a), Links.Attributes)
		FROM "`+db+`".otel_traces ORDER BY SpanName SETTINGS output_format_json_quote_64bit_integers = 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []attrs
	for rows.Next() {
		var a attrs
		if err := rows.Scan(&a.Paths, &a.ResPaths, &a.Status, &a.Load, &a.Keys, &a.ResKeys, &a.Events, &a.LinkJSON); err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	resPaths := map[string]string{"service.name": "String", "service.version": "String", "host.cpu.count": "Int64"}
	resKeys := []string{"host.cpu.count", "service.name", "service.version"}
	want := []attrs{{
		Paths: map[string]string{"http.request.method": "String", "http.response.status_code": "Int64",
			"retry.enabled": "Bool", "server.load": "Float64", "retry.delays_ms": "Array(Nullable(Int64))", "peer.name": "String"},
		ResPaths: resPaths, Status: "503", Load: "0.25",
		Keys:    []string{"http.request.method", "http.response.status_code", "peer.name", "retry.delays_ms", "retry.enabled", "server.load"},
		ResKeys: resKeys, Events: []string{`{"exception":{"type":"io.EOF"},"retry":{"attempt":2}}`}, LinkJSON: []string{},
	}, {
		Paths: map[string]string{"retry.attempt": "Int64"}, ResPaths: resPaths, Status: "", Load: "",
		Keys: []string{"retry.attempt"}, ResKeys: resKeys, Events: []string{}, LinkJSON: []string{`{"link":{"kind":"retry-of"}}`},
	}, {
		Paths: map[string]string{}, ResPaths: map[string]string{"process.pid": "Int64"}, Status: "", Load: "",
		Keys: []string{}, ResKeys: []string{"process.pid"}, Events: []string{}, LinkJSON: []string{},
	}}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("JSON attributes\n got %s\nwant %s", g, w)
	}
}

// TestRefuses: an unknown shape and names that are not plain identifiers
// are errors, before any statement is sent.
func TestRefuses(t *testing.T) {
	for _, c := range []struct {
		db, table string
		shape     Shape
		want      string
	}{
		{"otel", "otel_traces", "v0.1", `unknown shape "v0.1"`},
		{"otel", `x"; DROP TABLE y`, V0165, "not a plain identifier"},
		{"", "otel_traces", V07x, "not a plain identifier"},
	} {
		_, err := Statements(c.db, c.table, c.shape)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Statements(%q, %q, %q): %v, want an error with %q", c.db, c.table, c.shape, err, c.want)
		}
		if err := Insert(context.Background(), nil, c.db, c.table, c.shape, corpus()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Insert(%q, %q, %q): %v, want an error with %q", c.db, c.table, c.shape, err, c.want)
		}
	}
}
