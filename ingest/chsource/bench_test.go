package chsource

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/ingest/chsource/oteltable"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/sim"
)

// The benchmarks' table: the exporter's (v0.165.1) otel_traces in a
// database of its own on the current engine (chtest.Current), filled once
// per run and dropped by TestMain. A simulated incident (the analysis
// corpus's deep mesh, docs/PERFORMANCE.md) is written as the exporter
// writes it into a staging table, then copied benchCopies times with new
// trace ids, each copy benchShift later than the one before; the copies'
// rows also carry the resource and span attributes a real SDK adds
// (telemetry.sdk.*, host, process, k8s; network and user agent), which the
// source must leave on the server. Two more copies, a day before and a day
// after, lie outside the range read (other partitions).
type benchTable struct {
	u               *url.URL
	db, dsn         string
	from, to        time.Time
	spans, allSpans int64
}

const (
	benchTraces = 1000
	benchCopies = 7
	benchShift  = 250 * time.Second
)

var (
	benchStart = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	benchOnce  sync.Once
	benchTbl   *benchTable
	benchErr   error
)

// benchDBEnv names a database to keep the table in between runs: filled
// when it has no otel_traces, kept at the end (for profiling runs).
const benchDBEnv = "STORMRADIUS_BENCH_SOURCE_DB"

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTbl != nil && os.Getenv(benchDBEnv) == "" {
		if err := chtest.Drop(benchTbl.u, benchTbl.db); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// table returns the benchmarks' table, filled on first use.
func table(b *testing.B) *benchTable {
	b.Helper()
	u := chtest.Current(b)
	benchOnce.Do(func() {
		t0 := time.Now()
		benchTbl, benchErr = openBenchTable(u)
		if benchErr == nil {
			b.Logf("table %s.otel_traces: %d spans in the range, %d in all, ready in %v", benchTbl.db, benchTbl.spans,
				benchTbl.allSpans, time.Since(t0).Round(time.Millisecond))
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchTbl
}

// openBenchTable makes and fills the table (benchTable) in a new
// database, or in the one benchDBEnv names unless it has it already.
func openBenchTable(u *url.URL) (*benchTable, error) {
	name, dsn := chtest.NewDatabase(u)
	if n := os.Getenv(benchDBEnv); n != "" {
		d := *u
		d.Path = "/" + n
		name, dsn = n, d.String()
	}
	t := &benchTable{u: u, db: name, dsn: dsn, from: benchStart, to: benchStart.Add(benchCopies * benchShift)}
	benchTbl = t // dropped by TestMain from now on
	ctx := context.Background()
	conn, err := openConn(u)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var exists uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'otel_traces'", name).Scan(&exists); err != nil {
		return nil, err
	}
	if exists == 0 {
		if err := fill(ctx, conn, name); err != nil {
			return nil, err
		}
	}
	for _, c := range []struct {
		n     *int64
		where string
	}{{&t.allSpans, ""}, {&t.spans, fmt.Sprintf(" WHERE Timestamp >= fromUnixTimestamp64Nano(%d) AND Timestamp < fromUnixTimestamp64Nano(%d)",
		t.from.UnixNano(), t.to.UnixNano())}} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+name+".otel_traces"+c.where).Scan(&n); err != nil {
			return nil, err
		}
		*c.n = int64(n)
	}
	if t.spans < 900_000 || t.allSpans < t.spans*(benchCopies+1)/benchCopies {
		return nil, fmt.Errorf("bench table: %d spans in the range, %d in all: want about a million, and %d copies in the range of %d",
			t.spans, t.allSpans, benchCopies, benchCopies+2)
	}
	return t, nil
}

// fill creates database db and its otel_traces, and fills it.
func fill(ctx context.Context, conn driver.Conn, db string) error {
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		return err
	}
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		return err
	}
	if err := conn.Exec(ctx, "CREATE TABLE "+db+".base AS "+db+".otel_traces"); err != nil {
		return err
	}
	sc := sim.Mesh(sim.MeshConfig{Seed: 7, APIs: 4, Depth: 25, Fanout: 3, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.002,
		Policy: sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}})
	sc.Faults = []sim.Fault{{Service: "svc-20-1", Rate: 0.2, Persistent: true}, {Service: "svc-12-2", Rate: 0.1, Persistent: true},
		{Service: "svc-6-0", Rate: 0.05, Persistent: true}}
	sc.Traces, sc.Start, sc.Spacing = benchTraces, benchStart, benchShift/benchTraces
	res, err := sim.Run(sc)
	if err != nil {
		return err
	}
	for _, td := range res.Exports(1, 400, 8) {
		if err := oteltable.Insert(ctx, conn, db, "base", oteltable.V0165, td); err != nil {
			return err
		}
	}
	if err := conn.Exec(ctx, copyQuery(db)); err != nil {
		return err
	}
	return conn.Exec(ctx, "DROP TABLE "+db+".base")
}

