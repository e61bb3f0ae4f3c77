package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/sim"
)

// BenchmarkKafkaVsOTLP: one Kafka consumer (a service analysing each
// partition it is assigned on its own, as cmd/ingest does) against the
// OTLP/HTTP path (BenchmarkEndToEndHTTP/clickhouse/collector's requests,
// 8 clients), on the same traces, the same pipeline settings and each on a
// ClickHouse database of its own (STORMRADIUS_CLICKHOUSE), in the same
// run. Each path's clock runs from the moment its service takes spans —
// OTLP: ready, at the first request; Kafka: its first partition's analysis
// started (the group joined, the lease taken: kafka-startup-s, reported
// apart) — until the rollups count every span (stored and analysed).
//
// The broker (kfake, a topic of four partitions) runs in a child process
// (this test binary again, see TestMain): its CPU is its own, as a real
// broker's would be, and is reported apart. The topic is filled before the
// clock starts.
//
// Records are keyed by trace id, as the collector's kafka exporter writes
// them with partition_traces_by_id, in two sizes:
//   - records=service: one record per service per trace (~3.2 spans), an
//     exporter fed by SDKs without a batch processor (BenchmarkScaleOutKafka's);
//   - records=trace: the collector-sized batches the OTLP path sends, each
//     split per trace as the exporter splits a batch (~19 spans, a trace
//     whole or nearly: its pieces fall in one batch).
//
// It reports spans/s for each path (otlp-spans/s, kafka-spans/s) and
// their ratio (kafka/otlp); CPU seconds per million spans of this process
// (otlp-cpu-s/Mspans, kafka-cpu-s/Mspans: the service, and for OTLP its
// clients), of the broker (broker-cpu-s/Mspans) and of the ClickHouse
// server when it runs here (otlp-ch-cpu-s/Mspans, kafka-ch-cpu-s/Mspans).
// 100,000 traces (~2.2 M spans) per iteration, as BenchmarkEndToEndHTTP,
// or STORMRADIUS_BENCH_TRACES. STORMRADIUS_BENCH_PATHS=kafka (or otlp)
// runs one path only (for profiles).
func BenchmarkKafkaVsOTLP(b *testing.B) {
	traces := benchTraces(100000)
	paths := os.Getenv("STORMRADIUS_BENCH_PATHS")
	runOTLP := paths == "" || strings.Contains(paths, "otlp")
	runKafka := paths == "" || strings.Contains(paths, "kafka")
	for _, shape := range []string{"service", "trace"} {
		b.Run("records="+shape, func(b *testing.B) {
			otlpDSN := benchDatabaseFor(b, b.Name()+"/otlp")
			kafkaDSN := benchDatabaseFor(b, b.Name()+"/kafka")
			var m pathMeasures
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				res := benchSim(b, traces, time.Now().Add(time.Duration(i)*time.Hour))
				bodies := collectorBodies(b, res)
				if runOTLP {
					m.otlp.add(measureOTLP(b, otlpDSN, bodies, res.Stats.Spans))
				}
				if runKafka {
					var records []*kgo.Record
					if shape == "service" {
						records = serviceRecords(b, res)
					} else {
						records = traceSplitRecords(b, bodies)
					}
					if i == 0 {
						b.Logf("%d records of %.1f spans on average", len(records), float64(res.Stats.Spans)/float64(len(records)))
					}
					km, startup := measureKafka(b, kafkaDSN, records, res.Stats.Spans)
					m.kafka.add(km)
					m.startup += startup
					m.n++
				}
			}
			m.report(b)
		})
	}
}

// pathMeasure is what one path took: its spans, wall time and the CPU of
// this process, the broker and the ClickHouse server.
type pathMeasure struct {
	spans                        int
	elapsed, cpu, broker, server time.Duration
}

func (m *pathMeasure) add(o pathMeasure) {
	m.spans += o.spans
	m.elapsed += o.elapsed
	m.cpu += o.cpu
	m.broker += o.broker
	m.server += o.server
}

func (m *pathMeasure) rate() float64 { return float64(m.spans) / m.elapsed.Seconds() }

// perM returns d per million of m's spans, in seconds.
func (m *pathMeasure) perM(d time.Duration) float64 { return d.Seconds() / (float64(m.spans) / 1e6) }

type pathMeasures struct {
	otlp, kafka pathMeasure
	startup     time.Duration // Kafka: before the first partition's analysis started
	n           int           // Kafka iterations
}

