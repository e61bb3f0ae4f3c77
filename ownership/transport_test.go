package ownership_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormradius/stormradius/ownership"
)

var fast = ownership.WithBackoff(0, 0)

// attempts sends one request through c and returns how many requests the
// callee got.
func attempts(t *testing.T, c *http.Client, f *failing, method string, hdr ...string) int {
	t.Helper()
	before := f.hits.Load()
	req, _ := http.NewRequest(method, f.srv.URL, strings.NewReader("payload"))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return int(f.hits.Load() - before)
}

func TestTransportRetriesByClaim(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		claim  string
		policy ownership.Policy
		want   int // attempts with WithMaxRetries(2)
	}{
		{"claimed is retried", 500, "claimed", ownership.Ownership, 3},
		{"missing is retried", 503, "", ownership.Ownership, 3},
		{"invalid counts as missing", 500, "maybe", ownership.Ownership, 3},
		{"unclaimed is never retried", 500, "unclaimed", ownership.Ownership, 1},
		{"naive retries unclaimed", 500, "unclaimed", ownership.Naive, 3},
		{"4xx is never retried", 429, "claimed", ownership.Ownership, 1},
		{"4xx is never retried, naive", 404, "", ownership.Naive, 1},
		{"success is not retried", 200, "", ownership.Ownership, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSvc(t, "S")
			f := newFailing(t, c.status, c.claim)
			n := attempts(t, s.client(fast, ownership.WithPolicy(c.policy), ownership.WithMaxRetries(2), ownership.WithBudget(0, 0)), f, "GET")
			if n != c.want {
				t.Errorf("%d attempts, want %d", n, c.want)
			}
			spans := s.spans(trace.SpanKindClient)
			if len(spans) != c.want {
				t.Fatalf("%d CLIENT spans, want %d", len(spans), c.want)
			}
			for i, sp := range spans {
				v, ok := attr(sp, "http.request.resend_count")
				if i == 0 && ok || i > 0 && (!ok || v.AsInt64() != int64(i)) {
					t.Errorf("attempt %d: resend_count %v %v", i, v.AsInt64(), ok)
				}
				if v, _ := attr(sp, "http.response.status_code"); v.AsInt64() != int64(c.status) {
					t.Errorf("attempt %d: status %d", i, v.AsInt64())
				}
				wantErr := c.status >= 500
				if (sp.Status().Code == codes.Error) != wantErr {
					t.Errorf("attempt %d: span status %v", i, sp.Status())
				}
				hv, ok := attr(sp, "http.response.header.x-error-claim")
				if (c.claim != "") != ok || ok && hv.AsStringSlice()[0] != c.claim {
					t.Errorf("attempt %d: captured header %v %v", i, hv.AsStringSlice(), ok)
				}
				// The retry rule: any failure under Naive; a failure not
				// unclaimed under Ownership.
				met := c.status >= 500 && (c.policy == ownership.Naive || c.claim != "unclaimed")
				if v, ok := attr(sp, "retry.criteria_satisfied"); ok != met || ok && !v.AsBool() {
					t.Errorf("attempt %d: criteria_satisfied %v, want %v", i, ok, met)
				}
				sup := c.status >= 500 && c.policy == ownership.Ownership && c.claim == "unclaimed"
				if _, ok := attr(sp, "retry.suppressed"); ok != sup {
					t.Errorf("attempt %d: suppressed %v, want %v", i, ok, sup)
				}
			}
		})
	}
}

// TestTransportSuppressedOnlyWhenClaimStopped: retry.suppressed says the
// middleware would have retried but for the claim; with no retries left
// (or a non-idempotent request) it would not have, so the attempt is not
// marked.
func TestTransportSuppressedOnlyWhenClaimStopped(t *testing.T) {
	s := newSvc(t, "S")
	f := newFailing(t, 500, "unclaimed")
	attempts(t, s.client(fast, ownership.WithMaxRetries(0)), f, "GET")
	attempts(t, s.client(fast), f, "POST")
	// A budget of 2 that one claimed failure exhausted (1 token left, not
	// more than 2/2): the unclaimed failure would not be retried either.
	drained := s.client(fast, ownership.WithBudget(2, 0))
	attempts(t, drained, newFailing(t, 500, "claimed"), "GET")
	s.rec.Reset()
	attempts(t, drained, f, "GET")
	for _, sp := range s.spans(trace.SpanKindClient) {
		if _, ok := attr(sp, "retry.suppressed"); ok {
			t.Errorf("%s: retry.suppressed set", sp.Name())
		}
	}
	// With the budget available, it is.
	s.rec.Reset()
	attempts(t, s.client(fast, ownership.WithBudget(2, 0)), f, "GET")
	if _, ok := attr(s.spans(trace.SpanKindClient)[0], "retry.suppressed"); !ok {
		t.Error("retry.suppressed not set")
	}
}

