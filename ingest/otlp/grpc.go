package otlp

import (
	"context"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	// The Collector's otlp exporter compresses with gzip by default: the
	// server must know the codec (grpc registers it process-wide).
	_ "google.golang.org/grpc/encoding/gzip"
)

// grpcService is the OTLP TraceService.
type grpcService struct {
	ptraceotlp.UnimplementedGRPCServer
	s *Server
}

// Export stores the spans of one request; see the package documentation
// for every answer.
func (g *grpcService) Export(ctx context.Context, req ptraceotlp.ExportRequest) (resp ptraceotlp.ExportResponse, err error) {
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
	if !s.acquire(ctx) {
		if ctx.Err() != nil {
			return resp, status.FromContextError(ctx.Err()).Err()
		}
		if n := req.Traces().SpanCount(); n > 0 {
			s.metrics.rejected[protoGRPC][reasonBusy].Add(float64(n))
		}
		return resp, s.unavailableStatus(busyMessage)
	}
	defer s.release()
	w := s.getWork()
	defer s.putWork(w)

	start := time.Now()
	w.spans = w.dec.AppendTraces(w.spans[:0], req.Traces())
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
