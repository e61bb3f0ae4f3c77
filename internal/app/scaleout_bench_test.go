package app_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
)

// BenchmarkScaleOutKafka: 1, 2 and 4 instances (in this process, each a
// service of its own: app.Run) in one consumer group read a topic of four
// partitions, keyed by trace id, one record per service per trace, into
// one ClickHouse database (STORMRADIUS_CLICKHOUSE), each analysing the
// partitions it is assigned. The topic is filled first; the clock runs
// from the instances' start until every span is stored and its trace
// analysed (the rollups count it). It reports spans/s, and the ClickHouse
// server's CPU time (user + system, from /proc, when the server runs on
// this machine) per million spans as ch-cpu-s/Mspans. 20,000 traces per
// iteration (STORMRADIUS_BENCH_TRACES).
func BenchmarkScaleOutKafka(b *testing.B) {
	traces := benchTraces(20000)
	for _, n := range []int{1, 2, 4} {
		b.Run("consumers="+strconv.Itoa(n), func(b *testing.B) {
			dsn := benchDatabase(b)
			rd := openStoreURL(b, dsn)
			defer rd.Close()
			var spans int
			var elapsed, chCPU time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				records, total := traceRecords(b, traces, time.Now().Add(time.Duration(i)*time.Hour))
				cluster, brokers := filledTopic(b, records)
				base := storedSpans(b, rd)
				cpu0 := clickHouseCPU()
				b.StartTimer()
				t0 := time.Now()
				stops := make([]func() error, n)
				for k := range stops {
					stops[k] = runKafkaInstance(b, dsn, brokers, nil)
				}
				waitAnalysed(b, rd, base+total)
				elapsed += time.Since(t0)
				b.StopTimer()
				chCPU += clickHouseCPU() - cpu0
				for _, stop := range stops {
					if err := stop(); err != nil {
						b.Error(err)
					}
				}
				cluster.Close()
				spans += total
			}
			b.ReportMetric(float64(spans)/elapsed.Seconds(), "spans/s")
			if chCPU > 0 {
				b.ReportMetric(chCPU.Seconds()/(float64(spans)/1e6), "ch-cpu-s/Mspans")
			}
		})
	}
}

// BenchmarkRebalancePause: two instances share a topic of four partitions
// (2,000 traces consumed); one stops (SIGTERM's path: it analyses what it
// holds and leaves the group) and the pause is the time until the other
// has taken its two partitions over (each one's lease taken, its pending
// spans recovered: ready to consume), as the other's log says. Reported
// as pause-s.
func BenchmarkRebalancePause(b *testing.B) {
	dsn := benchDatabase(b)
	rd := openStoreURL(b, dsn)
	defer rd.Close()
	var pause time.Duration
	for i := 0; i < b.N; i++ {
		records, total := traceRecords(b, 2000, time.Now().Add(time.Duration(i)*time.Hour))
		cluster, brokers := filledTopic(b, records)
		base := storedSpans(b, rd)
		log := &leaseLog{}
		stopA := runKafkaInstance(b, dsn, brokers, nil)
		stopC := runKafkaInstance(b, dsn, brokers, log)
		waitAnalysed(b, rd, base+total)
		log.wait(b, time.Time{}, 2) // the two share the four
		b.StartTimer()
		t0 := time.Now()
		if err := stopA(); err != nil {
			b.Error(err)
		}
		pause += log.wait(b, t0, 2).Sub(t0)
		b.StopTimer()
		if err := stopC(); err != nil {
			b.Error(err)
		}
		cluster.Close()
	}
	b.ReportMetric(pause.Seconds()/float64(b.N), "pause-s")
}

// traceRecords simulates n traces of the benchmarks' mesh as the kafka
// exporter writes them with partition_traces_by_id: one record per
// service per trace (an SDK's export), keyed by the trace id in hex.
func traceRecords(b *testing.B, n int, start time.Time) ([]*kgo.Record, int) {
	res := benchSim(b, n, start)
	return serviceRecords(b, res), res.Stats.Spans
}