func TestTransportNonIdempotent(t *testing.T) {
	s := newSvc(t, "S")
	f := newFailing(t, 500, "claimed")
	opts := []ownership.Option{fast, ownership.WithMaxRetries(1), ownership.WithBudget(0, 0)}
	for _, c := range []struct {
		name   string
		client *http.Client
		method string
		hdr    []string
		want   int
	}{
		{"POST", s.client(opts...), "POST", nil, 1},
		{"PATCH", s.client(opts...), "PATCH", nil, 1},
		{"POST with Idempotency-Key", s.client(opts...), "POST", []string{"Idempotency-Key", "k1"}, 2},
		{"POST, WithRetryNonIdempotent", s.client(append(opts, ownership.WithRetryNonIdempotent())...), "POST", nil, 2},
		{"PUT", s.client(opts...), "PUT", nil, 2},
		{"DELETE", s.client(opts...), "DELETE", nil, 2},
	} {
		if n := attempts(t, c.client, f, c.method, c.hdr...); n != c.want {
			t.Errorf("%s: %d attempts, want %d", c.name, n, c.want)
		}
	}
}

func TestTransportRewindsBody(t *testing.T) {
	s := newSvc(t, "S")
	f := newFailing(t, 500, "claimed")
	n := attempts(t, s.client(fast, ownership.WithMaxRetries(2)), f, "PUT")
	if n != 3 {
		t.Fatalf("%d attempts", n)
	}
	for i, b := range f.bodies {
		if b != "payload" {
			t.Errorf("attempt %d: body %q, want payload", i, b)
		}
	}
}

// onceReader is a body http.NewRequest cannot rewind (no GetBody).
type onceReader struct{ io.Reader }

