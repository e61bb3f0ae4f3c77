package ownership_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormradius/stormradius/ownership"
)

// svc is one traced service of a test: its own tracer provider (resource
// service.name) recording every span.
type svc struct {
	name string
	tp   *sdktrace.TracerProvider
	rec  *tracetest.SpanRecorder
}

func newSvc(t testing.TB, name string) *svc {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &svc{name: name, tp: tp, rec: rec}
}

// opts are the options that wire a Handler or Transport to the service's
// provider and the W3C propagator.
func (s *svc) opts(more ...ownership.Option) []ownership.Option {
	return append([]ownership.Option{
		ownership.WithTracerProvider(s.tp),
		ownership.WithPropagator(propagation.TraceContext{}),
	}, more...)
}

func (s *svc) client(more ...ownership.Option) *http.Client {
	return &http.Client{Transport: ownership.Transport(nil, s.opts(more...)...)}
}

func (s *svc) spans(kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.rec.Ended() {
		if sp.SpanKind() == kind {
			out = append(out, sp)
		}
	}
	return out
}

// attr returns the value of key on span, and whether it is present.
func attr(sp sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// failing is a callee that answers status with the given claim header
// (none when claim is "") and counts its requests and their bodies.
type failing struct {
	srv    *httptest.Server
	hits   atomic.Int32
	mu     sync.Mutex
	bodies []string
}

func newFailing(t testing.TB, status int, claim string, extra ...func(http.Header)) *failing {
	f := &failing{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(b))
		f.mu.Unlock()
		if claim != "" {
			w.Header().Set(ownership.DefaultHeader, claim)
		}
		for _, e := range extra {
			e(w.Header())
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// get sends a GET to url with c and returns the response's status and
// claim header.
func get(t testing.TB, c *http.Client, ctx context.Context, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(ownership.DefaultHeader)
}