// filledTopic starts a Kafka-protocol broker with a topic of four
// partitions holding records.
func filledTopic(b *testing.B, records []*kgo.Record) (*kfake.Cluster, []string) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, kafka.DefaultTopic))
	if err != nil {
		b.Fatal(err)
	}
	fillTopic(b, cluster.ListenAddrs(), records)
	return cluster, cluster.ListenAddrs()
}

// runKafkaInstance runs a service that analyses the Kafka partitions the
// group assigns it (OTLP off) over the ClickHouse database dsn; its log
// goes to log when not nil. It returns the function that stops it.
func runKafkaInstance(b *testing.B, dsn string, brokers []string, log *leaseLog) func() error {
	logger := slog.New(slog.DiscardHandler)
	if log != nil {
		logger = slog.New(log)
	}
	svc := runService(b, app.Config{
		Store:            storeurl.Options{URL: dsn, Window: 10 * time.Minute},
		Pipeline:         pipeline.Config{TraceIdle: 500 * time.Millisecond, MaxTraceAge: 5 * time.Second, Retention: -1},
		OTLP:             otlp.Config{DisableGRPC: true, DisableHTTP: true},
		Kafka:            kafka.Config{Brokers: brokers, GroupID: "bench", SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: 600 * time.Millisecond},
		KafkaPartitioned: true,
		Logger:           logger,
	})
	return svc.stop
}

// openStoreURL opens (creating and migrating) the database dsn.
func openStoreURL(b *testing.B, dsn string) store.Store {
	st, err := storeurl.Open(context.Background(), storeurl.Options{URL: dsn, Window: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// benchTraces is how many traces an iteration sends:
// STORMRADIUS_BENCH_TRACES, or def.
func benchTraces(def int) int {
	if v, err := strconv.Atoi(os.Getenv("STORMRADIUS_BENCH_TRACES")); err == nil && v > 0 {
		return v
	}
	return def
}

// clickHouseCPU returns the CPU time (user + system) the local ClickHouse
// server has used, 0 when it does not run here: the process
// STORMRADIUS_BENCH_SERVER_PID names, else the one its pid file names,
// else the one called clickhouse-server.
func clickHouseCPU() time.Duration {
	pid := os.Getenv("STORMRADIUS_BENCH_SERVER_PID")
	if pid == "" {
		if b, err := os.ReadFile("/var/lib/clickhouse/clickhouse-server.pid"); err == nil {
			pid = strings.TrimSpace(string(b))
		}
	}
	if pid == "" {
		procs, _ := filepath.Glob("/proc/[0-9]*/comm")
		for _, c := range procs {
			if b, err := os.ReadFile(c); err == nil && strings.HasPrefix(string(b), "clickhouse-serv") {
				pid = filepath.Base(filepath.Dir(c))
				break
			}
		}
	}
	if pid == "" {
		return 0
	}
	return statCPU(filepath.Join("/proc", pid, "stat"))
}

// statCPU returns the CPU time (user + system) of the process whose
// /proc stat file is path, 0 when it cannot be read.
func statCPU(path string) time.Duration {
	stat, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces): utime is the 14th
	// field, stime the 15th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// leaseLog is a slog.Handler that notes when partitions' leases are taken.
type leaseLog struct {
	mu    sync.Mutex
	taken []time.Time
}

func (l *leaseLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *leaseLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *leaseLog) WithGroup(string) slog.Handler            { return l }
func (l *leaseLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "analysis lease taken") {
		l.mu.Lock()
		l.taken = append(l.taken, r.Time)
		l.mu.Unlock()
	}
	return nil
}

// wait waits until n leases were taken after since and returns when the
// last of them was.
func (l *leaseLog) wait(b *testing.B, since time.Time, n int) time.Time {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		var got []time.Time
		for _, t := range l.taken {
			if !t.Before(since) {
				got = append(got, t)
			}
		}
		l.mu.Unlock()
		if len(got) >= n {
			return got[n-1]
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("fewer than %d partitions taken over within a minute", n)
	return time.Time{}
}
