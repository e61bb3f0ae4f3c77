package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Several instances in one Kafka consumer group over one store
// (docs/ARCHITECTURE.md, "Scaling out"): four partitions, records keyed by
// trace id as the collector's kafka exporter writes them with
// partition_traces_by_id, every trace in several records (one per
// service). Two instances start; one is killed with SIGKILL mid-stream and
// a third joins; then the second stops (SIGTERM) mid-stream, and the third
// finishes alone. The report equals analyze of the traces: nothing lost,
// nothing counted twice, and every figure that depends on more than one
// trace (learned fail-open edges, retry-enabled edges, potential radius)
// as one analyser computes it, though each instance analysed only its
// partitions' traces.
func TestScaleOutKafka(t *testing.T) {
	res := crashCorpus(t)
	want := reference(t, res)
	const topic = "otlp_spans"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// One record per service per trace, keyed by the trace id in hex,
	// shuffled among neighbouring traces.
	var records []*kgo.Record
	for _, td := range res.Exports(11, 1, 20) {
		rs := td.ResourceSpans().At(0)
		id := rs.ScopeSpans().At(0).Spans().At(0).TraceID()
		b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		records = append(records, &kgo.Record{Key: []byte(hex.EncodeToString(id[:])), Value: b})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(records)/10, func(i, j int) { records[i], records[j] = records[j], records[i] })
	produce := func(rs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	perTrace := map[string]int{}
	parts := map[string]int32{}
	for _, r := range records {
		perTrace[string(r.Key)]++
	}
	multi := 0
	for _, n := range perTrace {
		if n > 1 {
			multi++
		}
	}
	if multi < len(perTrace)/2 {
		t.Fatalf("only %d of %d traces are in several records", multi, len(perTrace))
	}

	dir := t.TempDir()
	args := []string{"--kafka-brokers", strings.Join(cluster.ListenAddrs(), ","), "--kafka-group", "scale-out",
		"--kafka-partitioned", "--kafka-session-timeout", "6s", "--otlp-http", "off"}
	a := serve(t, dir, args...)
	b := serve(t, dir, args...)
	defer func() {
		if t.Failed() {
			t.Logf("instance a:\n%s\ninstance b:\n%s", a.log, b.log)
		}
	}()
	assigned(t, a, b)
	third := len(records) / 3
	produce(records[:third])
	waitSpans(t, dir)
	a.kill9(t) // mid-stream: its partitions' pending traces are in the store
	c := serve(t, dir, args...)
	defer func() {
		if t.Failed() {
			t.Logf("instance c:\n%s", c.log)
		}
	}()
	produce(records[third : 2*third])
	assigned(t, c) // once the group gave up on a (the session timeout)
	b.term(t)      // mid-stream, cleanly: its partitions move to c at once
	produce(records[2*third:])
	got := settledReport(t, dir, res.Stats.Spans)
	for _, r := range records {
		parts[string(r.Key)] = r.Partition
	}
	seen := map[int32]bool{}
	for _, p := range parts {
		seen[p] = true
	}
	if len(seen) != 4 {
		t.Fatalf("records went to %d partitions, want 4", len(seen))
	}
	c.term(t)
	if got != want {
		t.Fatalf("report of three instances (one killed, one stopped, one joining) differs from analyze:\n got %s\nwant %s", got, want)
	}
}

// assigned waits until each instance was assigned partitions.
func assigned(t *testing.T, ps ...*proc) {
	t.Helper()
	re := regexp.MustCompile(`kafka: partitions assigned.* partitions="\[\d`)
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range ps {
		for !re.MatchString(p.log.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("an instance was assigned no partition within 30 s:\n%s", p.log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// waitSpans waits until the store's report holds some spans.
func waitSpans(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if code, out, _ := runCmd(t, "report", "--data", dir); code == 0 {
			var d struct{ Spans int }
			json.Unmarshal([]byte(out), &d)
			if d.Spans > 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("nothing consumed within 30 s")
}
