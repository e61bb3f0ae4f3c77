package ownership_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-retryablehttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stormradius/stormradius/ownership"
)

// discard is a span processor that drops every span: the SDK records
// spans (everything is sampled) but exports nothing.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

func sdkProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(discard{}))
}

// servingContext returns the context of a request served by an
// ownership.Handler (with a SERVER span of tp): what outbound calls are
// made with.
func servingContext(tp trace.TracerProvider) context.Context {
	var ctx context.Context
	ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ctx = r.Context() }),
		ownership.WithTracerProvider(tp)).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	return ctx
}

// spanOnly is the least an instrumented client does per request: one
// CLIENT span with the attributes Transport sets on success, its context
// injected into a copy of the request: the "OTel span itself" that the
// middleware's overhead is measured beyond.
type spanOnly struct {
	base   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (s *spanOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := s.tracer.Start(req.Context(), req.Method, trace.WithSpanKind(trace.SpanKindClient))
	r2 := req.WithContext(ctx)
	r2.Header = req.Header.Clone()
	if r2.Header == nil {
		r2.Header = http.Header{}
	}
	s.prop.Inject(ctx, propagation.HeaderCarrier(r2.Header))
	resp, err := s.base.RoundTrip(r2)
	if span.IsRecording() {
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", req.Method),
			attribute.String("url.full", req.URL.String()),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.Int("server.port", 0),
		}
		if resp != nil {
			attrs = append(attrs, attribute.Int("http.response.status_code", resp.StatusCode))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attrs...)
	}
	span.End()
	return resp, err
}

// BenchmarkTransport: one GET answered 200 (the no-error path) per op,
// through a plain http.Client, ownership.Transport (with the OTel no-op
// provider, and with an SDK provider that samples everything and exports
// nothing), the span-only baseline, and go-retryablehttp; all over the
// same keep-alive connection to one httptest server.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	benchClients(b, srv.URL, base)
}

// fakeBase answers 200 at once, in-process: BenchmarkTransportInProcess
// measures the clients without the network's cost and noise.
type fakeBase struct{ h http.Header }

func (f fakeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: f.h, Body: http.NoBody, Request: req}, nil
}

// BenchmarkTransportInProcess is BenchmarkTransport over a base
// RoundTripper that answers in-process: the differences are the clients'
// own costs.
func BenchmarkTransportInProcess(b *testing.B) {
	benchClients(b, "http://inventory.internal:8080/items/1", fakeBase{h: http.Header{"Content-Type": {"text/plain"}}})
}

func benchClients(b *testing.B, url string, base http.RoundTripper) {
	tc := propagation.TraceContext{}
	sdk := sdkProvider()
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: base}
	rc.Logger = nil
	rc.RetryMax = 2
	for _, c := range []struct {
		name   string
		client *http.Client
		ctx    context.Context
	}{
		{"plain", &http.Client{Transport: base}, context.Background()},
		{"retryablehttp", rc.StandardClient(), context.Background()},
		{"ownership-noop", &http.Client{Transport: ownership.Transport(base, ownership.WithTracerProvider(noop.NewTracerProvider()), ownership.WithPropagator(tc))}, servingContext(noop.NewTracerProvider())},
		{"spanonly-sdk", &http.Client{Transport: &spanOnly{base: base, tracer: sdk.Tracer("b"), prop: tc}}, servingContext(sdk)},
		{"ownership-sdk", &http.Client{Transport: ownership.Transport(base, ownership.WithTracerProvider(sdk), ownership.WithPropagator(tc))}, servingContext(sdk)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequestWithContext(c.ctx, "GET", url, nil)
				resp, err := c.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// nopWriter is a ResponseWriter that keeps nothing, so that
// BenchmarkHandler measures the middleware rather than a recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkHandler: one request answered 200 per op, by the bare handler
// and through ownership.Handler (no-op and SDK providers).
func BenchmarkHandler(b *testing.B) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", app)
	sdk := sdkProvider()
	tc := propagation.TraceContext{}
	req := httptest.NewRequest("GET", "/items/1", nil)
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"plain", mux},
		{"spanonly-noop", &serverSpanOnly{next: mux, tracer: noop.NewTracerProvider().Tracer("b"), prop: tc}},
		{"spanonly-sdk", &serverSpanOnly{next: mux, tracer: sdk.Tracer("b"), prop: tc}},
		{"ownership-noop", ownership.Handler(mux, ownership.WithTracerProvider(noop.NewTracerProvider()), ownership.WithPropagator(tc))},
		{"ownership-sdk", ownership.Handler(mux, ownership.WithTracerProvider(sdk), ownership.WithPropagator(tc))},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(w, req)
			}
		})
	}
}

// serverSpanOnly is the least an instrumented server does per request:
// extract the trace context, one SERVER span with the route and status,
// the request's context replaced.
type serverSpanOnly struct {
	next   http.Handler
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

func (s *serverSpanOnly) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := s.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
	sw := &statusWriter{ResponseWriter: w, status: 200}
	r2 := r.WithContext(ctx)
	s.next.ServeHTTP(sw, r2)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", r2.Pattern),
			attribute.Int("http.response.status_code", sw.status), attribute.String("url.path", r.URL.Path))
		span.SetName(r.Method + " " + r2.Pattern)
	}
	span.End()
}