func (ms *pathMeasures) report(b *testing.B) {
	if ms.otlp.spans > 0 {
		b.ReportMetric(ms.otlp.rate(), "otlp-spans/s")
		b.ReportMetric(ms.otlp.perM(ms.otlp.cpu), "otlp-cpu-s/Mspans")
		if ms.otlp.server > 0 {
			b.ReportMetric(ms.otlp.perM(ms.otlp.server), "otlp-ch-cpu-s/Mspans")
		}
	}
	if ms.kafka.spans > 0 {
		b.ReportMetric(ms.kafka.rate(), "kafka-spans/s")
		b.ReportMetric(ms.kafka.perM(ms.kafka.cpu), "kafka-cpu-s/Mspans")
		b.ReportMetric(ms.kafka.perM(ms.kafka.broker), "broker-cpu-s/Mspans")
		b.ReportMetric(ms.startup.Seconds()/float64(ms.n), "kafka-startup-s")
		if ms.kafka.server > 0 {
			b.ReportMetric(ms.kafka.perM(ms.kafka.server), "kafka-ch-cpu-s/Mspans")
		}
	}
	if ms.otlp.spans > 0 && ms.kafka.spans > 0 {
		b.ReportMetric(ms.kafka.rate()/ms.otlp.rate(), "ratio")
	}
}

// benchPipeline is both paths' pipeline settings (BenchmarkEndToEndHTTP's).
var benchPipeline = pipeline.Config{TraceIdle: time.Second, MaxTraceAge: 5 * time.Second, Retention: -1, SummaryInterval: 20 * time.Millisecond}

// benchSim simulates n traces of the benchmarks' mesh from start.
func benchSim(b *testing.B, n int, start time.Time) *sim.Result {
	sc := sim.Mesh(sim.MeshConfig{Seed: 3, APIs: 3, Depth: 6, Fanout: 2, GRPC: 0.3, FailOpen: 0.2, ErrorRate: 0.01,
		Policy: sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}})
	sc.Traces, sc.Start, sc.Spacing = n, start, time.Millisecond
	res, err := sim.Run(sc)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// collectorBodies are res's traces as collector-sized batches
// (benchRequests's, scale 14: ~8,500 spans).
func collectorBodies(b *testing.B, res *sim.Result) []ptrace.Traces {
	perTrace := max(1, res.Stats.Spans/len(res.Traces))
	return res.Exports(1, max(1, 1000/perTrace)*4*14, 64)
}

// serviceRecords is one record per service per trace, keyed by trace id.
func serviceRecords(b *testing.B, res *sim.Result) []*kgo.Record {
	var out []*kgo.Record
	for _, td := range res.Exports(1, 1, 64) {
		id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
		out = append(out, traceRecord(b, id, td))
	}
	return out
}

// traceSplitRecords splits each batch per trace, as the kafka exporter
// does with partition_traces_by_id: a record per trace id, holding the
// trace's spans of the batch under their resources and scopes.
func traceSplitRecords(b *testing.B, batches []ptrace.Traces) []*kgo.Record {
	var out []*kgo.Record
	for _, td := range batches {
		byTrace := map[pcommon.TraceID]ptrace.Traces{}
		var order []pcommon.TraceID
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				for k := 0; k < ss.Spans().Len(); k++ {
					sp := ss.Spans().At(k)
					t, ok := byTrace[sp.TraceID()]
					if !ok {
						t = ptrace.NewTraces()
						byTrace[sp.TraceID()] = t
						order = append(order, sp.TraceID())
					}
					// Each span under a resource and scope of its own: the
					// exporter's split keeps them; the decoder reads both.
					nrs := t.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(nrs.Resource())
					nss := nrs.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(nss.Scope())
					sp.CopyTo(nss.Spans().AppendEmpty())
				}
			}
		}
		for _, id := range order {
			out = append(out, traceRecord(b, id, byTrace[id]))
		}
	}
	return out
}

func traceRecord(b *testing.B, id pcommon.TraceID, td ptrace.Traces) *kgo.Record {
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		b.Fatal(err)
	}
	return &kgo.Record{Key: []byte(hex.EncodeToString(id[:])), Value: body}
}

// measureOTLP sends bodies, 8 clients at a time, to a service over the
// database dsn, and measures until it analysed every span.
func measureOTLP(b *testing.B, dsn string, batches []ptrace.Traces, spans int) pathMeasure {
	bodies := make([][]byte, len(batches))
	for i, td := range batches {
		var err error
		if bodies[i], err = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto(); err != nil {
			b.Fatal(err)
		}
	}
	rd := openStoreURL(b, dsn)
	defer rd.Close()
	base := storedSpans(b, rd)
	svc := runService(b, app.Config{
		Store:    storeurl.Options{URL: dsn, Window: 10 * time.Minute},
		Pipeline: benchPipeline,
		OTLP:     otlp.Config{DisableGRPC: true, HTTPAddr: "127.0.0.1:0"},
	})
	defer func() {
		if err := svc.stop(); err != nil {
			b.Error(err)
		}
	}()
	url := "http://" + svc.addrs.OTLPHTTP.String() + "/v1/traces"
	c := startClock(0)
	postAll(b, url, bodies, 8)
	waitAnalysed(b, rd, base+spans)
	return c.stop(spans)
}