func TestTransportBodyWithoutGetBody(t *testing.T) {
	s := newSvc(t, "S")
	f := newFailing(t, 500, "claimed")
	req, _ := http.NewRequest("PUT", f.srv.URL, onceReader{strings.NewReader("payload")})
	if req.GetBody != nil {
		t.Fatal("GetBody set")
	}
	resp, err := s.client(fast).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f.hits.Load() != 1 {
		t.Errorf("%d attempts, want 1", f.hits.Load())
	}
	// GetBody that fails: the last response is returned, unretried.
	req, _ = http.NewRequest("PUT", f.srv.URL, strings.NewReader("payload"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp, err = s.client(fast).Do(req)
	if err != nil || resp.StatusCode != 500 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	if f.hits.Load() != 2 {
		t.Errorf("%d attempts, want 2", f.hits.Load())
	}
}

// TestTransportBudget: WithBudget(10, 0.1) and a callee failing every
// time, ten calls of at most one retry each. By gRPC's rule (a failure
// takes a token, retries while tokens > 5): call 1 fails (9 left), retries,
// fails again (8); call 2: 7, retried, 6; call 3: 5 — no longer more than
// 5, so no retry; calls 4..10 then go down to 0 without retries. 2+2+8 = 12
// attempts.
func TestTransportBudget(t *testing.T) {
	s := newSvc(t, "S")
	f := newFailing(t, 500, "claimed")
	c := s.client(fast, ownership.WithMaxRetries(1), ownership.WithBudget(10, 0.1))
	got := 0
	for range 10 {
		got += attempts(t, c, f, "GET")
	}
	if got != 12 {
		t.Errorf("%d attempts, want 12", got)
	}
	// Every failed attempt still met the retry rule.
	for _, sp := range s.spans(trace.SpanKindClient) {
		if v, ok := attr(sp, "retry.criteria_satisfied"); !ok || !v.AsBool() {
			t.Errorf("criteria_satisfied missing")
		}
	}
	// Successes refill it: 0.1 a success, 51 successes bring it from 0 to
	// 5.1 > 5, and the next failure (4.1) is not retried, ... so take 60
	// successes: 6 tokens; the next failure leaves 5: not retried either.
	// 70 successes: 7 → failure 6 > 5: retried.
	ok := newFailing(t, 200, "")
	for range 70 {
		okReq, _ := http.NewRequest("GET", ok.srv.URL, nil)
		resp, err := c.Do(okReq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := attempts(t, c, f, "GET"); n != 2 {
		t.Errorf("after 70 successes: %d attempts, want 2", n)
	}
}

// TestTransportBudgetUnclaimedFree: unclaimed failures are not retryable,
// so they take no token.
func TestTransportBudgetUnclaimedFree(t *testing.T) {
	s := newSvc(t, "S")
	u := newFailing(t, 500, "unclaimed")
	f := newFailing(t, 500, "claimed")
	c := s.client(fast, ownership.WithMaxRetries(1), ownership.WithBudget(10, 0.1))
	for range 20 {
		attempts(t, c, u, "GET")
	}
	if n := attempts(t, c, f, "GET"); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}

func TestTransportRetryAfter(t *testing.T) {
	s := newSvc(t, "S")
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	c := s.client(ownership.WithBackoff(time.Millisecond, 3*time.Second))
	start := time.Now()
	status, _ := get(t, c, context.Background(), srv.URL)
	if el := time.Since(start); status != 200 || el < time.Second {
		t.Errorf("status %d after %v, want 200 after ≥ 1s", status, el)
	}
	// Longer than the maximum backoff: not retried.
	hits.Store(0)
	c = s.client(ownership.WithBackoff(time.Millisecond, 500*time.Millisecond), ownership.WithBudget(0, 0))
	start = time.Now()
	status, _ = get(t, c, context.Background(), srv.URL)
	if el := time.Since(start); status != 503 || hits.Load() != 1 || el > 400*time.Millisecond {
		t.Errorf("status %d, %d attempts after %v, want 503 at once", status, hits.Load(), el)
	}
	// Absurd values neither panic nor wait.
	for _, v := range []string{"99999999999999999999", "9223372036854775807", "-5", "soon", "Wed, 21 Oct 2099 07:28:00 GMT"} {
		f := newFailing(t, 503, "", func(h http.Header) { h.Set("Retry-After", v) })
		start := time.Now()
		n := attempts(t, c, f, "GET")
		if el := time.Since(start); el > 400*time.Millisecond {
			t.Errorf("Retry-After %q: waited %v", v, el)
		}
		want := 1
		if v == "-5" || v == "soon" { // unparsable: ignored, retried
			want = 3
		}
		if n != want {
			t.Errorf("Retry-After %q: %d attempts, want %d", v, n, want)
		}
	}
}

func TestTransportDeadline(t *testing.T) {
	s := newSvc(t, "S")
	// The callee asks for 1 s; the deadline is 200 ms away: no retry.
	f := newFailing(t, 503, "claimed", func(h http.Header) { h.Set("Retry-After", "1") })
	c := s.client(ownership.WithBackoff(time.Millisecond, 2*time.Second), ownership.WithMaxRetries(3))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el > 150*time.Millisecond || f.hits.Load() != 1 || resp.StatusCode != 503 {
		t.Errorf("%d attempts, status %d, after %v; want 1 attempt returned at once", f.hits.Load(), resp.StatusCode, el)
	}
	// The deadline, not the attempt limit, stopped it: the rule was met.
	sp := s.spans(trace.SpanKindClient)[0]
	if _, ok := attr(sp, "retry.criteria_satisfied"); !ok {
		t.Error("criteria_satisfied not set")
	}

	// Jittered backoffs up to 1 s, 100 ms deadlines: whatever the draws,
	// no call sleeps past its deadline.
	g := newFailing(t, 500, "claimed")
	c = s.client(ownership.WithBackoff(time.Second, time.Second), ownership.WithMaxRetries(5), ownership.WithBudget(0, 0))
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, "GET", g.srv.URL, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if el := time.Since(start); el > 150*time.Millisecond {
			t.Errorf("call took %v with a 100 ms deadline", el)
		}
	}
}

func TestTransportCancel(t *testing.T) {
	s := newSvc(t, "S")
	// Retry-After makes the wait at least 5 s, whatever the jitter.
	f := newFailing(t, 503, "claimed", func(h http.Header) { h.Set("Retry-After", "5") })
	c := s.client(ownership.WithBackoff(time.Millisecond, 10*time.Second), ownership.WithMaxRetries(3))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL, nil)
	_, err := c.Do(req)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 2*time.Second || f.hits.Load() != 1 {
		t.Errorf("%d attempts after %v", f.hits.Load(), el)
	}
	// Already cancelled: one attempt (which fails), no retry, no budget.
	req, _ = http.NewRequestWithContext(ctx, "GET", f.srv.URL, nil)
	if _, err := c.Do(req); err == nil {
		t.Error("no error")
	}
}

// TestTransportConnectionError: a transport error has no claim: it is
// retried, and every attempt is an error span.
func TestTransportConnectionError(t *testing.T) {
	s := newSvc(t, "S")
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	req, _ := http.NewRequest("GET", url, nil)
	_, err := s.client(fast, ownership.WithMaxRetries(2)).Do(req)
	if err == nil {
		t.Fatal("no error")
	}
	spans := s.spans(trace.SpanKindClient)
	if len(spans) != 3 {
		t.Fatalf("%d CLIENT spans, want 3", len(spans))
	}
	for i, sp := range spans {
		if sp.Status().Code != codes.Error || len(sp.Events()) == 0 {
			t.Errorf("attempt %d: status %v, %d events", i, sp.Status(), len(sp.Events()))
		}
		if _, ok := attr(sp, "http.response.status_code"); ok {
			t.Errorf("attempt %d has a status code", i)
		}
	}
}

// TestTransportLeavesRequestAlone: the caller's request is not modified,
// though every attempt carries its own traceparent.
func TestTransportLeavesRequestAlone(t *testing.T) {
	s := newSvc(t, "S")
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("traceparent"))
		w.WriteHeader(500)
	}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("X-Mine", "1")
	resp, err := ownership.Transport(nil, s.opts(fast, ownership.WithMaxRetries(1))...).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(req.Header) != 1 || req.Header.Get("X-Mine") != "1" {
		t.Errorf("caller's header now %v", req.Header)
	}
	if len(seen) != 2 || seen[0] == "" || seen[0] == seen[1] {
		t.Errorf("traceparents %q: want two different ones", seen)
	}
	// A request without a header at all.
	req, _ = http.NewRequest("GET", srv.URL, nil)
	req.Header = nil
	resp, err = ownership.Transport(nil, s.opts(fast, ownership.WithMaxRetries(0))...).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Header != nil {
		t.Error("caller's nil header replaced")
	}
}

