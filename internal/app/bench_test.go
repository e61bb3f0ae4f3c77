package app_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/store"
)

// benchRequests simulates n traces of a 12-service mesh starting at start
// and returns them as OTLP/HTTP protobuf bodies of about 600 spans times
// scale (pieces of 64 concurrent traces, exported service by service).
func benchRequests(b *testing.B, n int, start time.Time, scale int) (bodies [][]byte, spans int) {
	res := benchSim(b, n, start)
	perTrace := max(1, res.Stats.Spans/n)
	for _, td := range res.Exports(1, max(1, 1000/perTrace)*4*scale, 64) {
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	return bodies, res.Stats.Spans
}

// BenchmarkEndToEndHTTP: OTLP/HTTP protobuf requests, 8 at a time, into
// `serve` — on the embedded store, and on ClickHouse when the test server
// answers (chtest) — until every span is stored and
// its trace analysed (its record and rollups stored). Every iteration sends
// new traces. It reports spans/s (stored and analysed), stored-spans/s
// (acknowledged), lag-s (from the last acknowledgement to the last trace
// analysed), pdata's own unmarshal of the same bodies (measured in the
// same run) as ref-spans/s and the ratio, and the CPU time this process
// and the ClickHouse server on this machine took per million spans
// (measured part only; the process's includes the benchmark's clients).
// Clients retry a 503 after 20 ms (harder than a collector, which waits
// Retry-After).
//
// Requests are of two sizes: ~600 spans, as SDKs export (batches of up to
// 512 spans), and ~8,000, as a collector's batch processor sends them
// (8,192 by default).
func BenchmarkEndToEndHTTP(b *testing.B) {
	for _, size := range []struct {
		name  string
		scale int
	}{{"sdk", 1}, {"collector", 14}} {
		b.Run("sqlite/"+size.name, func(b *testing.B) {
			benchEndToEnd(b, storeurl.Options{Data: b.TempDir(), Window: 10 * time.Minute}, size.scale)
		})
		b.Run("clickhouse/"+size.name, func(b *testing.B) {
			benchEndToEnd(b, storeurl.Options{URL: benchDatabase(b), Window: 10 * time.Minute}, size.scale)
		})
	}
}

// benchDBs are the ClickHouse databases of the benchmarks, by name: one
// per benchmark for the whole process, dropped by TestMain once every
// benchmark ran. The testing package runs a benchmark's function several
// times (b.N = 1 first); dropping the database after each would delete
// thousands of part files just before the measured run, and on a file
// system without a journal ext4 then takes ~0.1 ms per file it creates
// for the next ~30 s (it skips recently deleted inodes one by one), which
// the server's inserts would be charged for. Every iteration sends new
// traces, so a database that already holds a run's is only a server in
// steady state. With STORMRADIUS_BENCH_KEEP set, they are kept (and
// named), for runs one after the other.
var benchDBs struct {
	sync.Mutex
	server *url.URL
	dbs    map[string]benchDB // by benchmark
}

type benchDB struct{ name, dsn string }

// benchDatabase returns the DSN of b's database (it skips b without a
// server).
func benchDatabase(b *testing.B) string {
	return benchDatabaseFor(b, b.Name())
}

// benchDatabaseFor returns the DSN of the database named key (a benchmark
// may use several).
func benchDatabaseFor(b *testing.B, key string) string {
	u := chtest.Server(b)
	benchDBs.Lock()
	defer benchDBs.Unlock()
	if db, ok := benchDBs.dbs[key]; ok {
		return db.dsn
	}
	if benchDBs.dbs == nil {
		benchDBs.dbs = map[string]benchDB{}
	}
	name, dsn := chtest.NewDatabase(u)
	benchDBs.server, benchDBs.dbs[key] = u, benchDB{name, dsn}
	return dsn
}

func TestMain(m *testing.M) {
	if os.Getenv(brokerEnv) != "" {
		// BenchmarkKafkaVsOTLP's broker, in a process of its own.
		os.Exit(runBroker())
	}
	code := m.Run()
	if os.Getenv("STORMRADIUS_BENCH_KEEP") != "" {
		// Measuring run after run: a drop would slow the next run's
		// inserts (see benchDBs). Drop them later.
		for _, db := range benchDBs.dbs {
			fmt.Fprintln(os.Stderr, "kept database", db.name)
		}
		os.Exit(code)
	}
	for _, db := range benchDBs.dbs {
		if err := chtest.Drop(benchDBs.server, db.name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

func benchEndToEnd(b *testing.B, opts storeurl.Options, scale int) {
	svc := startServiceStore(b, opts, time.Second)
	defer svc.stop()
	url := "http://" + svc.addrs.OTLPHTTP.String() + "/v1/traces"
	// Each iteration sends 100,000 traces (~2.2 M spans), or as many as
	// STORMRADIUS_BENCH_TRACES says. Throughput is what the service
	// sustains: an iteration ends with a fixed latency — the last traces
	// wait trace-idle (1 s here), then their batch is analysed and stored,
	// then the next poll (every 200 ms) sees it — which 20,000 traces
	// (~430,000 spans, two seconds of work) made half of the figure. That
	// latency is reported on its own (lag-s).
	traces := benchTraces(100000)
	// 8 clients at a time, or STORMRADIUS_BENCH_CLIENTS: each waits for
	// its spans to be durable, so with small requests the clients' number
	// bounds the rate (many SDKs send at once in production).
	clients := 8
	if v, err := strconv.Atoi(os.Getenv("STORMRADIUS_BENCH_CLIENTS")); err == nil && v > 0 {
		clients = v
	}
	// The service's store, read beside it (opened once: not in the
	// measured time of every iteration).
	ropts := opts
	ropts.Existing = true
	rd, err := storeurl.Open(context.Background(), ropts)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	// A database kept from the benchmark's previous run holds its spans.
	sent := storedSpans(b, rd)
	var total int
	var elapsed, refElapsed, storedElapsed, lag, cpu, srv time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bodies, n := benchRequests(b, traces, time.Now().Add(time.Duration(i)*time.Hour), scale)
		if i == 0 {
			b.Logf("%d requests, %d spans each on average", len(bodies), n/len(bodies))
		}
		// Reference: pdata's unmarshal of the same bodies.
		t0 := time.Now()
		for _, body := range bodies {
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(body); err != nil {
				b.Fatal(err)
			}
		}
		refElapsed += time.Since(t0)
		b.StartTimer()
		cpu0, srv0 := selfCPU(), clickHouseCPU()
		t1 := time.Now()
		postAll(b, url, bodies, clients)
		stored := time.Since(t1)
		sent += n
		waitAnalysed(b, rd, sent)
		elapsed += time.Since(t1)
		cpu += selfCPU() - cpu0
		srv += clickHouseCPU() - srv0
		storedElapsed += stored
		lag += time.Since(t1) - stored
		total += n
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "spans/s")
	b.ReportMetric(float64(total)/storedElapsed.Seconds(), "stored-spans/s")
	b.ReportMetric(float64(total)/refElapsed.Seconds(), "ref-spans/s")
	b.ReportMetric(refElapsed.Seconds()/elapsed.Seconds(), "ratio")
	b.ReportMetric(lag.Seconds()/float64(b.N), "lag-s")
	b.ReportMetric(cpu.Seconds()/float64(total)*1e6, "cpu-s/Mspans")
	if srv > 0 {
		b.ReportMetric(srv.Seconds()/float64(total)*1e6, "server-cpu-s/Mspans")
	}
}

// storedSpans returns the spans the stored rollups count.
func storedSpans(b *testing.B, st store.Store) int {
	rep, err := st.Report(context.Background(), store.Query{})
	if err != nil {
		b.Fatal(err)
	}
	return int(rep.Spans)
}

// waitAnalysed waits until the stored rollups count want spans.
func waitAnalysed(b *testing.B, st store.Store, want int) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if storedSpans(b, st) >= want {
			return
		}
		// Each look is a report on the server: looking more often would
		// take the CPU the run is measured on.
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("never analysed %d spans", want)
}
