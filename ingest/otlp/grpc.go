package otlp

import (
	"context"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"
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

// grpcExportHandler is the MethodDesc handler of Export. grpc receives and
// decompresses the message in dec, and answers its failures there itself.
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

	// Decoded before admission, as grpc receives a message before any
	// handler runs: a refused request's spans are counted, and a request
	// that does not decode is answered INVALID_ARGUMENT (OTLP: a
	// malformed request; not retried), whatever the load.
	start := time.Now()
	msg := req.bytes()
	if err := decompressFailure(msg); err != nil {
		req.free()
		return resp, status.Errorf(codes.InvalidArgument, "cannot decompress the message: %v", err)
	}
	spans, err := w.dec.AppendRequest(w.spans[:0], msg, false)
	req.free()
	if err != nil {
		return resp, status.Errorf(codes.InvalidArgument, "cannot decode the message as an OTLP protobuf ExportTraceServiceRequest: %v", err)
	}
	w.spans = spans

	if !s.acquire(ctx) {
		if ctx.Err() != nil {
			return resp, status.FromContextError(ctx.Err()).Err()
		}
		if n := len(w.spans); n > 0 {
			s.metrics.rejected[protoGRPC][reasonBusy].Add(float64(n))
		}
		noteRefusal(ctx, refBusy)
		return resp, s.unavailableStatus(busyMessage)
	}
	defer s.release()

	o := s.consume(ctx, protoGRPC, w, start)
	if o.fail != failNone {
		noteRefusal(ctx, o.fail.refusal(), "spans", o.offered(), "err", o.err)
	}
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
	if !s.auth.Allow(firstHeader(info.Header.Get("authorization"))) {
		// Refused before the stats handler sees the RPC: count it here.
		const msg = "missing or invalid bearer token"
		s.metrics.grpcRequest(codes.Unauthenticated)
		s.refused(protoGRPC, refUnauthenticated, codes.Unauthenticated.String(), msg, func() []any {
			return []any{"method", clip(info.FullMethodName), "user_agent", clip(firstHeader(info.Header.Get("user-agent")))}
		})
		return ctx, status.Error(codes.Unauthenticated, msg)
	}
	return ctx, nil
}

func firstHeader(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// rpcNote is where an RPC's handler notes why it refused the request, for
// grpcStats to count and log once grpc has answered, where the status code
// alone does not say (busy, backpressure, unavailable, and what the
// spans were). Other refusals, grpc's own answers among them (an unknown
// method or grpc-encoding, a message too large), have no note: grpcStats
// reads their reason from the code.
type rpcNote struct {
	why      refusal
	set      bool
	attrs    []any
	encoding string // the request's grpc-encoding
}

type rpcNoteKey struct{}

// noteRefusal notes why the RPC of ctx is refused.
func noteRefusal(ctx context.Context, why refusal, attrs ...any) {
	if n, ok := ctx.Value(rpcNoteKey{}).(*rpcNote); ok {
		n.why, n.set, n.attrs = why, true, attrs
	}
}

// grpcStats counts finished RPCs by status code, including those grpc
// answers itself before Export runs (a message it cannot decode, or one
// too large), and counts and logs every refused one by reason.
type grpcStats struct{ s *Server }

func (g grpcStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, rpcNoteKey{}, &rpcNote{})
}
func (g grpcStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (g grpcStats) HandleConn(context.Context, stats.ConnStats) {}

func (g grpcStats) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	// Of the events of an RPC, only these two are read.
	var end *stats.End
	switch rs := rs.(type) {
	case *stats.InHeader:
		if note, _ := ctx.Value(rpcNoteKey{}).(*rpcNote); note != nil {
			note.encoding = rs.Compression
		}
		return
	case *stats.End:
		end = rs
	default:
		return
	}
	note, _ := ctx.Value(rpcNoteKey{}).(*rpcNote)
	st := status.Convert(end.Error)
	g.s.metrics.grpcRequest(st.Code())
	if st.Code() == codes.OK {
		return
	}
	var why refusal
	switch {
	case note != nil && note.set:
		why = note.why
	case st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "grpc-encoding"):
		why = refEncoding
	case st.Code() == codes.Unimplemented:
		why = refNotFound
	case st.Code() == codes.ResourceExhausted:
		why = refTooLarge
	case st.Code() == codes.Canceled, st.Code() == codes.DeadlineExceeded:
		why = refCanceled
	case st.Code() == codes.InvalidArgument:
		why = refMalformed
	default:
		why = refInternal
	}
	g.s.refused(protoGRPC, why, st.Code().String(), st.Message(), func() []any {
		var attrs []any
		if note != nil {
			attrs = append(note.attrs, "grpc_encoding", clip(note.encoding))
		}
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			attrs = append(attrs, "user_agent", clip(firstHeader(md.Get("user-agent"))))
		}
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			attrs = append(attrs, "remote", p.Addr.String())
		}
		return attrs
	})
}
