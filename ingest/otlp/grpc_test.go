package otlp

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
)

// dialGRPC connects to the gRPC receiver as the Collector's exporter does:
// gzip on every call.
func dialGRPC(t testing.TB, s *Server, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)),
	}, opts...)
	conn, err := grpc.NewClient(s.GRPCAddr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func export(t testing.TB, c ptraceotlp.GRPCClient, ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Export(ctx, req)
}

func TestGRPCStoresSpans(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg}, rec)
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))

	const n = 41
	resp, err := export(t, c, context.Background(), ptraceotlp.NewExportRequestFromTraces(testTraces(7, n)))
	if err != nil {
		t.Fatal(err)
	}
	if ps := resp.PartialSuccess(); ps.RejectedSpans() != 0 || ps.ErrorMessage() != "" {
		t.Errorf("partial success %d %q on a clean request", ps.RejectedSpans(), ps.ErrorMessage())
	}
	checkIDs(t, rec.taken(), 7, n, nil)

	// Rejected spans: a partial success, the rest stored.
	rec.reset()
	defects := []spanDefect{zeroSpanID, okSpan, zeroTraceID, zeroStart, zeroStart}
	resp, err = export(t, c, context.Background(), ptraceotlp.NewExportRequestFromTraces(testTraces(8, n, defects...)))
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.PartialSuccess()
	want := "4 of 41 spans rejected: 1 with an all-zero (invalid) trace id, 1 with an all-zero (invalid) span id, 2 without a start time"
	if ps.RejectedSpans() != 4 || ps.ErrorMessage() != want {
		t.Errorf("partial success (%d, %q), want (4, %q)", ps.RejectedSpans(), ps.ErrorMessage(), want)
	}
	checkIDs(t, rec.taken(), 8, n, func(i int) bool { return i >= len(defects) || defects[i] == okSpan })

	// An empty request is a success that stores nothing.
	rec.reset()
	if _, err := export(t, c, context.Background(), ptraceotlp.NewExportRequest()); err != nil {
		t.Errorf("empty request: %v", err)
	}
	if rec.consumed() != 0 {
		t.Errorf("Consume called for an empty request")
	}

	if got := metricValue(t, reg, "stormradius_otlp_spans_received_total", "protocol", "grpc"); got != 2*n {
		t.Errorf("received metric %v, want %d", got, 2*n)
	}
	if got := metricValue(t, reg, "stormradius_otlp_spans_accepted_total", "protocol", "grpc"); got != 2*n-4 {
		t.Errorf("accepted metric %v, want %d", got, 2*n-4)
	}
	waitMetric(t, reg, 3, "stormradius_otlp_requests_total", "protocol", "grpc", "status", "OK")
}

func TestGRPCConsumerFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg, RetryAfter: 3 * time.Second}, rec)
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))
	req := ptraceotlp.NewExportRequestFromTraces(testTraces(1, 6))
	for _, tc := range []struct {
		err   error
		code  codes.Code
		retry bool
	}{
		{fmt.Errorf("pipeline: admit: %w", pipeline.ErrBackpressure), codes.Unavailable, true},
		{fmt.Errorf("clickhouse: insert spans: %w", store.ErrUnavailable), codes.Unavailable, true},
		{fmt.Errorf("clickhouse: insert spans: %w", errTest), codes.Internal, false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			rec.reset()
			rec.setErr(tc.err)
			_, err := export(t, c, context.Background(), req)
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code %v (%v), want %v", st.Code(), err, tc.code)
			}
			var delay time.Duration
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					delay = ri.GetRetryDelay().AsDuration()
				}
			}
			if tc.retry && delay != 3*time.Second {
				t.Errorf("RetryInfo delay %v, want 3s", delay)
			}
			if !tc.retry && delay != 0 {
				t.Errorf("RetryInfo on a permanent error")
			}
		})
	}
	waitMetric(t, reg, 2, "stormradius_otlp_requests_total", "protocol", "grpc", "status", "Unavailable")
	if got := metricValue(t, reg, "stormradius_otlp_spans_rejected_total", "protocol", "grpc", "reason", "backpressure"); got != 6 {
		t.Errorf("backpressure rejections %v, want 6", got)
	}
}

// rawCodec sends bytes as they are, to put what no protobuf library would
// encode on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

func TestGRPCBadMessages(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg, MaxBodyBytes: 64 << 10}, rec)
	conn := dialGRPC(t, s)
	const method = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

	// Not protobuf: a malformed request, INVALID_ARGUMENT as OTLP asks
	// (not INTERNAL, a server fault).
	var out []byte
	err := conn.Invoke(context.Background(), method, []byte("\xff\xff\xff\xff garbage"), &out, grpc.ForceCodecV2(rawCodec{}))
	if code := status.Code(err); code != codes.InvalidArgument {
		t.Errorf("garbage: code %v (%v), want InvalidArgument", code, err)
	}
	// Over MaxBodyBytes once decompressed (the client sends it gzipped).
	big := protoBody(t, testTraces(1, 2000))
	err = conn.Invoke(context.Background(), method, big, &out, grpc.ForceCodecV2(rawCodec{}))
	if code := status.Code(err); code != codes.ResourceExhausted {
		t.Errorf("too large: code %v (%v), want ResourceExhausted", code, err)
	}
	if rec.consumed() != 0 {
		t.Errorf("Consume called for bad messages")
	}
	// Counted, although Export never saw them.
	waitMetric(t, reg, 1, "stormradius_otlp_requests_total", "protocol", "grpc", "status", "InvalidArgument")
	waitMetric(t, reg, 1, "stormradius_otlp_requests_total", "protocol", "grpc", "status", "ResourceExhausted")
	waitMetric(t, reg, 1, "stormradius_otlp_requests_refused_total", "protocol", "grpc", "reason", "malformed")
	waitMetric(t, reg, 1, "stormradius_otlp_requests_refused_total", "protocol", "grpc", "reason", "too_large")
	// The connection still works.
	if _, err := export(t, ptraceotlp.NewGRPCClient(conn), context.Background(),
		ptraceotlp.NewExportRequestFromTraces(testTraces(2, 3))); err != nil || len(rec.taken()) != 3 {
		t.Errorf("good request after bad ones: %v, %d spans", err, len(rec.taken()))
	}
}

