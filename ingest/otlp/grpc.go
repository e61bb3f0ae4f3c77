package otlp

import (
	"context"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	// The Collector's otlp exporter compresses with gzip by default: the
	// server must know the codec (grpc registers it process-wide).
	_ "google.golang.org/grpc/encoding/gzip"
)

// The OTLP TraceService, registered by hand (grpcServiceDesc) rather than
// through ptraceotlp: its Export receives the request's protobuf bytes (see
// grpcCodec), which the ingest.Decoder turns into spans directly, without
// building pdata's object model first. Answers are pdata's ExportResponse.
const (
	grpcServiceName = "opentelemetry.proto.collector.trace.v1.TraceService"
	grpcExportPath  = "/" + grpcServiceName + "/Export"
)

// grpcServiceDesc is what protoc-gen-go-grpc would generate for the
// TraceService, with our request type.
var grpcServiceDesc = grpc.ServiceDesc{
	ServiceName: grpcServiceName,
	HandlerType: (*grpcExporter)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Export", Handler: grpcExportHandler}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// grpcExporter is the service's handler type.
type grpcExporter interface {
	Export(ctx context.Context, req *grpcRequest) (ptraceotlp.ExportResponse, error)
}

// grpcRequest is one Export's request message as grpcCodec hands it over:
// its protobuf bytes, held (a reference to grpc's buffer, not a copy) until
// free.
type grpcRequest struct {
	buf mem.Buffer
}

func (r *grpcRequest) bytes() []byte {
	if r.buf == nil {
		return nil
	}
	return r.buf.ReadOnlyData()
}

func (r *grpcRequest) free() {
	if r.buf != nil {
		r.buf.Free()
		r.buf = nil
	}
}

// grpcCodec is the server's codec (grpc.ForceServerCodecV2): it hands an
// Export request over as its bytes, and marshals pdata's ExportResponse;
// anything else goes to the codec registered for protobuf.
type grpcCodec struct{ proto encoding.CodecV2 }

func (c grpcCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(ptraceotlp.ExportResponse); ok {
		b, err := r.MarshalProto()
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c grpcCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*grpcRequest); ok {
		// One buffer (the usual case) is referenced, not copied; pieces
		// (a decompressed message) are joined in a pooled buffer.
		r.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (grpcCodec) Name() string { return "proto" }

// grpcExportHandler is the MethodDesc handler of Export.
func grpcExportHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	req := &grpcRequest{}
	if err := dec(req); err != nil {
		return nil, err
	}
	defer req.free()
	if interceptor == nil {
		return srv.(grpcExporter).Export(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: grpcExportPath}
	return interceptor(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return srv.(grpcExporter).Export(ctx, req.(*grpcRequest))
	})
}

// grpcService is the OTLP TraceService.
type grpcService struct {
	s *Server
}

// Export stores the spans of one request; see the package documentation
// for every answer.
func (g *grpcService) Export(ctx context.Context, req *grpcRequest) (resp ptraceotlp.ExportResponse, err error) {
	s := g.s
	resp = ptraceotlp.NewExportResponse()
	// grpc does not recover handler panics, net/http does: one bad
	// request must not take the ingester down with every other one.
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("otlp: panic in gRPC Export", "panic", r, "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	w := s.getWork()
	defer s.putWork(w)

	// Decoded before admission, as grpc decodes a message before any
	// handler runs: a refused request's spans are counted, and a request
	// that does not decode gets grpc's own answer to an undecodable
	// message (INTERNAL), whatever the load.
	start := time.Now()
	spans, err := w.dec.AppendRequest(w.spans[:0], req.bytes(), false)
	req.free()
	if err != nil {
		return resp, status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	w.spans = spans

	if !s.acquire(ctx) {
		if ctx.Err() != nil {
			return resp, status.FromContextError(ctx.Err()).Err()
		}
		if n := len(w.spans); n > 0 {
			s.metrics.rejected[protoGRPC][reasonBusy].Add(float64(n))
		}
		return resp, s.unavailableStatus(busyMessage)
	}
	defer s.release()

	o := s.consume(ctx, protoGRPC, w, start)

	switch o.fail {
	case failNone:
	case failBackpressure, failUnavailable:
		return resp, s.unavailableStatus(o.fail.clientMessage())
	case failCanceled:
		return resp, status.FromContextError(ctx.Err()).Err()
	default:
		return resp, status.Error(codes.Internal, o.fail.clientMessage())
	}
	if n := o.permanentRejects(); n > 0 {
		ps := resp.PartialSuccess()
		ps.SetRejectedSpans(int64(n))
		ps.SetErrorMessage(o.rejectMessage())
	}
	return resp, nil
}

// unavailableStatus is UNAVAILABLE with a RetryInfo detail: the Collector
// retries UNAVAILABLE, waiting at least the RetryInfo delay.
func (s *Server) unavailableStatus(msg string) error {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(s.cfg.RetryAfter)}); err == nil {
		st = d
	}
	return st.Err()
}

// tapAuth refuses a stream without a valid bearer token before grpc reads
// its message: an unauthenticated client costs no decoding.
func (s *Server) tapAuth(ctx context.Context, info *tap.Info) (context.Context, error) {
	var h string
	if v := info.Header.Get("authorization"); len(v) > 0 {
		h = v[0]
	}
	if !s.auth.allow(h) {
		// Refused before the stats handler sees the RPC: count it here.
		s.metrics.grpcRequest(codes.Unauthenticated)
		return ctx, status.Error(codes.Unauthenticated, "missing or invalid bearer token")
	}
	return ctx, nil
}

// grpcStats counts finished RPCs by status code, including those grpc
// answers itself before Export runs (a message it cannot decode, or one
// too large).
type grpcStats struct{ m *metrics }

func (g grpcStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (g grpcStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (g grpcStats) HandleConn(context.Context, stats.ConnStats) {}

func (g grpcStats) HandleRPC(_ context.Context, rs stats.RPCStats) {
	if end, ok := rs.(*stats.End); ok {
		g.m.grpcRequest(status.Code(end.Error))
	}
}
