package ownership

import (
	"context"
	"sync/atomic"
)

// tracker collects the outcomes of the outbound calls made while serving
// one request. Calls may run concurrently (fan-out): it is lock-free.
type tracker struct {
	calls       atomic.Int32 // every recorded call
	failedClose atomic.Int32 // failed fail-close calls
	unsatisfied atomic.Int32 // ... whose retry criteria is not satisfied
}

func (t *tracker) record(o Outcome) {
	t.calls.Add(1)
	if o.Failed && !o.FailOpen {
		if !o.satisfied() {
			t.unsatisfied.Add(1)
		}
		t.failedClose.Add(1)
	}
}

// claim is Decide over the recorded outcomes.
func (t *tracker) claim() Claim {
	return summary{failedClose: int(t.failedClose.Load()), unsatisfied: int(t.unsatisfied.Load())}.claim()
}

type trackerKey struct{}
type failOpenKey struct{}

// trackedCtx is the serving request's context: its parent plus the
// tracker. It is allocated with the rest of the per-request state, in one
// allocation, rather than by context.WithValue.
type trackedCtx struct {
	context.Context
	tr *tracker
}

func (c *trackedCtx) Value(key any) any {
	if _, ok := key.(trackerKey); ok {
		return c.tr
	}
	return c.Context.Value(key)
}

func trackerOf(ctx context.Context) *tracker {
	t, _ := ctx.Value(trackerKey{}).(*tracker)
	return t
}

// FailOpen returns a context whose outbound calls are to a fail-open
// dependency: the serving request absorbs their failure, so it never makes
// the request's own error a propagated one. Use it for one call; for every
// call through a Transport, use WithFailOpen.
func FailOpen(ctx context.Context) context.Context {
	return context.WithValue(ctx, failOpenKey{}, true)
}

func isFailOpen(ctx context.Context) bool {
	v, _ := ctx.Value(failOpenKey{}).(bool)
	return v
}

// Observe records the outcome of an outbound call that did not go through
// a Transport (a database, a cache, a queue, a client of another protocol)
// with the request ctx is serving (ctx descends from a Handler's request
// context); elsewhere it does nothing. A ctx made by FailOpen marks the
// outcome fail-open.
func Observe(ctx context.Context, o Outcome) {
	if ctx == nil {
		return
	}
	t := trackerOf(ctx)
	if t == nil {
		return
	}
	if isFailOpen(ctx) {
		o.FailOpen = true
	}
	t.record(o)
}

// ClaimFor returns the claim the request ctx is serving would answer if it
// failed now (Decide over the calls recorded so far), and false when ctx
// does not descend from a Handler's request context. It lets other
// protocols' servers, or a handler that writes its own claim, speak the
// protocol.
func ClaimFor(ctx context.Context) (Claim, bool) {
	if ctx == nil {
		return Missing, false
	}
	t := trackerOf(ctx)
	if t == nil {
		return Missing, false
	}
	return t.claim(), true
}
