package collector

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// splitOverrides turn deploy/collector/kafka.yaml into the mistake the
// ingest instances must survive: records not keyed by trace id (the
// exporter's sticky partitioner spreads its messages over the partitions)
// and small batches, which cut many traces in two (a batch holds at most
// 100 spans; the sample's traces have 36 on average).
const splitOverrides = `processors:
  batch:
    send_batch_size: 100
    send_batch_max_size: 100
exporters:
  kafka/stormradius:
    partition_traces_by_id: false
`

// splitPartitions is the topic's partition count: two per instance, so
// that traces are split both between the partitions of one instance and
// between instances.
const splitPartitions = 4

// A collector's kafka exporter without partition_traces_by_id, in front of
// two cmd/ingest in one consumer group over one ClickHouse database: the
// traces whose spans reached more than one partition ("split": read back
// from the topic, every record decoded, here) are counted in
// stormradius_traces_split_total (summed over both instances: each split
// trace once at least, at most once per partition it reached), an
// instance that found some says so on /readyz (a "warning: routing:" line,
// still ready), and the report excludes them entirely: it equals
// `stormradius analyze` of the other traces' spans, every figure, with
// split_traces the number of traces split.
func TestKafkaSplit(t *testing.T) {
	t.Parallel()
	setup(t)
	storeFlags := clickhouse.flags(t)
	fixed := store{"clickhouse", func(*testing.T) []string { return storeFlags }}
	const topic = "otlp_spans"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(splitPartitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	broker := cluster.ListenAddrs()[0]
	args := []string{"--kafka-brokers", broker, "--kafka-topic", topic, "--kafka-group", "split",
		"--kafka-encoding", "otlp_proto", "--otlp-grpc", "off", "--otlp-http", "off"}
	svcs := []*service{startService(t, fixed, suite.ingest, args...), startService(t, fixed, suite.ingest, args...)}
	assigned := regexp.MustCompile(`kafka: partitions assigned`)
	for _, s := range svcs {
		if _, err := s.WaitFor(assigned, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	col := startCollectorOver(t, "kafka", []string{splitOverrides}, []string{"KAFKA_BROKERS=" + broker,
		"KAFKA_TOPIC=" + topic, "KAFKA_ENCODING=otlp_proto", "KAFKA_COMPRESSION=zstd"})
	col.send(t)
	// SIGTERM: the collector exports what it holds; the topic is complete.
	if err := col.Stop(30 * time.Second); err != nil {
		t.Fatalf("the collector did not stop cleanly: %v", err)
	}
	for _, d := range e2ekit.Dropped {
		if line := col.Find(d); line != "" {
			t.Fatalf("the collector dropped the sample's data: %s", e2ekit.ExportError(line))
		}
	}

	split := splitTraces(t, cluster, broker, topic)
	want, wantSpans := unsplitReference(t, split)
	t.Logf("%d of the sample's %d traces split across partitions; the other %d spans are the reference", len(split), suite.traces, wantSpans)

	want = withSplitTraces(t, want, len(split)) // the report counts them there alone
	doc := settle(t, svcs, wantSpans)
	if err := e2ekit.SameDoc(doc, want); err != nil {
		t.Errorf("stormradius report differs from `stormradius analyze` of the unsplit traces in %v", err)
	}
	reached := 0
	for _, k := range split {
		reached += k
	}
	checkSplitCounted(t, svcs, len(split), reached)
}

// splitTraces reads every record of the topic (up to each partition's high
// watermark: the producer has stopped), decodes its OTLP protobuf and
// returns the trace ids whose spans are in more than one partition. It
// fails the test unless the topic holds the sample's spans and traces,
// or when no trace, or every trace, is split (the test would prove
// nothing).
func splitTraces(t *testing.T, cluster *kfake.Cluster, broker, topic string) map[[16]byte]int {
	t.Helper()
	end := map[int32]int64{}
	for _, p := range cluster.PartitionInfos(topic) {
		end[p.Partition] = p.HighWatermark
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[int32]int64{}
	done := func() bool {
		for p, hw := range end {
			if next[p] < hw {
				return false
			}
		}
		return true
	}
	parts := map[[16]byte]map[int32]bool{}
	spans := map[[24]byte]bool{} // trace id and span id
	records := 0
	var u ptrace.ProtoUnmarshaler
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading topic %s: %v; read up to offsets %v of %v", topic, err, next, end)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("reading partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			records++
			td, err := u.UnmarshalTraces(r.Value)
			if err != nil {
				t.Fatalf("partition %d offset %d: not an OTLP protobuf record: %v", r.Partition, r.Offset, err)
			}
			eachSpan(td, func(sp ptrace.Span) {
				id := sp.TraceID()
				if parts[id] == nil {
					parts[id] = map[int32]bool{}
				}
				parts[id][r.Partition] = true
				var k [24]byte
				copy(k[:16], id[:])
				sid := sp.SpanID()
				copy(k[16:], sid[:])
				spans[k] = true
			})
		})
	}
	if len(spans) != suite.spans || len(parts) != suite.traces {
		t.Fatalf("the topic holds %d spans of %d traces (%d records), the sample %d of %d", len(spans), len(parts), records, suite.spans, suite.traces)
	}
	split := map[[16]byte]int{} // the partitions each split trace reached
	for id, ps := range parts {
		if len(ps) > 1 {
			split[id] = len(ps)
		}
	}
	if len(split) == 0 || len(split) == len(parts) {
		t.Fatalf("%d of %d traces split across partitions (%d records): want some, not all", len(split), len(parts), records)
	}
	return split
}

// eachSpan calls f for every span of td.
func eachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				f(sp)
			}
		}
	}
}