// copyQuery copies the staging table into otel_traces: benchCopies copies
// in the range, one a day before and one a day after, each with new trace
// ids and an SDK's usual attributes added.
func copyQuery(db string) string {
	shifts := make([]string, 0, benchCopies+2)
	for i := range benchCopies {
		shifts = append(shifts, fmt.Sprint(int64(i)*int64(benchShift)))
	}
	shifts = append(shifts, fmt.Sprint(-int64(24*time.Hour)), fmt.Sprint(int64(24*time.Hour)))
	return `INSERT INTO ` + db + `.otel_traces
SELECT fromUnixTimestamp64Nano(toUnixTimestamp64Nano(Timestamp) + shift) AS Timestamp,
	lower(hex(MD5(concat(TraceId, toString(shift))))) AS TraceId,
	SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName,
	mapUpdate(ResourceAttributes, map('telemetry.sdk.name', 'opentelemetry', 'telemetry.sdk.language', 'go',
		'telemetry.sdk.version', '1.38.0', 'host.name', concat('node-', ServiceName), 'process.pid', '4242',
		'process.runtime.name', 'go', 'service.instance.id', concat(ServiceName, '-7d9f8c-x2x9q'),
		'k8s.namespace.name', 'prod', 'k8s.pod.name', concat(ServiceName, '-7d9f8c-x2x9q'),
		'k8s.deployment.name', ServiceName)) AS ResourceAttributes,
	ScopeName, ScopeVersion,
	mapUpdate(SpanAttributes, map('network.protocol.version', '1.1', 'network.peer.address', '10.12.3.4',
		'user_agent.original', 'Go-http-client/1.1', 'thread.id', '17')) AS SpanAttributes,
	Duration, StatusCode, StatusMessage, Events.Timestamp, Events.Name, Events.Attributes,
	Links.TraceId, Links.SpanId, Links.TraceState, Links.Attributes
FROM ` + db + `.base ARRAY JOIN [` + strings.Join(shifts, ", ") + `] AS shift`
}

func openConn(u *url.URL) (driver.Conn, error) {
	d := *u
	d.Path = "/default"
	o, err := ch.ParseDSN(d.String())
	if err != nil {
		return nil, err
	}
	return ch.Open(o)
}

// refs are the references each iteration times besides what a benchmark
// measures: SELECT count() of the range, and Read's own query answered in
// Native over HTTP and thrown away unread (the server's work and the
// transfer, no decoding).
type refs struct {
	count, raw time.Duration
}

func (r *refs) run(b *testing.B, t *benchTable, src *Source, dec *ingest.Decoder) {
	b.Helper()
	ctx := context.Background()
	t0 := time.Now()
	var n uint64
	if err := src.conn.QueryRow(ctx, "SELECT count() FROM "+src.db+"."+src.table+
		" WHERE Timestamp >= fromUnixTimestamp64Nano(toInt64(?)) AND Timestamp < fromUnixTimestamp64Nano(toInt64(?))",
		t.from.UnixNano(), t.to.UnixNano()).Scan(&n); err != nil {
		b.Fatal(err)
	}
	if int64(n) != t.spans {
		b.Fatalf("count() = %d, want %d", n, t.spans)
	}
	t1 := time.Now()
	r.count += t1.Sub(t0)
	q := src.query(dec.RowAttributes(), t.from, t.to)
	d := *t.u
	d.Path = "/"
	d.RawQuery = url.Values{"database": {t.db}, "default_format": {"Native"}}.Encode()
	resp, err := http.Post(d.String(), "text/plain", strings.NewReader(q))
	if err != nil {
		b.Fatal(err)
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || got == 0 {
		b.Fatalf("the raw query: %s, %d bytes, %v", resp.Status, got, err)
	}
	r.raw += time.Since(t1)
}

// report reports spans/s of the benchmark, of the references, and the
// ratios: the references' time over the benchmark's (≥ 1: as fast).
func (r *refs) report(b *testing.B, spans int64) {
	n := float64(spans) * float64(b.N)
	el := b.Elapsed().Seconds()
	b.ReportMetric(n/el, "spans/s")
	b.ReportMetric(n/r.count.Seconds(), "count-spans/s")
	b.ReportMetric(n/r.raw.Seconds(), "raw-spans/s")
	b.ReportMetric(r.count.Seconds()/el, "x-count")
	b.ReportMetric(r.raw.Seconds()/el, "x-raw")
}

func openBench(b *testing.B) (*benchTable, *Source) {
	t := table(b)
	src, err := Open(context.Background(), t.dsn, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	return t, src
}

// BenchmarkSourceRead: Source.Read of the range (about a million spans),
// decoded to graph.Spans and dropped; every iteration also times the
// references (refs), its timer stopped, so B/op and allocs/op are Read's.
// Run it on one core, as the references: -cpu 1.
func BenchmarkSourceRead(b *testing.B) {
	t, src := openBench(b)
	ctx := context.Background()
	var r refs
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dec := ingest.NewDecoder(ingest.DecoderConfig{})
		r.run(b, t, src, dec)
		runtime.GC()
		b.StartTimer()
		st, err := src.Read(ctx, t.from, t.to, dec, func([]graph.Span) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if st.Spans != t.spans || st.Bad != 0 {
			b.Fatalf("read %+v, want %d spans", st, t.spans)
		}
	}
	r.report(b, t.spans)
}

// BenchmarkSourceAnalyze: what analyze --source does with the range:
// offline.Analyze (ten-minute windows) over Source.Read, the report
// built; references as BenchmarkSourceRead's.
func BenchmarkSourceAnalyze(b *testing.B) {
	t, src := openBench(b)
	ctx := context.Background()
	var r refs
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dec := ingest.NewDecoder(ingest.DecoderConfig{})
		r.run(b, t, src, dec)
		runtime.GC()
		b.StartTimer()
		var st Stats
		doc, _, _, err := offline.Analyze(ctx, func(emit func([]graph.Span) error) error {
			var err error
			st, err = src.Read(ctx, t.from, t.to, dec, emit)
			return err
		}, offline.Config{Analysis: analysis.Config{Window: 10 * time.Minute}})
		if err != nil {
			b.Fatal(err)
		}
		if st.Spans != t.spans || doc == nil {
			b.Fatalf("read %+v, want %d spans", st, t.spans)
		}
	}
	r.report(b, t.spans)
}
