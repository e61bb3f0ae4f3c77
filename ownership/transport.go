package ownership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns a RoundTripper that sends requests through base
// (http.DefaultTransport when nil) and retries failed attempts by the
// claim protocol:
//
//   - an attempt fails on a transport error or a status ≥ 500 (a 4xx is
//     the caller's own error and is never retried);
//   - under the Ownership policy (the default) a failure is retried when
//     its response is claimed, has no claim or an invalid one, and never
//     when it is unclaimed (somebody below already retried it); under
//     Naive every failure is retried;
//   - retries wait an exponential backoff with full jitter
//     (WithBackoff), and at least the response's Retry-After (seconds or
//     an HTTP date); a response whose Retry-After exceeds the maximum
//     backoff is not retried, nor one whose wait would pass the request
//     context's deadline; a cancelled context stops at once;
//   - retries are bounded per call (WithMaxRetries) and per Transport by
//     a token bucket (WithBudget);
//   - a non-idempotent request (POST, PATCH, CONNECT, …) is retried only
//     with WithRetryNonIdempotent or an Idempotency-Key header, and a
//     request with a body only when it has GetBody (http.NewRequest sets
//     it for in-memory bodies).
//
// Each attempt is a CLIENT span, child of the request context's span, with
// the context injected into its headers; the attributes the analysis reads
// are set on it (http.request.resend_count, the captured claim header,
// retry.criteria_satisfied, retry.suppressed, dependency.fail_open,
// service.peer.name). The call's Outcome is recorded with the Handler
// serving the request context, if any.
//
// The span of an attempt ends when its response header arrives. The
// caller's request is never modified.
func Transport(base http.RoundTripper, opts ...Option) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, retrier: newRetrier(opts)}
}

type transport struct {
	base http.RoundTripper
	retrier
}

// call is the state of one RoundTrip. It is also the propagator's carrier:
// the attempt's request is copied, and the caller's header cloned, only
// when the propagator sets something. Calls are pooled: the success path
// allocates nothing of its own.
type call struct {
	req    *http.Request   // the caller's
	ctx    context.Context // the current attempt's
	out    *http.Request   // the current attempt's request, nil until needed
	cloned bool            // out.Header is out's own
	url    string          // url.full, computed once
}

var calls = sync.Pool{New: func() any { return new(call) }}

// request returns the attempt's own copy of the caller's request, made on
// first use.
func (c *call) request() *http.Request {
	if c.out == nil {
		c.out = c.req.WithContext(c.ctx)
	}
	return c.out
}

func (c *call) Get(key string) string {
	if c.out == nil {
		return c.req.Header.Get(key)
	}
	return c.out.Header.Get(key)
}

func (c *call) Set(key, value string) {
	out := c.request()
	if !c.cloned {
		h := c.req.Header.Clone()
		if h == nil {
			h = make(http.Header, 2)
		}
		out.Header, c.cloned = h, true
	}
	out.Header[canonicalKey(key)] = []string{value}
}

// canonicalKey is http.CanonicalHeaderKey without its allocation for the
// keys the usual propagators set.
func canonicalKey(key string) string {
	switch key {
	case "traceparent", "Traceparent":
		return "Traceparent"
	case "tracestate", "Tracestate":
		return "Tracestate"
	case "baggage", "Baggage":
		return "Baggage"
	}
	return http.CanonicalHeaderKey(key)
}

