package ownership

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor is Handler for gRPC unary calls: a SERVER span
// (or the annotation of one a stats handler started), the tracking of the
// calls made with the handler's context, and on a failing status (UNKNOWN,
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE,
// DATA_LOSS) the claim in the response trailer, recorded on the span as
// error.claim and rpc.response.metadata.<header>.
func UnaryServerInterceptor(opts ...Option) grpc.UnaryServerInterceptor {
	c := newConfig(opts)
	tracer := c.tp.Tracer(scopeName)
	key := strings.ToLower(c.header)
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		method := ""
		if info != nil {
			method = info.FullMethod
		}
		span := trace.SpanFromContext(ctx)
		own := !isServerSpan(span)
		sctx := ctx
		if own {
			md, _ := metadata.FromIncomingContext(ctx)
			sctx = c.prop.Extract(sctx, mdCarrier(md))
			sctx, span = tracer.Start(sctx, strings.TrimPrefix(method, "/"), start...)
		}
		tr := &tracker{}
		resp, err := handler(&trackedCtx{Context: sctx, tr: tr}, req)
		code := status.Code(err)
		claim := Missing
		if failingCode(code) && !c.withoutClaim {
			claim = tr.claim()
			_ = grpc.SetTrailer(ctx, metadata.Pairs(key, claim.String()))
		}
		if span.IsRecording() {
			attrs := append(rpcAttrs(method, code), attribute.String("rpc.system", "grpc"))
			if claim != Missing {
				attrs = append(attrs, attribute.String("error.claim", claim.String()),
					attribute.StringSlice("rpc.response.metadata."+key, []string{claim.String()}))
			}
			span.SetAttributes(attrs...)
			if failingCode(code) {
				span.SetStatus(codes.Error, status.Convert(err).Message())
			}
		}
		if own {
			span.End()
		}
		return resp, err
	}
}

// UnaryClientInterceptor is Transport for gRPC unary calls: one CLIENT
// span per attempt (retry.attempt for the retries), the trace context in
// the outgoing metadata, and retries of failing statuses by the claim in
// the response trailer (or header), with the same policy, backoff, budget
// and deadline rules; grpc-retry-pushback-ms is honoured as Retry-After.
// gRPC does not say which methods are idempotent: install it on clients
// whose methods are safe to retry (as a gRPC retry policy would be), or
// use WithMaxRetries(0).
func UnaryClientInterceptor(opts ...Option) grpc.UnaryClientInterceptor {
	r := newRetrier(opts)
	key := strings.ToLower(r.cfg.header)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		failOpen := r.cfg.failOpen || isFailOpen(ctx)
		criteria := false
		for attempt := 0; ; attempt++ {
			actx, span := r.tracer.Start(ctx, strings.TrimPrefix(method, "/"), r.startOpts...)
			md, _ := metadata.FromOutgoingContext(actx)
			md = md.Copy()
			r.cfg.prop.Inject(actx, mdCarrier(md))
			var hdr, trl metadata.MD
			copts := append(append(make([]grpc.CallOption, 0, len(callOpts)+2), callOpts...), grpc.Header(&hdr), grpc.Trailer(&trl))
			err := invoker(metadata.NewOutgoingContext(actx, md), method, req, reply, cc, copts...)
			code := status.Code(err)
			vals := trl.Get(key)
			if len(vals) == 0 {
				vals = hdr.Get(key)
			}
			claim := Missing
			if len(vals) > 0 {
				claim = ParseClaim(vals[0])
			}
			v := verdict{}
			if failingCode(code) {
				pushback, has := time.Duration(0), false
				if p := trl.Get("grpc-retry-pushback-ms"); len(p) > 0 {
					ms, perr := strconv.ParseInt(strings.TrimSpace(p[0]), 10, 64)
					has, pushback = true, time.Duration(ms)*time.Millisecond
					if perr != nil || ms < 0 || ms > int64(time.Hour/time.Millisecond) {
						pushback = -1 // malformed or negative: do not retry
					}
				}
				v = r.judge(ctx, attempt, r.cfg.maxRetries, claim, pushback, has)
				criteria = criteria || v.meets
			} else {
				r.budget.success()
			}
			if span.IsRecording() {
				attrs := append(rpcAttrs(method, code), attribute.String("rpc.system", "grpc"))
				if cc != nil {
					attrs = append(attrs, attribute.String("server.address", cc.Target()))
				}
				if attempt > 0 {
					attrs = append(attrs, attribute.Int("retry.attempt", attempt))
				}
				if len(vals) > 0 {
					attrs = append(attrs, attribute.StringSlice("rpc.response.metadata."+key, vals))
				}
				attrs = append(attrs, r.flags(failOpen, v)...)
				span.SetAttributes(attrs...)
				if failingCode(code) {
					span.SetStatus(codes.Error, status.Convert(err).Message())
				}
			}
			span.End()
			if !v.retry {
				Observe(ctx, Outcome{Failed: failingCode(code), FailOpen: failOpen, CriteriaSatisfied: criteria || attempt > 0, Claim: claim})
				return err
			}
			if serr := sleep(ctx, v.wait); serr != nil {
				Observe(ctx, Outcome{Failed: true, FailOpen: failOpen, CriteriaSatisfied: true, Claim: claim})
				return serr
			}
		}
	}
}

// flags are an attempt's protocol attributes.
func (r *retrier) flags(failOpen bool, v verdict) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if failOpen {
		attrs = append(attrs, attribute.Bool("dependency.fail_open", true))
	}
	if r.cfg.peer != "" {
		attrs = append(attrs, attribute.String("service.peer.name", r.cfg.peer))
	}
	if v.meets {
		attrs = append(attrs, attribute.Bool("retry.criteria_satisfied", true))
	}
	if v.suppressed {
		attrs = append(attrs, attribute.Bool("retry.suppressed", true))
	}
	return attrs
}

// rpcAttrs are rpc.service, rpc.method and rpc.grpc.status_code of a full
// method name "/pkg.Service/Method".
func rpcAttrs(full string, code grpccodes.Code) []attribute.KeyValue {
	svc, m, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	return []attribute.KeyValue{
		attribute.String("rpc.service", svc), attribute.String("rpc.method", m),
		attribute.Int("rpc.grpc.status_code", int(code)),
	}
}

// failingCode reports whether a gRPC status is a server-side failure (docs/SPEC.md
// §2), the kind a caller may retry.
func failingCode(c grpccodes.Code) bool {
	switch c {
	case grpccodes.Unknown, grpccodes.DeadlineExceeded, grpccodes.ResourceExhausted, grpccodes.Aborted,
		grpccodes.Internal, grpccodes.Unavailable, grpccodes.DataLoss:
		return true
	}
	return false
}

// mdCarrier lets a propagator read and write gRPC metadata.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
