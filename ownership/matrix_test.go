package ownership_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/stormradius/stormradius/ownership"
)

// service starts a traced service S whose handler calls the callees with
// call(ctx, url) and answers 500 when any fail-close call failed (or when
// own is true), as an ordinary handler would. It returns S's URL.
func service(t *testing.T, s *svc, own bool, hopts []ownership.Option, calls ...func(ctx context.Context) bool) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) {
		fail := own
		for _, c := range calls {
			if !c(r.Context()) {
				fail = true
			}
		}
		if fail {
			http.Error(w, "failed", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(ownership.Handler(mux, s.opts(hopts...)...))
	t.Cleanup(srv.Close)
	return srv.URL + "/work"
}

// via returns a call made through client to url: it succeeds on a status
// below 500.
func via(c *http.Client, method, url string) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader("x"))
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode < 500
	}
}

// absorbed wraps a call whose failure the service absorbs (fail-open).
func absorbed(call func(ctx context.Context) bool) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		call(ownership.FailOpen(ctx))
		return true
	}
}

// serverClaim returns the error.claim and captured claim header of S's
// only SERVER span.
func serverClaim(t *testing.T, s *svc) (claim, header string) {
	t.Helper()
	spans := s.spans(trace.SpanKindServer)
	if len(spans) != 1 {
		t.Fatalf("%d SERVER spans, want 1", len(spans))
	}
	if v, ok := attr(spans[0], "error.claim"); ok {
		claim = v.AsString()
	}
	if v, ok := attr(spans[0], "http.response.header.x-error-claim"); ok {
		header = strings.Join(v.AsStringSlice(), ",")
	}
	return claim, header
}

