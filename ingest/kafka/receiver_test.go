package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
)

const testTopic = DefaultTopic

// cluster starts an in-process Kafka-protocol broker with the test topic.
func cluster(t *testing.T, partitions int32) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// record is one produced record: which partition, and the spans it holds.
type record struct {
	partition int32
	key       []byte
	value     []byte
	spans     []graph.SpanID // as produced
}

// traceRecord builds a record holding nspans spans of trace traceNo; span
// ids encode the record's number (msg) and the span's index, so that a
// delivered span tells which record it came from.
func traceRecord(t *testing.T, partition int32, traceNo uint64, msg uint32, nspans int, json bool) record {
	t.Helper()
	var tid [16]byte
	tid[0] = 0x5a
	binary.BigEndian.PutUint64(tid[8:], traceNo)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", msg%3))
	ss := rs.ScopeSpans().AppendEmpty()
	rec := record{partition: partition, key: []byte(hex.EncodeToString(tid[:]))}
	start := time.Unix(1_700_000_000, 0)
	for k := range nspans {
		var sid [8]byte
		binary.BigEndian.PutUint32(sid[:4], msg)
		binary.BigEndian.PutUint32(sid[4:], uint32(k+1))
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(tid))
		sp.SetSpanID(pcommon.SpanID(sid))
		sp.SetName("GET /x")
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		rec.spans = append(rec.spans, sid)
	}
	var err error
	if json {
		rec.value, err = (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	} else {
		rec.value, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// msgOf returns the record number a span id encodes.
func msgOf(id graph.SpanID) uint32 { return binary.BigEndian.Uint32(id[:4]) }

// produce writes records with franz-go, the client the collector's kafka
// exporter uses, to the partitions they name.
func produce(t *testing.T, brokers []string, recs []record, opts ...kgo.Opt) {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(testTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Partition: r.partition, Key: r.key, Value: r.value}
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// recorder is a pipeline.Consumer that keeps what it accepted. fail, when set,
// decides each call (numbered from 1) before anything is kept.
type recorder struct {
	mu       sync.Mutex
	calls    int
	fail     func(ctx context.Context, call int, spans []graph.Span) error
	accepted [][]graph.Span
}

func (r *recorder) Consume(ctx context.Context, spans []graph.Span) error {
	r.mu.Lock()
	r.calls++
	call, fail := r.calls, r.fail
	r.mu.Unlock()
	if fail != nil {
		if err := fail(ctx, call, spans); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.accepted = append(r.accepted, slices.Clone(spans))
	return nil
}

// spans returns the accepted spans in delivery order.
func (r *recorder) spans() []graph.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []graph.Span
	for _, c := range r.accepted {
		out = append(out, c...)
	}
	return out
}

func (r *recorder) numAccepted() int { return len(r.spans()) }

// msgs returns the record numbers of the accepted spans, each once.
func (r *recorder) msgs() map[uint32]bool {
	out := map[uint32]bool{}
	for _, s := range r.spans() {
		out[msgOf(s.SpanID)] = true
	}
	return out
}

// logBuffer collects a receiver's logs; they are printed when the test
// fails (kafka-go's goroutines may log after a test ends, when t.Log
// panics).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testConfig returns a configuration tuned for a test broker: short waits
// and backoffs everywhere; the group's session stays at kfake's minimum
// (6 s), which costs nothing since members leave the group on Close.
func testConfig(t *testing.T, brokers []string) Config {
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("receiver logs:\n%s", logs.String())
		}
	})
	return Config{
		Brokers:           brokers,
		MaxBatchWait:      20 * time.Millisecond,
		FetchMaxWait:      100 * time.Millisecond,
		MinBackoff:        5 * time.Millisecond,
		MaxBackoff:        40 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		RebalanceTimeout:  2 * time.Second,
		JoinGroupBackoff:  50 * time.Millisecond,
		ReadBackoffMin:    10 * time.Millisecond,
		ReadBackoffMax:    50 * time.Millisecond,
		LagInterval:       -1,
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// start runs a receiver; stop cancels it and returns Run's error.
func start(t *testing.T, cfg Config, next pipeline.Consumer) (r *Receiver, stop func() error) {
	t.Helper()
	r, err := NewReceiver(cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(15 * time.Second):
				runErr = errors.New("Run did not return within 15 s of its context ending")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// offsets returns the group's committed offsets and the log ends.
func offsets(t *testing.T, brokers []string, group string) map[int]partitionOffsets {
	t.Helper()
	c := newClient(brokers, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := groupOffsets(ctx, c, group, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// allCommitted reports whether the group committed every partition to its
// end.
func allCommitted(t *testing.T, brokers []string, group string) bool {
	for _, p := range offsets(t, brokers, group) {
		if p.Committed != p.Last {
			return false
		}
	}
	return true
}

func totalSpans(recs []record) int {
	n := 0
	for _, r := range recs {
		n += len(r.spans)
	}
	return n
}

// checkPartitionOrder checks that the first delivery of each span follows
// the produced order within each partition, and that every produced span
// was delivered.
func checkPartitionOrder(t *testing.T, recs []record, got []graph.Span) {
	t.Helper()
	part := map[uint32]int32{}
	for i, r := range recs {
		part[uint32(i)] = r.partition
	}
	seen := map[graph.SpanID]bool{}
	last := map[int32]int64{}
	for _, s := range got {
		if seen[s.SpanID] {
			continue
		}
		seen[s.SpanID] = true
		m := msgOf(s.SpanID)
		p := part[m]
		if prev, ok := last[p]; ok && int64(m) < prev {
			t.Fatalf("partition %d: record %d delivered after record %d", p, m, prev)
		}
		last[p] = int64(m)
	}
	for _, r := range recs {
		for _, id := range r.spans {
			if !seen[id] {
				t.Fatalf("span %x of record %d never delivered", id, msgOf(id))
			}
		}
	}
}

// TestConsumeProtoCommits: proto records over three partitions are all
// delivered and committed; a new member of the group reads only what was
// produced after the commit.
func TestConsumeProtoCommits(t *testing.T) {
	brokers := cluster(t, 3)
	var recs []record
	for i := range 30 {
		recs = append(recs, traceRecord(t, int32(i%3), uint64(i), uint32(i), i%5+1, false))
	}
	produce(t, brokers, recs)

	reg := prometheus.NewRegistry()
	cfg := testConfig(t, brokers)
	cfg.Registerer = reg
	cfg.MaxBatchMessages = 7
	rec := &recorder{}
	r, stop := start(t, cfg, rec)
	want := totalSpans(recs)
	waitFor(t, 10*time.Second, "all spans", func() bool { return rec.numAccepted() >= want })
	waitFor(t, 5*time.Second, "offsets committed", func() bool { return allCommitted(t, brokers, DefaultGroupID) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := rec.spans()
	if len(got) != want {
		t.Fatalf("got %d spans, want %d (no re-delivery without a restart)", len(got), want)
	}
	checkPartitionOrder(t, recs, got)
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"messages", testutil.ToFloat64(r.m.messages), 30},
		{"spans", testutil.ToFloat64(r.m.spans), float64(want)},
		{"bad", testutil.ToFloat64(r.m.bad), 0},
		{"commit errors", testutil.ToFloat64(r.m.commitErrors), 0},
		{"rebalances", testutil.ToFloat64(r.m.rebalances), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Errorf("registry: %d metrics, %v", n, err)
	}

	// The next member of the group starts at the committed offsets.
	more := traceRecord(t, 1, 99, 99, 2, false)
	produce(t, brokers, []record{more})
	rec2 := &recorder{}
	_, stop2 := start(t, testConfig(t, brokers), rec2)
	waitFor(t, 10*time.Second, "the new record", func() bool { return rec2.numAccepted() >= 2 })
	time.Sleep(50 * time.Millisecond) // room for a wrong re-read to show
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if got := rec2.msgs(); len(got) != 1 || !got[99] {
		t.Fatalf("second member read records %v, want only 99", got)
	}
}

// TestBatchClosesAtSpans: a batch closes at the record that brings its
// spans to MaxBatchSpans, however many records it may still take.
func TestBatchClosesAtSpans(t *testing.T) {
	brokers := cluster(t, 1)
	var recs []record
	for i := range 10 {
		recs = append(recs, traceRecord(t, 0, uint64(i), uint32(i), 3, false))
	}
	produce(t, brokers, recs)
	cfg := testConfig(t, brokers)
	cfg.MaxBatchSpans = 7 // closed by the third record of 3 spans: 9
	rec := &recorder{}
	_, stop := start(t, cfg, rec)
	waitFor(t, 10*time.Second, "all spans", func() bool { return rec.numAccepted() >= 30 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, b := range rec.accepted {
		if len(b) > 9 {
			t.Errorf("batch %d holds %d spans, want at most 9", i, len(b))
		}
	}
	if len(rec.accepted) < 4 {
		t.Errorf("%d batches for 10 records of 3 spans, want at least 4", len(rec.accepted))
	}
}

// TestConsumeJSON: the otlp_json encoding, and JSON records sniffed on a
// topic configured as otlp_proto.
func TestConsumeJSON(t *testing.T) {
	for _, tc := range []struct {
		name     string
		encoding Encoding
		json     func(i int) bool
	}{
		{"otlp_json", EncodingJSON, func(int) bool { return true }},
		{"mixed on otlp_proto", EncodingProto, func(i int) bool { return i%2 == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := cluster(t, 2)
			var recs []record
			for i := range 10 {
				recs = append(recs, traceRecord(t, int32(i%2), uint64(i), uint32(i), 3, tc.json(i)))
			}
			produce(t, brokers, recs)
			cfg := testConfig(t, brokers)
			cfg.Encoding = tc.encoding
			cfg.Sampling = ingest.SamplingConfig{Probability: 0.5}
			rec := &recorder{}
			r, stop := start(t, cfg, rec)
			waitFor(t, 10*time.Second, "all spans", func() bool { return rec.numAccepted() >= 30 })
			waitFor(t, 5*time.Second, "offsets committed", func() bool { return allCommitted(t, brokers, DefaultGroupID) })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			checkPartitionOrder(t, recs, rec.spans())
			if bad := testutil.ToFloat64(r.m.bad); bad != 0 {
				t.Fatalf("%v bad records", bad)
			}
			// Decoded with cfg.Sampling: spans that record nothing
			// have the input's probability.
			for _, sp := range rec.spans() {
				if sp.Sampling != graph.SamplingConfigured || sp.AdjustedCount != 2 {
					t.Fatalf("span %v: %v %v, want configured 2", sp.SpanID, sp.Sampling, sp.AdjustedCount)
				}
			}
		})
	}
}

// TestTraceSplitOverRecords: with partition_traces_by_id one trace's spans
// come in several records; read in separate batches, the whole trace
// arrives.
func TestTraceSplitOverRecords(t *testing.T) {
	brokers := cluster(t, 1)
	first := traceRecord(t, 0, 7, 1, 3, false)
	second := traceRecord(t, 0, 7, 2, 2, false)
	if !bytes.Equal(first.key, second.key) {
		t.Fatal("records of one trace should share the key")
	}
	produce(t, brokers, []record{first, second})
	cfg := testConfig(t, brokers)
	cfg.MaxBatchMessages = 1
	rec := &recorder{}
	_, stop := start(t, cfg, rec)
	waitFor(t, 10*time.Second, "the trace", func() bool { return rec.numAccepted() >= 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	calls := len(rec.accepted)
	rec.mu.Unlock()
	if calls != 2 {
		t.Fatalf("%d Consume calls, want one per record", calls)
	}
	want := slices.Concat(first.spans, second.spans)
	var got []graph.SpanID
	for _, s := range rec.spans() {
		if s.TraceID != rec.spans()[0].TraceID {
			t.Fatalf("span of another trace: %x", s.TraceID)
		}
		got = append(got, s.SpanID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("spans %x, want %x", got, want)
	}
}

// TestBadRecordSkipped: records that do not decode, or hold no span, are
// counted and committed with their batch; the others are delivered.
func TestBadRecordSkipped(t *testing.T) {
	brokers := cluster(t, 1)
	recs := []record{
		traceRecord(t, 0, 1, 0, 2, false),
		traceRecord(t, 0, 2, 1, 3, false),
		{partition: 0, value: []byte{0x0a, 0xff, 0xff, 0xff}},     // protobuf: length past the end
		{partition: 0, value: []byte(`{"resourceSpans": [ oops`)}, // JSON, sniffed, broken
		{partition: 0, value: []byte(`{"resourceLogs":[]}`)},      // OTLP logs on the traces topic
		{partition: 0, value: []byte(`{"traceId":"AAAAAAAAAABSlpqJVVcaPw==","spanId":"AAAAAAAAAAE=","operationName":"x"}`)}, // jaeger_json: parses, no span
		{partition: 0}, // no value at all
		traceRecord(t, 0, 3, 7, 1, false),
		traceRecord(t, 0, 4, 8, 4, true),
	}
	produce(t, brokers, recs)
	cfg := testConfig(t, brokers)
	rec := &recorder{}
	r, stop := start(t, cfg, rec)
	want := totalSpans(recs)
	waitFor(t, 10*time.Second, "all good spans", func() bool { return rec.numAccepted() >= want })
	waitFor(t, 5*time.Second, "offsets committed past the bad records", func() bool {
		return allCommitted(t, brokers, DefaultGroupID)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := rec.numAccepted(); got != want {
		t.Fatalf("%d spans, want %d", got, want)
	}
	// The OTLP logs record is bad with a decoder that recognises other
	// signals (ingest.ErrNotTraces), else empty: either way it gives no
	// span and is committed.
	bad, empty := testutil.ToFloat64(r.m.bad), testutil.ToFloat64(r.m.empty)
	if bad < 2 || empty < 2 || bad+empty != 5 {
		t.Fatalf("%v bad and %v empty records, want 2 or 3 bad and 5 in all", bad, empty)
	}
	if msgs := testutil.ToFloat64(r.m.messages); msgs != float64(len(recs)) {
		t.Fatalf("%v records counted, want %d", msgs, len(recs))
	}
	for _, p := range offsets(t, brokers, DefaultGroupID) {
		if p.Committed != int64(len(recs)) {
			t.Fatalf("committed %d, want %d", p.Committed, len(recs))
		}
	}
}

// TestBackpressurePauses: while the store refuses (backpressure, outage),
// nothing is committed and the same batch is offered again; then everything
// arrives exactly as produced, in order per partition.
func TestBackpressurePauses(t *testing.T) {
	brokers := cluster(t, 3)
	var recs []record
	for i := range 24 {
		recs = append(recs, traceRecord(t, int32(i%3), uint64(i), uint32(i), 2, false))
	}
	produce(t, brokers, recs)

	const refusals = 5
	paused := make(chan []graph.Span)
	resume := make(chan struct{})
	var offered [][]graph.Span
	rec := &recorder{fail: func(ctx context.Context, call int, spans []graph.Span) error {
		if call > refusals {
			return nil
		}
		offered = append(offered, slices.Clone(spans))
		if call == refusals {
			// Hold the last refusal until the test has looked at the
			// group and the metrics.
			select {
			case paused <- spans:
			case <-ctx.Done():
				return ctx.Err()
			}
			<-resume
		}
		if call%2 == 0 {
			return fmt.Errorf("clickhouse: insert spans: %w", store.ErrUnavailable)
		}
		return fmt.Errorf("pipeline: %w", pipeline.ErrBackpressure)
	}}
	cfg := testConfig(t, brokers)
	cfg.LagInterval = 20 * time.Millisecond
	r, stop := start(t, cfg, rec)

	select {
	case <-paused:
	case <-time.After(10 * time.Second):
		t.Fatal("the store was not offered the batch")
	}
	for p, o := range offsets(t, brokers, DefaultGroupID) {
		if o.Committed != -1 {
			t.Errorf("partition %d committed at %d while the store refuses", p, o.Committed)
		}
	}
	waitFor(t, 5*time.Second, "lag of everything produced", func() bool {
		sum := 0.0
		for p := range 3 {
			sum += testutil.ToFloat64(r.m.lag.WithLabelValues(fmt.Sprint(p)))
		}
		return sum == float64(len(recs))
	})
	if g := testutil.ToFloat64(r.m.paused); g != 1 {
		t.Errorf("paused gauge %v while refused", g)
	}
	close(resume)

	waitFor(t, 10*time.Second, "all spans", func() bool { return rec.numAccepted() >= totalSpans(recs) })
	waitFor(t, 5*time.Second, "offsets committed", func() bool { return allCommitted(t, brokers, DefaultGroupID) })
	waitFor(t, 5*time.Second, "lag 0", func() bool {
		for p := range 3 {
			if testutil.ToFloat64(r.m.lag.WithLabelValues(fmt.Sprint(p))) != 0 {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for i := 1; i < len(offered); i++ {
		if !slices.Equal(offered[i], offered[0]) {
			t.Fatalf("refusal %d was offered another batch than the first refusal", i+1)
		}
	}
	got := rec.spans()
	if len(got) != totalSpans(recs) {
		t.Fatalf("%d spans delivered, want exactly the %d produced", len(got), totalSpans(recs))
	}
	checkPartitionOrder(t, recs, got)
	if first := rec.accepted[0]; !slices.Equal(first, offered[0]) {
		t.Fatal("the first accepted batch is not the batch that was refused")
	}
	bp := testutil.ToFloat64(r.m.retries.WithLabelValues(reasonBackpressure))
	un := testutil.ToFloat64(r.m.retries.WithLabelValues(reasonUnavailable))
	if bp != 3 || un != 2 {
		t.Errorf("retries: backpressure %v, unavailable %v; want 3, 2", bp, un)
	}
	if s := testutil.ToFloat64(r.m.pausedSeconds); s <= 0 {
		t.Errorf("paused seconds %v", s)
	}
	if g := testutil.ToFloat64(r.m.paused); g != 0 {
		t.Errorf("paused gauge %v after resuming", g)
	}
}

// TestRestartRereadsUncommitted: a member stopped while the store holds a
// batch commits nothing of it; the next member of the group reads it again,
// and nothing that was committed.
func TestRestartRereadsUncommitted(t *testing.T) {
	brokers := cluster(t, 2)
	var recs []record
	for i := range 20 {
		recs = append(recs, traceRecord(t, int32(i%2), uint64(i), uint32(i), 1, false))
	}
	produce(t, brokers, recs)

	// The first member's store accepts two batches, then hangs on the
	// third until the member is stopped.
	hung := make(chan []graph.Span, 1)
	first := &recorder{fail: func(ctx context.Context, call int, spans []graph.Span) error {
		if call <= 2 {
			return nil
		}
		select {
		case hung <- slices.Clone(spans):
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	cfg := testConfig(t, brokers)
	cfg.MaxBatchMessages = 4
	_, stop := start(t, cfg, first)
	var lost []graph.Span
	select {
	case lost = <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("the store was not offered a third batch")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	committedBefore := offsets(t, brokers, DefaultGroupID)
	done := first.msgs()
	if len(done) != 8 {
		t.Fatalf("first member stored %d records, want 8 (two batches of 4)", len(done))
	}
	n := 0
	for _, p := range committedBefore {
		n += int(max(p.Committed, 0))
	}
	if n != len(done) {
		t.Fatalf("%d records committed, want the %d stored", n, len(done))
	}

	second := &recorder{}
	_, stop2 := start(t, testConfig(t, brokers), second)
	waitFor(t, 10*time.Second, "the rest", func() bool { return second.numAccepted() >= len(recs)-len(done) })
	waitFor(t, 5*time.Second, "offsets committed", func() bool { return allCommitted(t, brokers, DefaultGroupID) })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	again := second.msgs()
	for m := range again {
		if done[m] {
			t.Errorf("record %d was committed, yet read again", m)
		}
	}
	for _, s := range lost {
		if !again[msgOf(s.SpanID)] {
			t.Errorf("record %d of the uncommitted batch was not read again", msgOf(s.SpanID))
		}
	}
	for i := range recs {
		if !done[uint32(i)] && !again[uint32(i)] {
			t.Errorf("record %d never stored", i)
		}
	}
	checkPartitionOrder(t, recs, append(first.spans(), second.spans()...))
}

// TestKafkaCompression: record batches compressed as the collector's kafka
// exporter compresses them are read, every span stored once. The exporter
// (contrib v0.165) produces with franz-go: producer::compression none,
// gzip, snappy, lz4 or zstd becomes kgo.ProducerBatchCompression of that
// codec, with compression_params::level passed to WithLevel. kafka-go's
// Writer, which frames snappy differently (xerial), is read too. What the
// broker holds is checked to be compressed with each codec, so that a
// producer falling back to no compression cannot pass for a reader that
// decompresses.
func TestKafkaCompression(t *testing.T) {
	brokers := cluster(t, 1)
	franz := func(c kgo.CompressionCodec) func([]record) {
		return func(recs []record) { produce(t, brokers, recs, kgo.ProducerBatchCompression(c)) }
	}
	writer := func(c kafkago.Compression) func([]record) {
		return func(recs []record) { produceKafkaGo(t, brokers, recs, c) }
	}
	// codec: the batch attribute (Kafka's numbering: 0 none, 1 gzip,
	// 2 snappy, 3 lz4, 4 zstd).
	producers := []struct {
		name    string
		codec   uint8
		produce func([]record)
	}{
		{"franz-go none", 0, franz(kgo.NoCompression())},
		{"franz-go gzip", 1, franz(kgo.GzipCompression())},
		{"franz-go gzip level 9", 1, franz(kgo.GzipCompression().WithLevel(9))},
		{"franz-go snappy", 2, franz(kgo.SnappyCompression())},
		{"franz-go lz4", 3, franz(kgo.Lz4Compression())},
		{"franz-go zstd", 4, franz(kgo.ZstdCompression())},
		{"franz-go zstd level 4", 4, franz(kgo.ZstdCompression().WithLevel(4))},
		{"kafka-go gzip", 1, writer(kafkago.Gzip)},
		{"kafka-go snappy", 2, writer(kafkago.Snappy)},
		{"kafka-go lz4", 3, writer(kafkago.Lz4)},
		{"kafka-go zstd", 4, writer(kafkago.Zstd)},
	}
	var all []record
	var codecs []uint8
	for i, p := range producers {
		var recs []record
		for j := range 3 {
			n := i*3 + j
			recs = append(recs, traceRecord(t, 0, uint64(n), uint32(n), 20, n%2 == 1))
			codecs = append(codecs, p.codec)
		}
		p.produce(recs)
		all = append(all, recs...)
	}
	if got := storedCodecs(t, brokers, len(all)); !slices.Equal(got, codecs) {
		for i := range got {
			if got[i] != codecs[i] {
				t.Errorf("record %d (%s): stored with codec %d, want %d", i, producers[i/3].name, got[i], codecs[i])
			}
		}
		t.FailNow()
	}
	rec := &recorder{}
	r, stop := start(t, testConfig(t, brokers), rec)
	want := totalSpans(all)
	waitFor(t, 10*time.Second, "all spans", func() bool { return rec.numAccepted() >= want })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := rec.spans()
	if len(got) != want {
		t.Fatalf("%d spans stored, want %d", len(got), want)
	}
	checkPartitionOrder(t, all, got)
	if bad := testutil.ToFloat64(r.m.bad); bad != 0 {
		t.Fatalf("%v bad records", bad)
	}
}

// produceKafkaGo writes records to partition 0 with kafka-go's Writer,
// compressing its batches with c.
func produceKafkaGo(t *testing.T, brokers []string, recs []record, c kafkago.Compression) {
	t.Helper()
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(brokers...),
		Topic:        testTopic,
		Compression:  c,
		Balancer:     kafkago.BalancerFunc(func(kafkago.Message, ...int) int { return 0 }),
		BatchSize:    len(recs),
		BatchTimeout: 10 * time.Millisecond,
		RequiredAcks: kafkago.RequireOne,
	}
	defer w.Close()
	msgs := make([]kafkago.Message, len(recs))
	for i, r := range recs {
		if r.partition != 0 {
			t.Fatal("produceKafkaGo writes to partition 0 only")
		}
		msgs[i] = kafkago.Message{Key: r.key, Value: r.value}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// storedCodecs returns the compression codec of the batch holding each of
// the first n records of partition 0, read back with franz-go.
func storedCodecs(t *testing.T, brokers []string, n int) []uint8 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var codecs []uint8
	for len(codecs) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", len(codecs), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { codecs = append(codecs, r.Attrs.CompressionType()) })
	}
	return codecs[:n]
}

// TestStoreFailureStops: an error the store does not call temporary ends
// Run with it, and nothing is committed.
func TestStoreFailureStops(t *testing.T) {
	brokers := cluster(t, 1)
	produce(t, brokers, []record{traceRecord(t, 0, 1, 1, 2, false)})
	boom := errors.New("disk on fire")
	rec := &recorder{fail: func(context.Context, int, []graph.Span) error { return boom }}
	cfg := testConfig(t, brokers)
	r, err := NewReceiver(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = r.Run(ctx)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "offsets 0:0") {
		t.Fatalf("Run: %v, want the store's error with the batch's offsets", err)
	}
	for _, p := range offsets(t, brokers, DefaultGroupID) {
		if p.Committed != -1 {
			t.Fatalf("committed %d after a failed store", p.Committed)
		}
	}
	if err := r.Run(ctx); err == nil {
		t.Fatal("a second Run should fail")
	}
}

func TestConfig(t *testing.T) {
	next := &recorder{}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"defaults", Config{Brokers: []string{"k:9092"}}, ""},
		{"no brokers", Config{}, "no brokers"},
		{"empty broker", Config{Brokers: []string{""}}, "empty broker"},
		{"encoding", Config{Brokers: []string{"k:9092"}, Encoding: "jaeger_proto"}, `encoding "jaeger_proto"`},
		{"backoff", Config{Brokers: []string{"k:9092"}, MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "max backoff"},
		{"read backoff above default max", Config{Brokers: []string{"k:9092"}, ReadBackoffMin: 2 * time.Second}, ""},
		{"read backoff inverted", Config{Brokers: []string{"k:9092"}, ReadBackoffMin: time.Second, ReadBackoffMax: time.Millisecond}, "read backoff"},
		{"batch", Config{Brokers: []string{"k:9092"}, MaxBatchMessages: -1}, "max batch messages"},
		{"batch spans", Config{Brokers: []string{"k:9092"}, MaxBatchSpans: -1}, "max batch spans"},
		{"sampling", Config{Brokers: []string{"k:9092"}, Sampling: ingest.SamplingConfig{Probability: 1.5}}, "kafka: config: sampling probability: 1.5: want 0 < p ≤ 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReceiver(tc.cfg, next)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			case tc.want == "":
				if r.cfg.Topic != DefaultTopic || r.cfg.GroupID != DefaultGroupID || r.cfg.Encoding != EncodingProto {
					t.Fatalf("defaults not applied: %+v", r.cfg)
				}
			}
		})
	}
	if _, err := NewReceiver(Config{Brokers: []string{"k:9092"}}, nil); err == nil {
		t.Fatal("no consumer should be an error")
	}
	reg := prometheus.NewRegistry()
	if _, err := NewReceiver(Config{Brokers: []string{"k:9092"}, Registerer: reg}, next); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReceiver(Config{Brokers: []string{"k:9092"}, Registerer: reg}, next); err == nil {
		t.Fatal("a second receiver of the same topic on one registry should fail")
	}
	if _, err := NewReceiver(Config{Brokers: []string{"k:9092"}, Topic: "other", Registerer: reg}, next); err != nil {
		t.Fatalf("a receiver of another topic: %v", err)
	}
}

func TestLag(t *testing.T) {
	for _, tc := range []struct {
		p    partitionOffsets
		want int64
	}{
		{partitionOffsets{First: 0, Last: 10, Committed: -1}, 10},
		{partitionOffsets{First: 4, Last: 10, Committed: -1}, 6},
		{partitionOffsets{First: 0, Last: 10, Committed: 7}, 3},
		{partitionOffsets{First: 8, Last: 10, Committed: 3}, 2}, // committed fell out of retention
		{partitionOffsets{First: 0, Last: 10, Committed: 10}, 0},
	} {
		if got := tc.p.lag(); got != tc.want {
			t.Errorf("%+v: lag %d, want %d", tc.p, got, tc.want)
		}
	}
}
