package ownership_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormradius/stormradius/ownership"
)

// TestSpansAcrossServices: caller → callee, two services with their own
// providers. The callee's SERVER spans are children of the caller's
// attempts' CLIENT spans, which are children of the caller's SERVER span,
// all in one trace.
func TestSpansAcrossServices(t *testing.T) {
	a, b := newSvc(t, "A"), newSvc(t, "B")
	bmux := http.NewServeMux()
	bmux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
	})
	bsrv := httptest.NewServer(ownership.Handler(bmux, b.opts()...))
	defer bsrv.Close()
	client := a.client(fast, ownership.WithMaxRetries(2), ownership.WithBudget(0, 0))
	amux := http.NewServeMux()
	amux.Handle("GET /front", ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", bsrv.URL+"/items/42?x=1", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}), a.opts()...))
	asrv := httptest.NewServer(amux)
	defer asrv.Close()

	status, claim := get(t, http.DefaultClient, context.Background(), asrv.URL+"/front")
	if status != 500 || claim != "unclaimed" {
		t.Fatalf("A answered %d %q, want 500 unclaimed (B's claimed error retried by A)", status, claim)
	}
	aServer := a.spans(trace.SpanKindServer)
	clients := a.spans(trace.SpanKindClient)
	bServers := b.spans(trace.SpanKindServer)
	if len(aServer) != 1 || len(clients) != 3 || len(bServers) != 3 {
		t.Fatalf("spans: A server %d, A client %d, B server %d; want 1, 3, 3", len(aServer), len(clients), len(bServers))
	}
	root := aServer[0]
	if root.Parent().IsValid() {
		t.Error("A's SERVER span has a parent")
	}
	checkServer(t, root, "GET /front", "/front", 500, "unclaimed")
	for i, c := range clients {
		if c.Parent().SpanID() != root.SpanContext().SpanID() || c.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("attempt %d is not a child of A's SERVER span", i)
		}
		s := bServers[i]
		if s.Parent().SpanID() != c.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("B's SERVER span %d is not a child of attempt %d", i, i)
		}
		checkServer(t, s, "GET /items/{id}", "/items/{id}", 500, "claimed")
		if v, _ := attr(s, "url.path"); v.AsString() != "/items/42" {
			t.Errorf("url.path %q", v.AsString())
		}
		if s.Resource() == nil || s.Resource().String() != "service.name=B" {
			t.Errorf("resource %v", s.Resource())
		}
	}
}

func checkServer(t *testing.T, s sdktrace.ReadOnlySpan, name, route string, status int, claim string) {
	t.Helper()
	if s.Name() != name || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("SERVER span %q kind %v, want %q", s.Name(), s.SpanKind(), name)
	}
	if v, _ := attr(s, "http.route"); v.AsString() != route {
		t.Errorf("http.route %q, want %q", v.AsString(), route)
	}
	if v, _ := attr(s, "http.request.method"); v.AsString() != "GET" {
		t.Errorf("http.request.method %q", v.AsString())
	}
	if v, _ := attr(s, "http.response.status_code"); v.AsInt64() != int64(status) {
		t.Errorf("status %d, want %d", v.AsInt64(), status)
	}
	if (s.Status().Code == codes.Error) != (status >= 500) {
		t.Errorf("span status %v for %d", s.Status(), status)
	}
	v, ok := attr(s, "error.claim")
	if claim == "" && ok || claim != "" && v.AsString() != claim {
		t.Errorf("error.claim %q, want %q", v.AsString(), claim)
	}
	h, ok := attr(s, "http.response.header.x-error-claim")
	if claim == "" && ok || claim != "" && (len(h.AsStringSlice()) != 1 || h.AsStringSlice()[0] != claim) {
		t.Errorf("captured claim header %q, want [%s]", h.AsStringSlice(), claim)
	}
}

func TestServerRoute(t *testing.T) {
	s := newSvc(t, "S")
	mux := http.NewServeMux()
	mux.HandleFunc("example.com/host/{x}", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("POST /post", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	h := ownership.Handler(mux, s.opts()...)
	named := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), s.opts(ownership.WithServerName("/named"))...)
	bare := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), s.opts()...)
	for _, c := range []struct {
		h           http.Handler
		method, url string
		name, route string
		status      int
	}{
		{h, "GET", "http://example.com/host/1", "GET /host/{x}", "/host/{x}", 200},
		{h, "POST", "/post", "POST /post", "/post", 200},
		{h, "GET", "/post", "GET /post", "/post", 405},
		{h, "GET", "/nothing", "GET /nothing", "/nothing", 404},
		{named, "GET", "/a/b", "GET /named", "/named", 200},
		{bare, "DELETE", "/a/b", "DELETE /a/b", "/a/b", 200},
	} {
		s.rec.Reset()
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, httptest.NewRequest(c.method, c.url, nil))
		spans := s.spans(trace.SpanKindServer)
		if len(spans) != 1 {
			t.Fatalf("%d spans", len(spans))
		}
		sp := spans[0]
		if sp.Name() != c.name {
			t.Errorf("%s %s: name %q, want %q", c.method, c.url, sp.Name(), c.name)
		}
		if v, _ := attr(sp, "http.route"); v.AsString() != c.route {
			t.Errorf("%s %s: route %q, want %q", c.method, c.url, v.AsString(), c.route)
		}
		if v, _ := attr(sp, "http.response.status_code"); v.AsInt64() != int64(c.status) {
			t.Errorf("%s %s: status %d, want %d", c.method, c.url, v.AsInt64(), c.status)
		}
	}
}

