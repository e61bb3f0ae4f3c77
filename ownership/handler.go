package ownership

import (
	"bufio"
	"net"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Handler wraps next so that the requests it serves speak the claim
// protocol:
//
//   - it starts a SERVER span for the request (from the trace context the
//     propagator extracts), or annotates the SERVER span an outer
//     instrumentation (otelhttp) already started;
//   - it tracks, through the request's context, the outbound calls made
//     while serving it (a Transport records them; Observe records others);
//   - when the response status is ≥ 500 it sets the claim header as
//     Decide says, unless next set it itself, and records it on the span
//     (error.claim and the captured header http.response.header.<name>).
//
// The http.route of the span is the pattern of the ServeMux that routed the
// request (inside or outside Handler), else WithServerName, else the path.
func Handler(next http.Handler, opts ...Option) http.Handler {
	if next == nil {
		next = http.NotFoundHandler()
	}
	c := newConfig(opts)
	return &handler{
		next:      next,
		cfg:       c,
		tracer:    c.tp.Tracer(scopeName),
		startOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
	}
}

type handler struct {
	next      http.Handler
	cfg       *config
	tracer    trace.Tracer
	startOpts []trace.SpanStartOption
}

// serving is the per-request state, allocated at once.
type serving struct {
	ctx trackedCtx
	w   responseWriter
	tr  tracker
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	span := trace.SpanFromContext(ctx)
	own := !isServerSpan(span)
	if own {
		ctx = h.cfg.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span = h.tracer.Start(ctx, r.Method, h.startOpts...)
	}
	s := &serving{}
	s.ctx = trackedCtx{Context: ctx, tr: &s.tr}
	s.w = responseWriter{rw: w, cfg: h.cfg, tr: &s.tr}
	r2 := r.WithContext(&s.ctx)
	done := false
	defer func() {
		if !done { // next panicked: the panic goes on, with its stack
			if span.IsRecording() {
				span.SetStatus(codes.Error, "panic")
			}
			if own {
				span.End()
			}
		}
	}()
	h.next.ServeHTTP(&s.w, r2)
	done = true
	if span.IsRecording() {
		h.annotate(span, r, r2, &s.w)
	}
	if own {
		span.End()
	}
}

// annotate records the request's attributes on its SERVER span.
func (h *handler) annotate(span trace.Span, r, r2 *http.Request, w *responseWriter) {
	route := routeOf(r2.Pattern)
	if route == "" {
		route = routeOf(r.Pattern)
	}
	if route == "" {
		route = h.cfg.serverName
	}
	if route == "" && r.URL != nil {
		route = r.URL.Path
	}
	status := w.status
	if status == 0 {
		status = http.StatusOK // nothing written: net/http answers 200
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		attribute.String("http.request.method", r.Method),
		attribute.String("http.route", route),
		attribute.Int("http.response.status_code", status))
	if r.URL != nil {
		attrs = append(attrs, attribute.String("url.path", r.URL.Path))
	}
	if w.claimHeader != "" {
		attrs = append(attrs, attribute.StringSlice(h.cfg.headerAttr, []string{w.claimHeader}))
	}
	if w.claim == Claimed || w.claim == Unclaimed {
		attrs = append(attrs, attribute.String("error.claim", w.claim.String()))
	}
	span.SetAttributes(attrs...)
	span.SetName(r.Method + " " + route)
	if status >= 500 {
		span.SetStatus(codes.Error, "")
	}
}

// isServerSpan reports whether span is a recording SERVER span of the OTel
// SDK.
func isServerSpan(span trace.Span) bool {
	if !span.IsRecording() {
		return false
	}
	ro, ok := span.(sdktrace.ReadOnlySpan)
	return ok && ro.SpanKind() == trace.SpanKindServer
}

// routeOf turns a ServeMux pattern ("[METHOD ][HOST]/path") into a route.
func routeOf(pattern string) string {
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		pattern = strings.TrimLeft(pattern[i+1:], " \t")
	}
	if pattern != "" && pattern[0] != '/' {
		if i := strings.IndexByte(pattern, '/'); i >= 0 {
			pattern = pattern[i:]
		} else {
			return ""
		}
	}
	return pattern
}

// responseWriter sets the claim header when the status is known. It
// forwards Flush and Hijack, and Unwrap gives http.ResponseController the
// underlying writer.
type responseWriter struct {
	rw     http.ResponseWriter
	cfg    *config
	tr     *tracker
	status int
	// claimHeader is the claim header the response carries (set by the
	// application or by the Handler); claim is the claim the Handler set.
	claimHeader string
	claim       Claim
}

func (w *responseWriter) Header() http.Header { return w.rw.Header() }

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
		if code >= 500 {
			w.onError()
		}
	}
	w.rw.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.rw.Write(b)
}

// onError sets the claim header of an error response.
func (w *responseWriter) onError() {
	h := w.rw.Header()
	if v := h[w.cfg.header]; len(v) > 0 {
		w.claimHeader = v[0] // the application speaks for itself
		return
	}
	if w.cfg.withoutClaim {
		return
	}
	w.claim = w.tr.claim()
	w.claimHeader = w.claim.String()
	h[w.cfg.header] = []string{w.claimHeader}
}

// Unwrap returns the underlying ResponseWriter (for http.ResponseController).
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.rw }

// Flush implements http.Flusher: it sends the header (200 if none was
// written) and flushes, when the underlying writer can.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.rw).Flush()
}

// Hijack implements http.Hijacker when the underlying writer does.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.rw).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return c, rw, err
}