// postAll posts every body (postUntilAccepted) from clients clients.
func postAll(b *testing.B, url string, bodies [][]byte, clients int) {
	work := make(chan []byte)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for body := range work {
				postUntilAccepted(b, url, body)
			}
		})
	}
	for _, body := range bodies {
		work <- body
	}
	close(work)
	wg.Wait()
}

// postUntilAccepted posts body, again after 20 ms while the service
// answers 503.
func postUntilAccepted(b *testing.B, url string, body []byte) {
	for {
		resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			b.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// measureKafka fills a topic of a broker of its own with records, then
// runs a service consuming it into the database dsn (partitioned: each
// partition its own analysis), and measures until it analysed every span.
// The clock starts when the first partition's analysis has started (its
// lease taken: the consumer fetches from then on), as the OTLP path's
// starts once its service is ready; the time before (joining the group,
// the leases' settle) is returned apart.
func measureKafka(b *testing.B, dsn string, records []*kgo.Record, spans int) (pathMeasure, time.Duration) {
	br := startBrokerProcess(b)
	defer br.stop(b)
	fillTopic(b, br.addrs, records)
	rd := openStoreURL(b, dsn)
	defer rd.Close()
	base := storedSpans(b, rd)
	t0 := time.Now()
	started := &startLog{start: func() *clock { return startClock(br.pid) }}
	svc := runService(b, app.Config{
		Store:            storeurl.Options{URL: dsn, Window: 10 * time.Minute},
		Pipeline:         benchPipeline,
		OTLP:             otlp.Config{DisableGRPC: true, DisableHTTP: true},
		Kafka:            kafka.Config{Brokers: br.addrs, GroupID: "bench", SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: 600 * time.Millisecond},
		KafkaPartitioned: true,
		Logger:           slog.New(started),
	})
	waitAnalysed(b, rd, base+spans)
	c := started.clock()
	m := c.stop(spans)
	if err := svc.stop(); err != nil {
		b.Error(err)
	}
	return m, c.t0.Sub(t0)
}

// startLog is a slog.Handler that starts a clock at the first partition
// lease taken.
type startLog struct {
	start func() *clock
	once  sync.Once
	c     *clock
}

func (l *startLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *startLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *startLog) WithGroup(string) slog.Handler            { return l }
func (l *startLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "analysis lease taken") {
		l.once.Do(func() { l.c = l.start() })
	}
	return nil
}

// clock returns the clock started (a partition's lease must have been
// taken: every span was analysed).
func (l *startLog) clock() *clock {
	l.once.Do(func() { l.c = l.start() })
	return l.c
}

// clock measures wall time and the CPU of this process, of a broker
// process (when pid is not 0) and of the local ClickHouse server.
type clock struct {
	t0                  time.Time
	pid                 int
	cpu, broker, server time.Duration
}

func startClock(pid int) *clock {
	return &clock{t0: time.Now(), pid: pid, cpu: selfCPU(), broker: processCPU(pid), server: clickHouseCPU()}
}

func (c *clock) stop(spans int) pathMeasure {
	return pathMeasure{spans: spans, elapsed: time.Since(c.t0), cpu: selfCPU() - c.cpu,
		broker: processCPU(c.pid) - c.broker, server: clickHouseCPU() - c.server}
}

// selfCPU is this process's CPU time (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// brokerProcess is a kfake broker in a child process.
type brokerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int
	addrs []string
}

// brokerEnv, set, makes this test binary a kfake broker (TestMain).
const brokerEnv = "STORMRADIUS_BENCH_KFAKE_BROKER"

// startBrokerProcess runs this test binary as a broker (runBroker) and
// returns once it listens.
func startBrokerProcess(b *testing.B) *brokerProcess {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), brokerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		b.Fatalf("broker process: %v", err)
	}
	return &brokerProcess{cmd: cmd, stdin: stdin, pid: cmd.Process.Pid, addrs: strings.Fields(line)}
}

// stop ends the broker (its stdin closed) and waits for it.
func (p *brokerProcess) stop(b *testing.B) {
	_ = p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		b.Errorf("broker process: %v", err)
	}
}

// runBroker is the broker process: a kfake cluster with the consumer's
// topic of four partitions; it writes its addresses on a line to stdout
// and runs until stdin closes.
func runBroker() int {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, kafka.DefaultTopic))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Close()
	fmt.Println(strings.Join(cluster.ListenAddrs(), " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// fillTopic produces records to the broker at addrs.
func fillTopic(b *testing.B, addrs []string, records []*kgo.Record) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(kafka.DefaultTopic),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), records...).FirstErr(); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the CPU time (user + system) of process pid, from /proc;
// 0 when pid is 0 or unknown.
func processCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	return statCPU("/proc/" + strconv.Itoa(pid) + "/stat")
}