// unsplitReference writes the sample without the spans of the split
// traces (OTLP JSON lines) and returns `stormradius analyze --format
// json` of it, and its span count; analyze's span and trace counts are
// checked against the data written.
func unsplitReference(t *testing.T, split map[[16]byte]int) ([]byte, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "unsplit.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	spans, traces := 0, map[[16]byte]bool{}
	var u ptrace.JSONUnmarshaler
	var m ptrace.JSONMarshaler
	err = e2ekit.EachGzipLine(suite.sample, func(n int, line []byte) error {
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %v", suite.sample, n, err)
		}
		td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(sp ptrace.Span) bool { return split[sp.TraceID()] > 0 })
				return ss.Spans().Len() == 0
			})
			return rs.ScopeSpans().Len() == 0
		})
		if td.ResourceSpans().Len() == 0 {
			return nil
		}
		eachSpan(td, func(sp ptrace.Span) { spans, traces[sp.TraceID()] = spans+1, true })
		b, err := m.MarshalTraces(td)
		if err != nil {
			return err
		}
		w.Write(b)
		return w.WriteByte('\n')
	})
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := e2ekit.Run(suite.stormradius, "analyze", "--format", "json", path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := e2ekit.DecodeDoc(out)
	if err != nil {
		t.Fatalf("stormradius analyze: %v", err)
	}
	if got, want := fmt.Sprint(doc["spans"], " ", doc["traces"]), fmt.Sprint(spans, " ", len(traces)); got != want {
		t.Fatalf("stormradius analyze of the unsplit traces counts spans, traces = %s; the data written has %s", got, want)
	}
	return out, spans
}

// checkSplitCounted asserts that the instances' stormradius_traces_split_total
// adds up to at least want, the traces split, and at most reached, the
// partitions they reached (each partition that held part of one counts it
// when it finds the other parts: the last to analyse it always does, an
// earlier one when the others' parts were stored by then), waiting up to
// 20 s; and that each instance that counted some is ready with a
// "warning: routing:" line on /readyz.
func checkSplitCounted(t *testing.T, svcs []*service, want, reached int) {
	t.Helper()
	const metric = "stormradius_traces_split_total"
	var got float64
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		if got, err = sumMetric(svcs, metric); err == nil && got >= float64(want) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Errorf("%v", err)
	} else if got < float64(want) || got > float64(reached) {
		t.Errorf("%s adds up to %v over the instances, want %d to %d: the traces read in more than one partition, and the partitions they reached",
			metric, got, want, reached)
	}
	warned := 0
	for _, s := range svcs {
		n, err := s.metric(metric)
		if err != nil || n == 0 {
			continue
		}
		code, body, err := readyz(s.http)
		if err != nil {
			t.Errorf("%s /readyz: %v", s.Name, err)
			continue
		}
		if code != http.StatusOK || !hasLinePrefix(body, "warning: routing:") {
			t.Errorf("%s counted %v split traces; /readyz answers %d %q, want 200 with a line \"warning: routing: …\"", s.Name, n, code, body)
		}
		warned++
	}
	if warned == 0 && want > 0 {
		t.Errorf("no instance counted a split trace, %d were split", want)
	}
}

// readyz returns the status and body of GET /readyz.
func readyz(addr string) (int, string, error) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return 0, "", fmt.Errorf("reading /readyz: %w", err)
	}
	return resp.StatusCode, string(b), nil
}

// hasLinePrefix reports whether a line of text starts with prefix.
func hasLinePrefix(text, prefix string) bool {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// withSplitTraces returns the report doc with split_traces set to n.
func withSplitTraces(t *testing.T, doc []byte, n int) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["split_traces"]; !ok {
		t.Fatal("analyze's report has no split_traces")
	}
	m["split_traces"] = json.RawMessage(strconv.Itoa(n))
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