func TestAuth(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg, BearerTokens: []string{"first-token", "second-token"}}, rec)
	body := protoBody(t, testTraces(1, 2))
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))
	req := ptraceotlp.NewExportRequestFromTraces(testTraces(1, 2))

	for _, tc := range []struct {
		name, header string
		ok           bool
	}{
		{"none", "", false},
		{"wrong", "Bearer nope", false},
		{"prefix of a token", "Bearer first", false},
		{"token without scheme", "second-token", false},
		{"basic", "Basic c2Vjb25kLXRva2Vu", false},
		{"first", "Bearer first-token", true},
		{"second, lower-case scheme", "bearer second-token", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.header != "" {
				hdr = []string{"Authorization", tc.header}
			}
			r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "", hdr...)
			ctx := context.Background()
			if tc.header != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.header)
			}
			_, err := export(t, c, ctx, req)
			if tc.ok {
				if r.status != 200 {
					t.Errorf("HTTP status %d, want 200", r.status)
				}
				if err != nil {
					t.Errorf("gRPC: %v", err)
				}
				return
			}
			if r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("HTTP status %d (WWW-Authenticate %q), want 401", r.status, r.header.Get("WWW-Authenticate"))
			}
			if code := status.Code(err); code != codes.Unauthenticated {
				t.Errorf("gRPC code %v, want Unauthenticated", code)
			}
		})
	}
	if got := len(rec.taken()); got != 2*2*2 {
		t.Errorf("%d spans stored, want 8 (2 accepted requests per protocol)", got)
	}
	waitMetric(t, reg, 5, "stormradius_otlp_requests_total", "protocol", "grpc", "status", "Unauthenticated")
}

// metadataBearer returns ctx carrying a bearer token for gRPC calls.
func metadataBearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// TestGRPCRawRequests sends protobuf bytes as they are, compressed and not,
// and checks that the receiver stores what the ingest.Decoder makes of
// them: a large request (gzip inflates it into several buffers, which the
// codec joins), one with only the deprecated instrumentation_library_spans
// (which every OTLP receiver still reads), one nested too deep (refused).
func TestGRPCRawRequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg}, rec)
	plain, err := grpc.NewClient(s.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	conns := map[string]*grpc.ClientConn{"gzip": dialGRPC(t, s), "identity": plain}

	ids := func(i byte) []byte { return bytes.Repeat([]byte{i}, 16) }
	span := protowire.AppendTag(nil, 1, protowire.BytesType)
	span = protowire.AppendBytes(span, ids(7))
	span = protowire.AppendTag(span, 2, protowire.BytesType)
	span = protowire.AppendBytes(span, ids(8)[:8])
	span = protowire.AppendTag(span, 5, protowire.BytesType)
	span = protowire.AppendString(span, "old-op")
	span = protowire.AppendTag(span, 7, protowire.Fixed64Type)
	span = protowire.AppendFixed64(span, 1_700_000_000_000_000_000)
	msg := func(f protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, f, protowire.BytesType), b)
	}
	deprecated := msg(1, msg(1000, msg(2, span)))

	deep := []byte{0x0a, 0x01, 'x'} // AnyValue{string_value: "x"}
	for range 60 {
		deep = msg(5, msg(1, deep))
	}
	deepReq := msg(1, msg(2, msg(2, append(append([]byte{}, span...), msg(9, append(msg(1, []byte("k")), msg(2, deep)...))...))))

	for name, conn := range conns {
		for _, tc := range []struct {
			what string
			body []byte
		}{
			{"large", protoBody(t, testTraces(5, 5000))},
			{"deprecated", deprecated},
		} {
			t.Run(name+"/"+tc.what, func(t *testing.T) {
				rec.reset()
				var out []byte
				if err := conn.Invoke(context.Background(), grpcExportPath, tc.body, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
					t.Fatal(err)
				}
				want, err := ingest.NewDecoder(ingest.DecoderConfig{}).AppendRequest(nil, tc.body, false)
				if err != nil {
					t.Fatal(err)
				}
				got := rec.taken()
				slices.SortFunc(want, func(a, b graph.Span) int {
					if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
						return c
					}
					return bytes.Compare(a.SpanID[:], b.SpanID[:])
				})
				if len(got) != len(want) || len(got) == 0 {
					t.Fatalf("stored %d spans, want %d", len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("span %d: stored %+v, want %+v", i, got[i], want[i])
					}
				}
			})
		}
		t.Run(name+"/too deep", func(t *testing.T) {
			rec.reset()
			var out []byte
			err := conn.Invoke(context.Background(), grpcExportPath, deepReq, &out, grpc.ForceCodecV2(rawCodec{}))
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "nested deeper than 100") {
				t.Fatalf("got %v, want INVALID_ARGUMENT about the nesting", err)
			}
			if rec.consumed() != 0 {
				t.Fatal("Consume called for a request nested too deep")
			}
		})
	}
}
