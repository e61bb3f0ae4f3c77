package collector

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Scale-out over Kafka (docs/ARCHITECTURE.md, "Scaling out"): the
// collector's kafka exporter (deploy/collector/kafka.yaml, records keyed
// by trace id) into a Kafka-protocol broker with four partitions, consumed
// by 1, 2 and 4 cmd/ingest instances in one consumer group, OTLP off, over
// one ClickHouse database. With two or more, half-way through the sample
// one instance is killed with SIGKILL, another stops (SIGTERM), and a new
// one joins; the report then equals analyze of the sample, every figure
// (cross-trace ones included): nothing lost, nothing counted twice.
func TestScaleOut(t *testing.T) {
	setup(t)
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d-instances", n), func(t *testing.T) {
			storeFlags := clickhouse.flags(t)
			const topic = "otlp_spans"
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cluster.Close)
			broker := cluster.ListenAddrs()[0]
			fixed := store{"clickhouse", func(*testing.T) []string { return storeFlags }}
			args := []string{"--kafka-brokers", broker, "--kafka-topic", topic, "--kafka-group", "scale-out",
				"--kafka-session-timeout", "6s", "--otlp-grpc", "off", "--otlp-http", "off"}
			var svcs []*service
			for range n {
				svcs = append(svcs, startService(t, fixed, suite.ingest, args...))
			}
			col := startCollector(t, "kafka", []string{"KAFKA_BROKERS=" + broker, "KAFKA_TOPIC=" + topic,
				"KAFKA_ENCODING=otlp_proto", "KAFKA_COMPRESSION=none"})
			half := len(suite.requests) / 2
			col.sendRange(t, 0, half)
			live := svcs
			if n >= 2 {
				// Let the instances take some in, then change the group
				// mid-stream: one dies, one leaves cleanly, one joins.
				waitStored(t, svcs)
				svcs[0].Cmd.Process.Signal(syscall.SIGKILL)
				<-svcs[0].Exited()
				if err := svcs[1].Stop(30 * time.Second); err != nil {
					t.Fatalf("ingest stopped with %v:\n%s", err, e2ekit.Tail(svcs[1].Output(), 30))
				}
				live = append([]*service{startService(t, fixed, suite.ingest, args...)}, svcs[2:]...)
			}
			col.sendRange(t, half, len(suite.requests))
			var watch []*e2ekit.Proc
			for _, s := range live[1:] {
				watch = append(watch, s.Proc)
			}
			checkReport(t, live[0], append(watch, col.Proc)...)
			if t.Failed() {
				for i, s := range svcs {
					t.Logf("instance %d:\n%s", i, e2ekit.Tail(s.Output(), 40))
				}
			}
			if n >= 2 && !strings.Contains(live[0].Output(), "kafka: partitions assigned") {
				t.Errorf("the joining instance was assigned nothing:\n%s", e2ekit.Tail(live[0].Output(), 30))
			}
		})
	}
}

// waitStored waits until the instances together stored some spans.
func waitStored(t *testing.T, svcs []*service) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		total := 0.0
		for _, s := range svcs {
			if v, err := s.metric("stormradius_spans_stored_total"); err == nil {
				total += v
			}
		}
		if total > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no instance stored anything within 60 s")
}