// TestMatrix checks each row of docs/SPEC.md §4.2's decision matrix through a real
// Handler, real Transports and real callees. The expected claim of each
// row is derived from the SPEC:
//   - owned error → claimed;
//   - propagated, and the retry criteria satisfied for every failed
//     fail-close call (retried, or an attempt met the retry rule, or the
//     last response was unclaimed) → unclaimed;
//   - propagated otherwise → claimed (at least once).
func TestMatrix(t *testing.T) {
	fast := ownership.WithBackoff(0, 0)
	for _, c := range []struct {
		name  string
		own   bool
		calls func(t *testing.T, s *svc) []func(context.Context) bool
		want  string
		// wantHits is how many requests the failing callee got (-1: no check)
		wantHits int
	}{
		{
			name: "owned error, no call", own: true,
			calls: func(t *testing.T, s *svc) []func(context.Context) bool { return nil },
			want:  "claimed",
		},
		{
			name: "owned error, calls succeeded", own: true,
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				ok := newFailing(t, 200, "")
				return []func(context.Context) bool{via(s.client(), "GET", ok.srv.URL)}
			},
			want: "claimed",
		},
		{
			name: "propagated, callee retried",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{via(s.client(fast, ownership.WithMaxRetries(1)), "GET", d.srv.URL)}
			},
			want: "unclaimed",
		},
		{
			name: "propagated, missing claim retried",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 503, "")
				return []func(context.Context) bool{via(s.client(fast, ownership.WithMaxRetries(1)), "GET", d.srv.URL)}
			},
			want: "unclaimed",
		},
		{
			name: "propagated, POST failed once, not retried (non-idempotent): criteria satisfied",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{via(s.client(fast), "POST", d.srv.URL)}
			},
			want: "unclaimed",
		},
		{
			name: "propagated, retry denied by the budget: criteria satisfied",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "claimed")
				// 2 tokens: the first failure leaves 1, not more than 2/2.
				return []func(context.Context) bool{via(s.client(fast, ownership.WithBudget(2, 0)), "GET", d.srv.URL)}
			},
			want: "unclaimed",
		},
		{
			name: "propagated, no retries configured: the rule is still met",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{via(s.client(ownership.WithMaxRetries(0)), "GET", d.srv.URL)}
			},
			want: "unclaimed",
		},
		{
			name: "propagated, last response unclaimed (retried further down)",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "unclaimed")
				return []func(context.Context) bool{via(s.client(fast), "GET", d.srv.URL)}
			},
			want: "unclaimed",
		},
		{
			name: "propagated from a call nobody retried (plain client, observed): at least once",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{func(ctx context.Context) bool {
					ok := via(http.DefaultClient, "GET", d.srv.URL)(ctx)
					ownership.Observe(ctx, ownership.Outcome{Failed: !ok, Claim: ownership.Claimed})
					return ok
				}}
			},
			want: "claimed",
		},
		{
			name: "failed fail-open dependency (WithFailOpen) and an own error", own: true,
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{absorbedAlways(via(s.client(fast, ownership.WithFailOpen(), ownership.WithMaxRetries(0)), "GET", d.srv.URL))}
			},
			want: "claimed",
		},
		{
			name: "failed fail-open dependency (FailOpen ctx, retried) and an own error", own: true,
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{absorbed(via(s.client(fast, ownership.WithMaxRetries(1)), "GET", d.srv.URL))}
			},
			want: "claimed",
		},
		{
			name: "fail-open failure and a retried fail-close propagation",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				cache := newFailing(t, 500, "")
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{
					absorbed(via(s.client(ownership.WithMaxRetries(0)), "GET", cache.srv.URL)),
					via(s.client(fast, ownership.WithMaxRetries(1)), "GET", d.srv.URL),
				}
			},
			want: "unclaimed",
		},
		{
			name: "fail-open failure and an unretried fail-close propagation",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				cache := newFailing(t, 500, "")
				d := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{
					absorbed(via(s.client(fast, ownership.WithMaxRetries(1)), "GET", cache.srv.URL)),
					func(ctx context.Context) bool {
						ok := via(http.DefaultClient, "GET", d.srv.URL)(ctx)
						ownership.Observe(ctx, ownership.Outcome{Failed: !ok})
						return ok
					},
				}
			},
			want: "claimed",
		},
		{
			name: "two fail-close propagations, one retried, one not",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d1 := newFailing(t, 500, "claimed")
				d2 := newFailing(t, 500, "claimed")
				return []func(context.Context) bool{
					via(s.client(fast, ownership.WithMaxRetries(1)), "GET", d1.srv.URL),
					func(ctx context.Context) bool {
						ok := via(http.DefaultClient, "GET", d2.srv.URL)(ctx)
						ownership.Observe(ctx, ownership.Outcome{Failed: !ok})
						return ok
					},
				}
			},
			want: "claimed",
		},
		{
			name: "two fail-close propagations, both retried or unclaimed",
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d1 := newFailing(t, 500, "claimed")
				d2 := newFailing(t, 502, "unclaimed")
				return []func(context.Context) bool{
					via(s.client(fast, ownership.WithMaxRetries(1)), "GET", d1.srv.URL),
					via(s.client(fast), "GET", d2.srv.URL),
				}
			},
			want: "unclaimed",
		},
		{
			name: "callee 4xx is not a failure: own error", own: true,
			calls: func(t *testing.T, s *svc) []func(context.Context) bool {
				d := newFailing(t, 404, "")
				return []func(context.Context) bool{via(s.client(fast), "GET", d.srv.URL)}
			},
			want: "claimed",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSvc(t, "S")
			url := service(t, s, c.own, nil, c.calls(t, s)...)
			status, got := get(t, http.DefaultClient, context.Background(), url)
			if status != 500 {
				t.Fatalf("status %d, want 500", status)
			}
			if got != c.want {
				t.Errorf("claim header %q, want %q", got, c.want)
			}
			claim, header := serverClaim(t, s)
			if claim != c.want || header != c.want {
				t.Errorf("SERVER span: error.claim %q, captured header %q, want %q", claim, header, c.want)
			}
		})
	}
}

