package ownership

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// retrier is the client side of the protocol, shared by Transport and the
// gRPC client interceptor: the retry rule, backoff and budget.
type retrier struct {
	cfg       *config
	tracer    trace.Tracer
	budget    *budget
	startOpts []trace.SpanStartOption
}

func newRetrier(opts []Option) retrier {
	c := newConfig(opts)
	return retrier{
		cfg:       c,
		tracer:    c.tp.Tracer(scopeName),
		budget:    newBudget(c.maxTokens, c.tokenRatio),
		startOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
	}
}

// verdict is what a failed attempt comes to.
type verdict struct {
	meets      bool // the failure met the retry rule (retry.criteria_satisfied)
	retry      bool // ... and is retried, after wait
	suppressed bool // it would have been retried but for its unclaimed claim
	wait       time.Duration
}

// judge applies the retry rule to failed attempt number attempt (from 0)
// of a call allowed limit retries, whose response carried claim and, when
// hasPushback, asked to wait pushback before a retry (Retry-After; a
// negative pushback asks for none).
//
// A cancelled caller is not the callee's failure: it neither meets the
// rule nor costs the budget. A failure that meets the rule takes a token
// from the budget, even when the retry is then denied.
func (r *retrier) judge(ctx context.Context, attempt, limit int, claim Claim, pushback time.Duration, hasPushback bool) verdict {
	cancelled := ctx.Err() != nil
	v := verdict{meets: !cancelled && (r.cfg.policy == Naive || claim.retryable())}
	if v.meets {
		r.budget.failure()
	}
	if attempt >= limit || cancelled {
		return v
	}
	wait := jitter(r.cfg.baseBackoff, r.cfg.maxBackoff, attempt)
	ok := true
	if hasPushback {
		// Longer than the maximum backoff: retrying sooner would ignore
		// the callee, waiting longer would hold the caller.
		ok = pushback >= 0 && pushback <= r.cfg.maxBackoff
		wait = max(wait, pushback)
	}
	ok = ok && r.budget.allow() && beforeDeadline(ctx, wait)
	if v.meets {
		v.retry = ok
	} else {
		v.suppressed = ok // only its claim stopped this retry
	}
	v.wait = wait
	return v
}

// jitter returns a random duration in [0, min(max, base·2ⁿ)].
func jitter(base, maxD time.Duration, n int) time.Duration {
	if base <= 0 || maxD <= 0 {
		return 0
	}
	ceil := maxD
	if n < 62 && base <= maxD>>uint(n) {
		ceil = base << uint(n)
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// retryAfter parses a Retry-After value: seconds, or an HTTP date (a date
// in the past is 0). Absurd values saturate rather than overflow.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return time.Duration(1<<63 - 1), true
			}
			return 0, false
		}
		if secs > int64((1<<63-1)/time.Second) {
			return time.Duration(1<<63 - 1), true
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// beforeDeadline reports whether waiting d still leaves time before ctx's
// deadline.
func beforeDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// sleep waits d, or until ctx is done (then it returns ctx's error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
