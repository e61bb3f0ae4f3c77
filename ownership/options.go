package ownership

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// DefaultHeader is the response header that carries the error claim, unless
// WithHeader names another one.
const DefaultHeader = "x-error-claim"

// scopeName is the instrumentation scope of the spans this package emits.
const scopeName = "github.com/stormradius/stormradius/ownership"

// Policy is the rule a Transport retries by.
type Policy uint8

const (
	// Ownership retries a failed attempt whose response is claimed, has no
	// claim or an invalid one, and never one that is unclaimed: whoever
	// answered unclaimed says a retry already happened below it.
	Ownership Policy = iota
	// Naive retries every failed attempt whatever its claim, as retry
	// clients do today. It exists to measure what ownership saves.
	Naive
)

// String returns "ownership" or "naive".
func (p Policy) String() string {
	switch p {
	case Ownership:
		return "ownership"
	case Naive:
		return "naive"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// An Option configures a Handler or a Transport. Options that only make
// sense for one of them are ignored by the other.
type Option func(*config)

type config struct {
	header     string // canonical MIME form, the http.Header key
	headerAttr string // http.response.header.<lower-case name>

	tp   trace.TracerProvider
	prop propagation.TextMapPropagator

	policy       Policy
	maxRetries   int
	baseBackoff  time.Duration
	maxBackoff   time.Duration
	maxTokens    float64
	tokenRatio   float64
	failOpen     bool
	peer         string
	nonIdemSafe  bool
	serverName   string
	withoutClaim bool
}

func newConfig(opts []Option) *config {
	c := &config{
		maxRetries:  2,
		baseBackoff: 25 * time.Millisecond,
		maxBackoff:  time.Second,
		maxTokens:   10,
		tokenRatio:  0.1,
	}
	c.setHeader(DefaultHeader)
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
	}
	return c
}

func (c *config) setHeader(name string) {
	c.header = http.CanonicalHeaderKey(name)
	c.headerAttr = "http.response.header." + strings.ToLower(name)
}

// WithHeader names the header that carries the claim (default
// DefaultHeader, "x-error-claim"). The analysis must be told the same name
// (`analyze --claim-header`). An empty name or one that is not a valid
// header name is ignored.
func WithHeader(name string) Option {
	return func(c *config) {
		name = strings.TrimSpace(name)
		if validHeaderName(name) {
			c.setHeader(name)
		}
	}
}

// WithTracerProvider sets the provider of the spans' tracer (default
// otel.GetTracerProvider(), looked up when the Handler or Transport is
// made; the global provider forwards to one set later).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithPropagator sets how trace context is read from requests (Handler) and
// written into them (Transport); default otel.GetTextMapPropagator().
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) {
		if p != nil {
			c.prop = p
		}
	}
}

// WithPolicy sets a Transport's retry policy: Ownership (the default) or
// Naive.
func WithPolicy(p Policy) Option {
	return func(c *config) {
		if p == Ownership || p == Naive {
			c.policy = p
		}
	}
}

// WithMaxRetries sets how many times a Transport may retry a call after its
// first attempt (default 2; 0 never retries; negative means 0).
func WithMaxRetries(n int) Option {
	return func(c *config) { c.maxRetries = max(n, 0) }
}

// WithBackoff sets a Transport's exponential backoff: before retry n (from
// 0) it waits a random time in [0, min(max, base·2ⁿ)] ("full jitter").
// Defaults: 25 ms and 1 s. Negative durations count as 0; max is at least
// base. A Retry-After longer than max is not retried.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) {
		c.baseBackoff = clampDur(base)
		c.maxBackoff = clampDur(max)
		if c.maxBackoff < c.baseBackoff {
			c.maxBackoff = c.baseBackoff
		}
	}
}

func clampDur(d time.Duration) time.Duration { return max(d, 0) }

// WithBudget sets a Transport's retry budget, a token bucket as gRPC's retry
// throttling: it starts full with maxTokens; each failed attempt that the
// policy would retry takes a token, each successful attempt gives back
// tokenRatio, and retries are allowed while more than maxTokens/2 remain.
// Default (10, 0.1): once the callee fails persistently, about one attempt
// in ten may be a retry. maxTokens ≤ 0 disables the budget (WithBudget(0,
// 0): unlimited retries). The bucket is shared by every call through one
// Transport.
func WithBudget(maxTokens, tokenRatio float64) Option {
	return func(c *config) {
		if maxTokens != maxTokens || maxTokens < 0 {
			maxTokens = 0
		}
		if tokenRatio != tokenRatio || tokenRatio < 0 {
			tokenRatio = 0
		}
		c.maxTokens, c.tokenRatio = maxTokens, tokenRatio
	}
}

// WithFailOpen declares that every call through a Transport is to a
// fail-open dependency: one whose failure its caller absorbs (a cache, a
// recommendation widget). Its failures never make the serving request's
// error a propagated one, and its CLIENT spans carry
// dependency.fail_open=true. For single calls use FailOpen(ctx).
func WithFailOpen() Option {
	return func(c *config) { c.failOpen = true }
}

// WithPeerService names the callee of a Transport on its CLIENT spans
// (service.peer.name): useful when the callee is not instrumented, so that
// the analysis can name it.
func WithPeerService(name string) Option {
	return func(c *config) { c.peer = strings.TrimSpace(name) }
}

// WithRetryNonIdempotent lets a Transport retry non-idempotent requests
// (POST, PATCH, …). Without it such a request is retried only when it
// carries an Idempotency-Key header.
func WithRetryNonIdempotent() Option {
	return func(c *config) { c.nonIdemSafe = true }
}

// WithServerName sets the http.route a Handler records when the request
// was not routed by a ServeMux pattern.
func WithServerName(route string) Option {
	return func(c *config) { c.serverName = strings.TrimSpace(route) }
}

// WithoutClaims makes a Handler track and trace as usual but never set the
// claim header, as a service that does not speak the protocol.
func WithoutClaims() Option {
	return func(c *config) { c.withoutClaim = true }
}

// validHeaderName reports whether s is a non-empty HTTP token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
