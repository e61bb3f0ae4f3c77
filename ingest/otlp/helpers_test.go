package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/graph"
)

// recorder is a pipeline.Consumer that records what it is given. It can be
// told to fail, and to block until released.
type recorder struct {
	mu    sync.Mutex
	spans []graph.Span
	calls int
	err   error         // returned by Consume when set
	gate  chan struct{} // when set, Consume waits for it to close
	enter chan struct{} // when set, Consume signals it on entry
	full  bool          // Saturated's answer
}

// Saturated implements pipeline.Saturated.
func (r *recorder) Saturated() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.full
}

func (r *recorder) Consume(ctx context.Context, spans []graph.Span) error {
	r.mu.Lock()
	gate, enter := r.gate, r.enter
	r.mu.Unlock()
	if enter != nil {
		enter <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.err != nil {
		return r.err
	}
	// The receiver reuses the slice: keep a copy.
	r.spans = append(r.spans, spans...)
	return nil
}

func (r *recorder) setErr(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// taken returns the spans stored so far, sorted by (trace id, span id).
func (r *recorder) taken() []graph.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.spans)
	slices.SortFunc(out, func(a, b graph.Span) int {
		if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
			return c
		}
		return bytes.Compare(a.SpanID[:], b.SpanID[:])
	})
	return out
}

// consumed returns the number of Consume calls that got through the gate.
func (r *recorder) consumed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.spans, r.calls, r.err = nil, 0, nil
	r.mu.Unlock()
}

// startServer starts a Server on loopback ports and shuts it down when the
// test ends.
func startServer(t testing.TB, cfg Config, c *recorder) *Server {
	t.Helper()
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = "127.0.0.1:0"
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	s, err := New(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// spanDefect makes a span invalid in one of the ways the receiver rejects.
type spanDefect int

const (
	okSpan spanDefect = iota
	zeroTraceID
	zeroSpanID
	zeroStart
)

// testTraces returns a request of n spans: trace id (seed, i/10) and span id
// i+1, spread over two resources. defects, when given, has one entry per
// span.
func testTraces(seed byte, n int, defects ...spanDefect) ptrace.Traces {
	td := ptrace.NewTraces()
	var spans [2]ptrace.SpanSlice
	for r := range spans {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", r))
		spans[r] = rs.ScopeSpans().AppendEmpty().Spans()
	}
	for i := range n {
		sp := spans[i%2].AppendEmpty()
		tid, sid := wantIDs(seed, i)
		var d spanDefect
		if i < len(defects) {
			d = defects[i]
		}
		if d != zeroTraceID {
			sp.SetTraceID(pcommon.TraceID(tid))
		}
		if d != zeroSpanID {
			sp.SetSpanID(pcommon.SpanID(sid))
		}
		sp.SetName(fmt.Sprintf("op-%d", i))
		sp.SetKind(ptrace.SpanKindServer)
		start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano() + int64(i)*1000
		if d != zeroStart {
			sp.SetStartTimestamp(pcommon.Timestamp(start))
		}
		sp.SetEndTimestamp(pcommon.Timestamp(start + 500))
		sp.Attributes().PutStr("http.request.method", "GET")
		sp.Attributes().PutStr("http.route", "/r")
		sp.Attributes().PutInt("http.response.status_code", 200)
	}
	return td
}

// wantIDs returns the ids testTraces gives span i.
func wantIDs(seed byte, i int) (graph.TraceID, graph.SpanID) {
	var tid graph.TraceID
	var sid graph.SpanID
	tid[0] = seed
	tid[15] = 0xaa
	binary.BigEndian.PutUint32(tid[4:], uint32(i/10))
	binary.BigEndian.PutUint64(sid[:], uint64(i+1))
	return tid, sid
}

// checkIDs checks that got holds exactly the spans of testTraces(seed, n)
// whose index keep accepts.
func checkIDs(t *testing.T, got []graph.Span, seed byte, n int, keep func(i int) bool) {
	t.Helper()
	var want []graph.Span
	for i := range n {
		if keep == nil || keep(i) {
			tid, sid := wantIDs(seed, i)
			want = append(want, graph.Span{TraceID: tid, SpanID: sid})
		}
	}
	slices.SortFunc(want, func(a, b graph.Span) int {
		if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
			return c
		}
		return bytes.Compare(a.SpanID[:], b.SpanID[:])
	})
	if len(got) != len(want) {
		t.Fatalf("stored %d spans, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].TraceID != want[i].TraceID || got[i].SpanID != want[i].SpanID {
			t.Fatalf("span %d: stored %s/%s, want %s/%s", i, got[i].TraceID, got[i].SpanID, want[i].TraceID, want[i].SpanID)
		}
		if got[i].Service == "" || got[i].Operation != "GET /r" {
			t.Fatalf("span %d not decoded: %+v", i, got[i])
		}
	}
}

func protoBody(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonBody(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// reply is an HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// post sends an HTTP request; hdr holds extra headers as name, value pairs.
func post(t testing.TB, client *http.Client, method, url string, body io.Reader, contentType, encoding string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, url, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// metricValue returns the value of a counter (or a histogram's count) with
// the given labels, 0 when absent.
func metricValue(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(m, labels[i]) != labels[i+1] {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
		}
	}
	return 0
}

// waitMetric waits until metricValue returns want, for up to 5 s: grpc
// reports an RPC's end to the stats handler after the client has its
// answer.
func waitMetric(t testing.TB, g prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := metricValue(t, g, name, labels...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

var errTest = errors.New("test failure")