// absorbedAlways wraps a call through a WithFailOpen transport: the
// service absorbs its failure.
func absorbedAlways(call func(ctx context.Context) bool) func(ctx context.Context) bool {
	return func(ctx context.Context) bool {
		call(ctx)
		return true
	}
}

// TestHandlerNoClaimBelow500: a response below 500 never gets a claim
// header, even when an outbound call failed.
func TestHandlerNoClaimBelow500(t *testing.T) {
	s := newSvc(t, "S")
	d := newFailing(t, 500, "claimed")
	for _, status := range []int{200, 204, 400, 404, 499} {
		h := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			via(s.client(ownership.WithMaxRetries(0)), "GET", d.srv.URL)(r.Context())
			w.WriteHeader(status)
		}), s.opts()...)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
		if rec.Code != status || rec.Header().Get(ownership.DefaultHeader) != "" {
			t.Errorf("status %d: got %d with claim %q", status, rec.Code, rec.Header().Get(ownership.DefaultHeader))
		}
	}
}

// TestHandlerApplicationClaim: a claim the application set itself is kept.
func TestHandlerApplicationClaim(t *testing.T) {
	s := newSvc(t, "S")
	h := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Error-Claim", "unclaimed")
		w.WriteHeader(503)
	}), s.opts()...)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if got := rec.Header().Values(ownership.DefaultHeader); len(got) != 1 || got[0] != "unclaimed" {
		t.Errorf("claim header %q, want [unclaimed]", got)
	}
	if _, header := serverClaim(t, s); header != "unclaimed" {
		t.Errorf("captured header %q", header)
	}
}

// TestHandlerWithoutClaims: the naive phase's services speak no claim.
func TestHandlerWithoutClaims(t *testing.T) {
	s := newSvc(t, "S")
	url := service(t, s, true, []ownership.Option{ownership.WithoutClaims()})
	status, claim := get(t, http.DefaultClient, context.Background(), url)
	if status != 500 || claim != "" {
		t.Errorf("got %d with claim %q, want 500 without claim", status, claim)
	}
	if c, h := serverClaim(t, s); c != "" || h != "" {
		t.Errorf("SERVER span has error.claim %q, header %q", c, h)
	}
}

// TestHandlerCustomHeader: WithHeader renames the header on both sides.
func TestHandlerCustomHeader(t *testing.T) {
	s := newSvc(t, "S")
	d := newFailing(t, 500, "")
	hdr := ownership.WithHeader("x-uber-error-claim")
	h := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// d answers x-uber-error-claim: unclaimed
		via(s.client(hdr, ownership.WithBackoff(0, 0)), "GET", d.srv.URL)(r.Context())
		w.WriteHeader(500)
	}), s.opts(hdr)...)
	d.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.hits.Add(1)
		w.Header().Set("X-Uber-Error-Claim", "unclaimed")
		w.WriteHeader(500)
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if got := rec.Header().Get("x-uber-error-claim"); got != "unclaimed" {
		t.Errorf("x-uber-error-claim %q, want unclaimed", got)
	}
	if rec.Header().Get(ownership.DefaultHeader) != "" {
		t.Error("default header set too")
	}
	if d.hits.Load() != 1 {
		t.Errorf("unclaimed callee hit %d times, want 1", d.hits.Load())
	}
	sp := s.spans(trace.SpanKindServer)[0]
	if v, ok := attr(sp, "http.response.header.x-uber-error-claim"); !ok || v.AsStringSlice()[0] != "unclaimed" {
		t.Errorf("SERVER span captured header %v %v", v, ok)
	}
	cl := s.spans(trace.SpanKindClient)[0]
	if v, ok := attr(cl, "http.response.header.x-uber-error-claim"); !ok || v.AsStringSlice()[0] != "unclaimed" {
		t.Errorf("CLIENT span captured header %v %v", v, ok)
	}
}