// TestServerSpanInsideOuterInstrumentation: when an outer middleware (as
// otelhttp) already started the SERVER span, Handler annotates it rather
// than starting a second SERVER span (which would be another hop).
func TestServerSpanInsideOuterInstrumentation(t *testing.T) {
	s := newSvc(t, "S")
	inner := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
	}), s.opts(ownership.WithServerName("/inner"))...)
	tracer := s.tp.Tracer("outer")
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "outer", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		inner.ServeHTTP(w, r.WithContext(ctx))
	})
	rec := httptest.NewRecorder()
	outer.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	spans := s.rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	checkServer(t, spans[0], "GET /inner", "/inner", 502, "claimed")
	if rec.Header().Get(ownership.DefaultHeader) != "claimed" {
		t.Errorf("claim %q", rec.Header().Get(ownership.DefaultHeader))
	}
}

// TestResponseWriterInterfaces: Flush, Hijack and ResponseController work
// through the Handler's writer; the first Write or Flush fixes the status.
func TestResponseWriterInterfaces(t *testing.T) {
	s := newSvc(t, "S")
	srv := httptest.NewUnstartedServer(ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Error(err)
			}
			w.WriteHeader(500) // superfluous: stays 200
		case "/hijack":
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			brw.WriteString("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			brw.Flush()
			conn.Close()
		case "/informational":
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(500)
		}
	}), s.opts()...))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the superfluous WriteHeader is on purpose
	srv.Start()
	defer srv.Close()
	status, claim := get(t, http.DefaultClient, context.Background(), srv.URL+"/flush")
	if status != 200 || claim != "" {
		t.Errorf("/flush: %d %q", status, claim)
	}
	status, claim = get(t, http.DefaultClient, context.Background(), srv.URL+"/informational")
	if status != 500 || claim != "claimed" {
		t.Errorf("/informational: %d %q", status, claim)
	}
	resp, err := http.Get(srv.URL + "/hijack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// httptest.ResponseRecorder cannot hijack: an error, not a panic.
	h := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := w.(http.Hijacker).Hijack(); err == nil {
			t.Error("hijacked a recorder")
		}
	}), s.opts()...)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}

// TestHandlerPanic: a panicking handler's span ends with an error, and the
// panic goes on.
func TestHandlerPanic(t *testing.T) {
	s := newSvc(t, "S")
	h := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler)
	}), s.opts()...)
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("recovered %v", p)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	spans := s.spans(trace.SpanKindServer)
	if len(spans) != 1 || spans[0].Status().Code != codes.Error {
		t.Errorf("spans %v", spans)
	}
}

// TestObserveAndClaimFor: Observe and ClaimFor outside a Handler do
// nothing; inside, they see the recorded calls.
func TestObserveAndClaimFor(t *testing.T) {
	ownership.Observe(context.Background(), ownership.Outcome{Failed: true})
	var none context.Context // a nil context must not panic
	ownership.Observe(none, ownership.Outcome{Failed: true})
	if _, ok := ownership.ClaimFor(context.Background()); ok {
		t.Error("ClaimFor outside a Handler")
	}
	var got []ownership.Claim
	h := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		c, _ := ownership.ClaimFor(ctx)
		got = append(got, c)
		ownership.Observe(ownership.FailOpen(ctx), ownership.Outcome{Failed: true})
		c, _ = ownership.ClaimFor(ctx)
		got = append(got, c)
		ownership.Observe(ctx, ownership.Outcome{Failed: true, CriteriaSatisfied: true})
		c, _ = ownership.ClaimFor(ctx)
		got = append(got, c)
		ownership.Observe(ctx, ownership.Outcome{Failed: true})
		c, _ = ownership.ClaimFor(ctx)
		got = append(got, c)
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	want := []ownership.Claim{ownership.Claimed, ownership.Claimed, ownership.Unclaimed, ownership.Claimed}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %v, want %v", i, got[i], want[i])
		}
	}
}