func (c *call) Keys() []string {
	h := c.req.Header
	if c.out != nil {
		h = c.out.Header
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errNilRequest
	}
	ctx := req.Context()
	failOpen := t.cfg.failOpen || isFailOpen(ctx)
	limit := 0
	if t.cfg.maxRetries > 0 && t.replayable(req) {
		limit = t.cfg.maxRetries
	}
	c := calls.Get().(*call)
	*c = call{req: req}
	defer func() {
		*c = call{}
		calls.Put(c)
	}()
	var body io.ReadCloser // the next attempt's body, from GetBody
	criteria := false
	for attempt := 0; ; attempt++ {
		actx, span := t.tracer.Start(ctx, spanName(req.Method), t.startOpts...)
		c.ctx, c.out, c.cloned = actx, nil, false
		if body != nil {
			c.request().Body = body
			body = nil
		}
		t.cfg.prop.Inject(actx, c)
		out := c.out
		if out == nil {
			if span.IsRecording() {
				out = c.request() // the attempt's span is in its context
			} else {
				out = req // nothing to add: sent as it is
			}
		}
		resp, err := t.base.RoundTrip(out)

		var claimVals []string
		claim := Missing
		if resp != nil {
			if claimVals = resp.Header[t.cfg.header]; len(claimVals) > 0 {
				claim = ParseClaim(claimVals[0])
			}
		}
		if err == nil && resp.StatusCode < 500 {
			t.budget.success()
			if span.IsRecording() {
				t.annotate(span, c, attempt, failOpen, resp, nil, claimVals, false, false)
			}
			span.End()
			if tr := trackerOf(ctx); tr != nil {
				tr.record(Outcome{FailOpen: failOpen, CriteriaSatisfied: attempt > 0, Claim: claim})
			}
			return resp, nil
		}

		var pushback time.Duration
		hasPushback := false
		if resp != nil {
			pushback, hasPushback = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		v := t.judge(ctx, attempt, limit, claim, pushback, hasPushback)
		criteria = criteria || v.meets
		retry, wait := v.retry, v.wait
		if retry && req.Body != nil && req.Body != http.NoBody {
			var gerr error
			if body, gerr = req.GetBody(); gerr != nil || body == nil {
				retry, body = false, nil
			}
		}
		if span.IsRecording() {
			t.annotate(span, c, attempt, failOpen, resp, err, claimVals, v.meets, v.suppressed)
		}
		span.End()
		if !retry {
			if tr := trackerOf(ctx); tr != nil {
				tr.record(Outcome{Failed: true, FailOpen: failOpen, CriteriaSatisfied: criteria || attempt > 0, Claim: claim})
			}
			return resp, err
		}
		if resp != nil {
			drain(resp.Body)
		}
		if err := sleep(ctx, wait); err != nil {
			if body != nil {
				body.Close()
			}
			if tr := trackerOf(ctx); tr != nil {
				tr.record(Outcome{Failed: true, FailOpen: failOpen, CriteriaSatisfied: true, Claim: claim})
			}
			return nil, err
		}
	}
}

var errNilRequest = errors.New("ownership: nil request")

// replayable reports whether req may be sent again: an idempotent method
// (or one declared safe), and a body that can be rewound.
func (t *transport) replayable(req *http.Request) bool {
	if !t.cfg.nonIdemSafe && !idempotent(req.Method) && req.Header.Get("Idempotency-Key") == "" {
		return false
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// idempotent reports whether method is idempotent (RFC 9110 §9.2.2); ""
// is GET.
func idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func spanName(method string) string {
	if method == "" {
		return http.MethodGet
	}
	return method
}

// drain reads a little of a body that will be dropped, so that its
// connection can be reused, and closes it.
func drain(b io.ReadCloser) {
	if b == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, b, 64<<10)
	_ = b.Close()
}

// annotate sets an attempt's attributes and status.
func (t *transport) annotate(span trace.Span, c *call, attempt int, failOpen bool, resp *http.Response, err error, claimVals []string, criteria, suppressed bool) {
	req := c.req
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs, attribute.String("http.request.method", spanName(req.Method)))
	if u := req.URL; u != nil {
		if c.url == "" {
			c.url = fullURL(u)
		}
		attrs = append(attrs, attribute.String("url.full", c.url), attribute.String("server.address", u.Hostname()))
		if p := port(u); p > 0 {
			attrs = append(attrs, attribute.Int("server.port", p))
		}
	}
	if attempt > 0 {
		attrs = append(attrs, attribute.Int("http.request.resend_count", attempt))
	}
	if failOpen {
		attrs = append(attrs, attribute.Bool("dependency.fail_open", true))
	}
	if t.cfg.peer != "" {
		attrs = append(attrs, attribute.String("service.peer.name", t.cfg.peer))
	}
	if resp != nil {
		attrs = append(attrs, attribute.Int("http.response.status_code", resp.StatusCode))
		if len(claimVals) > 0 {
			attrs = append(attrs, attribute.StringSlice(t.cfg.headerAttr, claimVals))
		}
	}
	if criteria {
		attrs = append(attrs, attribute.Bool("retry.criteria_satisfied", true))
	}
	if suppressed {
		attrs = append(attrs, attribute.Bool("retry.suppressed", true))
	}
	switch {
	case err != nil:
		attrs = append(attrs, attribute.String("error.type", fmt.Sprintf("%T", err)))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case resp != nil && resp.StatusCode >= 500:
		attrs = append(attrs, attribute.String("error.type", strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	span.SetAttributes(attrs...)
}

// fullURL is url.full: the URL without its credentials.
func fullURL(u *url.URL) string {
	if u.User != nil {
		return u.Redacted()
	}
	return u.String()
}

// port is the URL's port, or its scheme's default.
func port(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return 0
		}
		return n
	}
	switch u.Scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}
