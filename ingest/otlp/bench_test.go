package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/graph"
)

// discard is a Consumer that stores nothing, instantly.
type discard struct{}

func (discard) Consume(context.Context, []graph.Span) error { return nil }

// benchRequest is an OTLP protobuf request of n spans shaped like an SDK's
// batch: five services, HTTP server and client spans with the attributes
// real instrumentation writes (10–12 each), claim headers on errors.
func benchRequest(b *testing.B, n int) []byte {
	td := ptrace.NewTraces()
	services := []string{"frontend", "customer", "driver", "route", "redis-proxy"}
	var spanSlices []ptrace.SpanSlice
	for _, name := range services {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", name)
		ra.PutStr("service.version", "1.8.2")
		ra.PutStr("service.instance.id", name+"-7d9f8c-x2")
		ra.PutStr("host.name", "node-"+name)
		ra.PutStr("telemetry.sdk.language", "go")
		ra.PutStr("telemetry.sdk.version", "1.38.0")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
		spanSlices = append(spanSlices, ss.Spans())
	}
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	for i := range n {
		sp := spanSlices[i%len(spanSlices)].AppendEmpty()
		var tid pcommon.TraceID
		var sid pcommon.SpanID
		tid[0], tid[1], tid[15] = byte(i/15), byte(i/15>>8), 1
		sid[0], sid[1], sid[7] = byte(i), byte(i>>8), 1
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		if i%15 != 0 {
			psid := sid
			psid[0]--
			sp.SetParentSpanID(psid)
		}
		sp.SetStartTimestamp(pcommon.Timestamp(start + int64(i)*1e5))
		sp.SetEndTimestamp(pcommon.Timestamp(start + int64(i)*1e5 + 3e6))
		a := sp.Attributes()
		status := int64(200)
		if i%7 == 0 {
			status = 503
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
		if i%2 == 0 {
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetName("GET /dispatch")
			a.PutStr("http.request.method", "GET")
			a.PutStr("http.route", "/dispatch")
			a.PutStr("url.path", fmt.Sprintf("/dispatch?customer=%d", i))
			a.PutStr("url.scheme", "http")
			a.PutStr("server.address", "0.0.0.0")
			a.PutInt("server.port", 8080)
			a.PutStr("network.protocol.version", "1.1")
			a.PutStr("user_agent.original", "Go-http-client/1.1")
			a.PutStr("client.address", "10.0.3.17")
			a.PutInt("http.response.status_code", status)
		} else {
			sp.SetKind(ptrace.SpanKindClient)
			sp.SetName("GET")
			a.PutStr("http.request.method", "GET")
			a.PutStr("url.full", fmt.Sprintf("http://customer:8081/customer?customer=%d", i))
			a.PutStr("server.address", "customer")
			a.PutInt("server.port", 8081)
			a.PutStr("network.protocol.version", "1.1")
			a.PutInt("http.response.status_code", status)
			a.PutInt("http.request.resend_count", int64(i%3))
			a.PutBool("retry.criteria_satisfied", i%5 == 0)
		}
		if status >= 500 {
			a.PutEmptySlice("http.response.header.x-error-claim").AppendEmpty().SetStr("claimed")
		}
	}
	return protoBody(b, td)
}

// BenchmarkReceiverProto1000 measures 1000-span OTLP protobuf requests
// into a Consumer that discards them, beside pdata's plain UnmarshalProto
// of the same bytes (the least any receiver built on pdata can cost):
//
//   - http: end to end over loopback (client allocations included);
//   - handler: ServeHTTP called directly, the receiver's own cost;
//   - grpc: end to end over loopback with gzip, as the Collector sends
//     (client marshalling and both sides' compression included);
//   - pdata: ptrace.ProtoUnmarshaler.UnmarshalTraces alone.
func BenchmarkReceiverProto1000(b *testing.B) {
	const n = 1000
	body := benchRequest(b, n)
	spansPerSec := func(b *testing.B) {
		b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "spans/s")
	}

	b.Run("http", func(b *testing.B) {
		s, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DisableGRPC: true}, discard{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer s.Shutdown(context.Background())
		url := tracesURL(s)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		defer client.CloseIdleConnections()
		rd := bytes.NewReader(body)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			rd.Reset(body)
			req, _ := http.NewRequest(http.MethodPost, url, rd)
			req.Header.Set("Content-Type", contentTypeProto)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		spansPerSec(b)
	})

	b.Run("handler", func(b *testing.B) {
		s, err := New(Config{}, discard{})
		if err != nil {
			b.Fatal(err)
		}
		h := s.Handler()
		rd := bytes.NewReader(body)
		req := httptest.NewRequest(http.MethodPost, TracesPath, rd)
		req.Header.Set("Content-Type", contentTypeProto)
		rw := &nullWriter{h: http.Header{}}
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			rd.Reset(body)
			req.Body = io.NopCloser(rd)
			req.ContentLength = int64(len(body))
			clear(rw.h)
			h.ServeHTTP(rw, req)
			if rw.status != 200 {
				b.Fatalf("status %d", rw.status)
			}
		}
		spansPerSec(b)
	})

	b.Run("grpc", func(b *testing.B) {
		s, err := New(Config{GRPCAddr: "127.0.0.1:0", DisableHTTP: true}, discard{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		defer s.Shutdown(context.Background())
		c := ptraceotlp.NewGRPCClient(dialGRPC(b, s))
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := c.Export(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
		spansPerSec(b)
	})

	b.Run("pdata", func(b *testing.B) {
		var u ptrace.ProtoUnmarshaler
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			td, err := u.UnmarshalTraces(body)
			if err != nil || td.SpanCount() != n {
				b.Fatal(err)
			}
		}
		spansPerSec(b)
	})
}

// nullWriter is a ResponseWriter that keeps only the status.
type nullWriter struct {
	h      http.Header
	status int
}

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nullWriter) WriteHeader(status int)      { w.status = status }

// BenchmarkReceiverRatio alternates, within each iteration, pdata's
// UnmarshalProto and the HTTP handler on the same 1000-span request, and
// reports the median of the per-iteration ratios of the handler's time
// over pdata's: on a shared machine, measuring both side by side, and
// taking a median, keeps load changes and GC pauses out of the ratio.
func BenchmarkReceiverRatio(b *testing.B) {
	const n = 1000
	body := benchRequest(b, n)
	s, err := New(Config{}, discard{})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	rd := bytes.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, TracesPath, rd)
	req.Header.Set("Content-Type", contentTypeProto)
	rw := &nullWriter{h: http.Header{}}
	var u ptrace.ProtoUnmarshaler
	var tPdata, tHandler time.Duration
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := u.UnmarshalTraces(body); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		req.ContentLength = int64(len(body))
		clear(rw.h)
		h.ServeHTTP(rw, req)
		dp, dh := t1.Sub(t0), time.Since(t1)
		tPdata += dp
		tHandler += dh
		ratios = append(ratios, float64(dh)/float64(dp))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "handler/pdata")
	b.ReportMetric(float64(b.N)*n/tHandler.Seconds(), "handler-spans/s")
	b.ReportMetric(float64(b.N)*n/tPdata.Seconds(), "pdata-spans/s")
}
