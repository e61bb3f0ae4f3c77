package chsource_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/ingest/chsource/oteltable"
	"github.com/stormradius/stormradius/internal/certs/certstest"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/sim"
)

// server connects to the current engine (chtest.Current) and returns a
// fresh database (dropped when the test ends) and its DSN.
func server(t *testing.T) (driver.Conn, string, string) {
	t.Helper()
	u := chtest.Current(t)
	dsn := chtest.FreshDatabase(t, u)
	fresh, err := url.Parse(dsn)
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
	return conn, strings.TrimPrefix(fresh.Path, "/"), dsn
}

// exports simulates an incident (HTTP and gRPC, claims, retries, a
// persistent fault, fail-open) as an SDK mesh exports it.
func exports(t *testing.T) []ptrace.Traces {
	t.Helper()
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	sc := sim.Mesh(sim.MeshConfig{Seed: 5, APIs: 3, Depth: 6, Fanout: 2, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.01, Policy: own})
	sc.Faults = []sim.Fault{{Service: "svc-3-0", Rate: 0.3, Persistent: true}}
	sc.Traces, sc.Start, sc.Spacing = 400, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 1500*time.Millisecond
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	return res.Exports(3, 16, 8)
}

// analyzed is the document offline.Analyze makes of what read emits.
func analyzed(t *testing.T, read func(emit func([]graph.Span) error) error) string {
	t.Helper()
	doc, _, _, err := offline.Analyze(context.Background(), read, offline.Config{Analysis: analysis.Config{Window: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The acceptance of the source: the simulated incident written into the
// exporter's table — v0.165.1's shape and an older one (Int64 Duration,
// no scope columns), rows as each exporter writes them — read back by the
// source gives the report analyze gives of the same spans as OTLP, field
// by field, its json: true table (attributes of the JSON type) too.
func TestSourceEqualsOTLP(t *testing.T) {
	tds := exports(t)
	want := analyzed(t, func(emit func([]graph.Span) error) error {
		dec := ingest.NewDecoder(ingest.DecoderConfig{})
		for _, td := range tds {
			if err := emit(dec.AppendTraces(nil, td)); err != nil {
				return err
			}
		}
		return nil
	})
	if !strings.Contains(want, `"failed_traces":`) || strings.Contains(want, `"traces":0,`) {
		t.Fatalf("the reference analysed nothing: %.300s", want)
	}
	ctx := context.Background()
	for _, shape := range oteltable.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			conn, db, dsn := server(t)
			if err := oteltable.Create(ctx, conn, db, "otel_traces", shape); err != nil {
				t.Fatal(err)
			}
			for _, td := range tds {
				if err := oteltable.Insert(ctx, conn, db, "otel_traces", shape, td); err != nil {
					t.Fatal(err)
				}
			}
			src, err := chsource.Open(ctx, dsn, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			spans := 0
			for _, td := range tds {
				spans += td.SpanCount()
			}
			for _, path := range readPaths(t, dsn) {
				var st chsource.Stats
				got := analyzed(t, func(emit func([]graph.Span) error) error {
					st, err = path.src.Read(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC),
						ingest.NewDecoder(ingest.DecoderConfig{}), emit)
					return err
				})
				if got != want {
					t.Fatalf("%s: the source's report differs from analyze of the OTLP:\n got %s\nwant %s", path.name, got, want)
				}
				if st.Rows != int64(spans) || st.Spans != int64(spans) || st.Bad != 0 {
					t.Errorf("%s: read %+v, want %d rows and spans", path.name, st, spans)
				}
			}
		})
	}
}

// readPath is a way of reading the table.
type readPath struct {
	name string
	src  *chsource.Source
}

// readPaths opens the table of dsn (an HTTP one) the two ways Read
// reads: its answer in the Native format, and through clickhouse-go's
// rows (the native protocol's path).
func readPaths(t *testing.T, dsn string) []readPath {
	t.Helper()
	var out []readPath
	for _, name := range []string{"native", "rows"} {
		src, err := chsource.Open(context.Background(), dsn, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		if name == "rows" {
			chsource.ScanRows(src)
		}
		out = append(out, readPath{name, src})
	}
	return out
}

// Tables the source cannot read are refused at Open with one error that
// names what is wrong; a range without spans reads nothing.
func TestBadTables(t *testing.T) {
	conn, db, dsn := server(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		t.Fatal(err)
	}
	spanCols := "Timestamp DateTime64(9), TraceId String, SpanId String, ParentSpanId String, SpanName LowCardinality(String), " +
		"SpanKind LowCardinality(String), ServiceName LowCardinality(String), Duration UInt64, StatusCode LowCardinality(String)"
	for _, c := range []struct{ table, cols, want string }{
		{"absent", "", "no table " + db + ".absent"},
		{"otel_logs", "Timestamp DateTime64(9), TraceId String, SpanId String, Body String, ServiceName String",
			"has no column ParentSpanId, SpanName, SpanKind, Duration, StatusCode (the clickhouseexporter's traces table has them all): it looks like the exporter's logs table"},
		{"no_kind", strings.Replace(spanCols, "SpanKind LowCardinality(String), ", "", 1), "has no column SpanKind"},
		{"string_duration", strings.Replace(spanCols, "Duration UInt64", "Duration String", 1), "Duration is String, want UInt64 or Int64"},
		{"second_timestamps", strings.Replace(spanCols, "Timestamp DateTime64(9)", "Timestamp DateTime", 1), "Timestamp is DateTime, want DateTime64"},
		{"array_attributes", spanCols + ", SpanAttributes Array(String)", "SpanAttributes is Array(String), want Map(String, String)"},
		{"numbers", "n UInt64", "is not a table of spans: it has none of the exporter's span columns"},
	} {
		if c.cols != "" {
			if err := conn.Exec(ctx, "CREATE TABLE "+db+"."+c.table+" ("+c.cols+") ENGINE = MergeTree ORDER BY tuple()"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := chsource.Open(ctx, dsn+"?table="+c.table, "", nil)
		if !errors.Is(err, chsource.ErrTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant ErrTable with %q", c.table, err, c.want)
		}
	}
	if _, err := chsource.Open(ctx, dsn+"?table=bad-name", "", nil); err == nil || !strings.Contains(err.Error(), "letters, digits and underscores") {
		t.Errorf("a bad table name: %v", err)
	}

	// An empty range reads nothing, and says so through Stats.
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	src, err := chsource.Open(ctx, dsn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st, err := src.Read(ctx, time.Unix(0, 0), time.Now(), ingest.NewDecoder(ingest.DecoderConfig{}), func([]graph.Span) error {
		t.Error("emitted spans of an empty table")
		return nil
	})
	if err != nil || st != (chsource.Stats{}) {
		t.Errorf("an empty table: %+v %v", st, err)
	}
}

// Rows with ids that are not hex of the right length are skipped and
// counted, the others read, with their resources' version and adjusted
// count (absent, present but not a count, a count), on a table of other
// column types than the exporter's (plain String for its LowCardinality
// ones, Map(String, String), Nullable columns, no TraceState), both ways.
func TestReadRows(t *testing.T) {
	conn, db, dsn := server(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "CREATE TABLE "+db+".otel_traces (Timestamp DateTime64(9), TraceId String, SpanId Nullable(String), "+
		"ParentSpanId String, SpanName Nullable(String), SpanKind String, ServiceName String, Duration Nullable(Int64), StatusCode String, "+
		"SpanAttributes Map(String, String), ResourceAttributes Map(String, String)) ENGINE = MergeTree ORDER BY Timestamp"); err != nil {
		t.Fatal(err)
	}
	const (
		trace  = "0123456789abcdef0123456789abcdef"
		span   = "00000000000000a1"
		parent = "00000000000000A2" // upper case is hex too
	)
	// The resource's adjusted count: absent, present but not a count
	// (the span's sampling invalid), a count (recorded).
	rows := [][]string{
		{trace, span, "", "'GET /x'", "'Server'", "'Error'", "map('http.request.method', 'GET', 'http.route', '/x', 'other', 'y')",
			"map('host.name', 'h', 'service.version', '1.2')"},
		{trace, parent[:15] + "3", parent, "'q'", "'SPAN_KIND_CLIENT'", "'Ok'", "map('server.address', 'db')", "map('sampling.adjusted_count', '')"},
		{trace[:30], span, "", "'bad'", "'Server'", "''", "map()", "map()"},                         // a short trace id
		{trace, "00000000000000g1", "", "'bad'", "'Server'", "''", "map()", "map()"},                // not hex
		{trace + "00", span, "", "'bad'", "'Server'", "''", "map()", "map()"},                       // too long
		{trace, span, "00000001", "'bad'", "'Server'", "''", "map()", "map()"},                      // a short parent
		{trace, span, "", "NULL", "'Server'", "''", "map()", "map('sampling.adjusted_count', '4')"}, // a null name reads as ""
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i, r := range rows {
		q := fmt.Sprintf("INSERT INTO %s.otel_traces VALUES (fromUnixTimestamp64Nano(toInt64(%d)), '%s', '%s', '%s', %s, %s, 'svc', %d, %s, %s, %s)",
			db, at.Add(time.Duration(i)*time.Second).UnixNano(), r[0], r[1], r[2], r[3], r[4], 1000+i, r[5], r[6], r[7])
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range readPaths(t, dsn) {
		var got []graph.Span
		st, err := path.src.Read(ctx, at, at.Add(time.Hour), ingest.NewDecoder(ingest.DecoderConfig{}), func(s []graph.Span) error {
			got = append(got, s...)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", path.name, err)
		}
		if st != (chsource.Stats{Rows: 7, Spans: 3, Bad: 4}) || len(got) != 3 {
			t.Fatalf("%s: %+v, %d spans; want 7 rows, 3 spans, 4 bad", path.name, st, len(got))
		}
		slices.SortFunc(got, func(a, b graph.Span) int { return cmp.Compare(a.Start, b.Start) }) // the parts' order is the server's
		tid := graph.TraceID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
		s0, s1, s2 := got[0], got[1], got[2]
		if s0.TraceID != tid || s0.SpanID != (graph.SpanID{7: 0xa1}) || s0.ParentID != (graph.SpanID{}) || s0.Kind != graph.KindServer ||
			s0.Name != "GET /x" || s0.Operation != "GET /x" || s0.Service != "svc" || s0.Version != "1.2" || !s0.Failed ||
			s0.Start != at.UnixNano() || s0.End != at.UnixNano()+1000 || s0.Sampling != graph.SamplingNone {
			t.Errorf("%s: the first span: %+v", path.name, s0)
		}
		if s1.TraceID != tid || s1.SpanID != (graph.SpanID{7: 0xa3}) || s1.ParentID != (graph.SpanID{7: 0xa2}) || s1.Kind != graph.KindClient ||
			s1.Name != "q" || s1.Peer != "db" || s1.Failed || s1.End != at.Add(time.Second).UnixNano()+1001 || s1.Version != "" ||
			s1.Sampling != graph.SamplingInvalid {
			t.Errorf("%s: the second span: %+v", path.name, s1)
		}
		if s2.Name != "" || s2.Start != at.Add(6*time.Second).UnixNano() || s2.Sampling != graph.SamplingRecorded || s2.AdjustedCount != 4 {
			t.Errorf("%s: the third span: %+v", path.name, s2)
		}
	}
}

// A query the server fails while answering (its result limit, after some
// blocks were sent) fails Read with the server's message, both ways.
func TestReadServerFails(t *testing.T) {
	conn, db, dsn := server(t)
	ctx := context.Background()
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, td := range exports(t) {
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, td); err != nil {
			t.Fatal(err)
		}
		n += td.SpanCount()
	}
	if n < 2000 {
		t.Fatalf("only %d spans", n)
	}
	for _, path := range readPaths(t, dsn+"?max_result_rows=1000&result_overflow_mode=throw&max_block_size=100") {
		spans := 0
		_, err := path.src.Read(ctx, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC),
			ingest.NewDecoder(ingest.DecoderConfig{}), func(s []graph.Span) error {
				spans += len(s)
				return nil
			})
		if err == nil || !strings.Contains(err.Error(), "TOO_MANY_ROWS_OR_BYTES") || !strings.Contains(err.Error(), "Limit for result exceeded") {
			t.Errorf("%s: %v (after %d spans); want the server's TOO_MANY_ROWS_OR_BYTES", path.name, err, spans)
		}
	}
}

// Over HTTPS with a user and a password, and over HTTP with them, Read's
// own queries carry them as clickhouse-go's do (X-ClickHouse-User and -Key
// over TLS, Basic authentication without), the server's certificate
// checked against the DSN's tls_ca; the spans read through a proxy are
// those read directly.
func TestReadTLSAndUser(t *testing.T) {
	conn, db, dsn := server(t)
	ctx := context.Background()
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	for _, td := range exports(t)[:10] {
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, td); err != nil {
			t.Fatal(err)
		}
	}
	from, to := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	read := func(src *chsource.Source) string {
		return analyzed(t, func(emit func([]graph.Span) error) error {
			_, err := src.Read(ctx, from, to, ingest.NewDecoder(ingest.DecoderConfig{}), emit)
			return err
		})
	}
	want := read(readPaths(t, dsn)[0].src)
	target, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = "/"
	ca := certstest.NewCA(t)
	for _, tlsOn := range []bool{true, false} {
		var mu sync.Mutex
		var seen []string // each request's credentials, and whether it asked for Native at revision 0
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, pass, _ := r.BasicAuth()
			if tlsOn {
				user, pass = r.Header.Get("X-ClickHouse-User"), r.Header.Get("X-ClickHouse-Key")
			}
			q := r.URL.Query()
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s:%s native=%t", user, pass, q.Get("default_format") == "Native" && !q.Has("client_protocol_version")))
			mu.Unlock()
			proxy.ServeHTTP(w, r)
		}))
		u := url.URL{Scheme: "http", User: url.UserPassword("reader", "S3cret"), Path: "/" + db}
		if tlsOn {
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "chproxy").TLS}}
			srv.StartTLS()
			u.Scheme, u.RawQuery = "https", "tls_ca="+url.QueryEscape(ca.File)
		} else {
			srv.Start()
		}
		u.Host = strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://")
		for _, path := range readPaths(t, u.String()) {
			if got := read(path.src); got != want {
				t.Errorf("TLS %t, %s: read through the proxy:\n got %.300s\nwant %.300s", tlsOn, path.name, got, want)
			}
		}
		srv.Close()
		native := 0
		for _, s := range seen {
			if !strings.HasPrefix(s, "reader:S3cret ") {
				t.Errorf("TLS %t: a request with %q", tlsOn, s)
			}
			if strings.HasSuffix(s, "native=true") {
				native++
			}
		}
		if native != 1 {
			t.Errorf("TLS %t: %d of the %d requests were Read's Native query, want 1", tlsOn, native, len(seen))
		}
	}
	// A server whose certificate the DSN's CA did not sign is refused.
	other := certstest.NewCA(t)
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{other.Issue(t, "chproxy").TLS}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake it fails
	srv.StartTLS()
	defer srv.Close()
	if _, err := chsource.Open(ctx, strings.Replace(srv.URL, "https://", "https://reader:S3cret@", 1)+"/"+db+"?tls_ca="+url.QueryEscape(ca.File), "", nil); err == nil ||
		strings.Contains(err.Error(), "S3cret") {
		t.Errorf("a server of another CA: %v", err)
	}
}