func TestTransportPeerAndFailOpen(t *testing.T) {
	s := newSvc(t, "S")
	f := newFailing(t, 500, "")
	attempts(t, s.client(fast, ownership.WithMaxRetries(0), ownership.WithPeerService("redis"), ownership.WithFailOpen()), f, "GET")
	req, _ := http.NewRequestWithContext(ownership.FailOpen(context.Background()), "GET", f.srv.URL, nil)
	resp, _ := s.client(fast, ownership.WithMaxRetries(0)).Do(req)
	resp.Body.Close()
	attempts(t, s.client(fast, ownership.WithMaxRetries(0)), f, "GET")
	spans := s.spans(trace.SpanKindClient)
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	if v, _ := attr(spans[0], "service.peer.name"); v.AsString() != "redis" {
		t.Errorf("service.peer.name %q", v.AsString())
	}
	for i, want := range []bool{true, true, false} {
		v, ok := attr(spans[i], "dependency.fail_open")
		if ok != want || ok && !v.AsBool() {
			t.Errorf("span %d: dependency.fail_open %v, want %v", i, ok, want)
		}
	}
	if v, _ := attr(spans[0], "server.address"); v.AsString() != "127.0.0.1" {
		t.Errorf("server.address %q", v.AsString())
	}
	if v, _ := attr(spans[0], "url.full"); v.AsString() != f.srv.URL {
		t.Errorf("url.full %q", v.AsString())
	}
	if spans[0].Name() != "GET" || spans[0].SpanKind() != trace.SpanKindClient {
		t.Errorf("name %q kind %v", spans[0].Name(), spans[0].SpanKind())
	}
}

// TestTransportOddInput: nil base, nil request, nil body, a URL with
// credentials.
func TestTransportOddInput(t *testing.T) {
	rt := ownership.Transport(nil)
	if _, err := rt.RoundTrip(nil); err == nil {
		t.Error("nil request: no error")
	}
	s := newSvc(t, "S")
	f := newFailing(t, 200, "")
	req, _ := http.NewRequest("GET", strings.Replace(f.srv.URL, "http://", "http://user:secret@", 1), nil)
	req.Body = nil
	resp, err := ownership.Transport(nil, s.opts()...).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, _ := attr(s.spans(trace.SpanKindClient)[0], "url.full"); strings.Contains(v.AsString(), "secret") {
		t.Errorf("url.full %q has the password", v.AsString())
	}
	// Options with odd values.
	ownership.Transport(nil, ownership.WithMaxRetries(-3), ownership.WithBackoff(-1, -5),
		ownership.WithBudget(-1, -1), ownership.WithHeader(""), ownership.WithHeader("bad header"),
		ownership.WithTracerProvider(nil), ownership.WithPropagator(nil), ownership.WithPolicy(9), nil)
	if h := ownership.Handler(nil); h == nil {
		t.Error("Handler(nil)")
	}
}
