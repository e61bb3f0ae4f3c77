package kafka

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Health is where a Receiver says that the brokers refuse its connection,
// and what fixes it, and that they accept it again: *health.Status (its
// /readyz is not ready meanwhile).
type Health interface {
	Fail(key, msg string)
	Clear(key string)
}

// HealthKey is the key the Receiver reports its connection under.
const HealthKey = "kafka"

// connWatch knows whether the brokers accept our connection. It checks
// them (checker) before the client starts, and again whenever the client
// reports an error; while a check fails it checks again with capped
// exponential backoff. A failure is logged once, when it starts or
// changes, and once more when it clears; every failed check is counted
// by reason.
type connWatch struct {
	brokers  []string
	check    func(ctx context.Context, broker string) *connFailure
	log      *slog.Logger
	m        *metrics
	health   Health
	min, max time.Duration

	kick   chan struct{} // the client reported an error (capacity 1)
	ok     chan struct{} // closed once a broker accepted us
	okOnce sync.Once

	mu    sync.Mutex
	cur   *connFailure
	since time.Time // when cur started failing
}

func newConnWatch(r *Receiver) *connWatch {
	c := newChecker(r.cfg.Dialer, r.cfg.Security)
	return &connWatch{
		brokers: r.cfg.Brokers, check: c.check, log: r.log, m: r.m, health: r.cfg.Health,
		min: r.cfg.ConnMinBackoff, max: r.cfg.ConnMaxBackoff,
		kick: make(chan struct{}, 1), ok: make(chan struct{}),
	}
}

// failing reports whether a failure is being reported.
func (w *connWatch) failing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur != nil
}

// clientError tells the watch the client saw an error (a check follows
// soon), and reports whether a failure is already reported: then the
// client's own log of it is noise.
func (w *connWatch) clientError() bool {
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return w.failing()
}

// waitOK waits until a broker accepts the connection; false when ctx
// ended first.
func (w *connWatch) waitOK(ctx context.Context) bool {
	select {
	case <-w.ok:
		return true
	case <-ctx.Done():
		return false
	}
}

// run checks the brokers until ctx ends: at once; while a check fails,
// again after a backoff (min doubling to max, jittered); while they pass,
// when the client reports an error, at most once per gap (min, doubling
// to max while the errors keep coming and the brokers keep passing).
func (w *connWatch) run(ctx context.Context) {
	backoff, gap := w.min, w.min
	var last time.Time
	for {
		last = time.Now()
		f, reached := w.checkAll(ctx)
		if ctx.Err() != nil {
			return
		}
		w.set(f)
		if reached {
			w.okOnce.Do(func() { close(w.ok) })
		}
		if f != nil {
			if !sleep(ctx, jitter(backoff)) {
				return
			}
			backoff = min(2*backoff, w.max)
			select { // errors the client reported meanwhile are this failure's
			case <-w.kick:
			default:
			}
			continue
		}
		backoff = w.min
		quiet := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		if time.Since(quiet) >= w.max {
			gap = w.min // a new burst of errors
		}
		if !sleep(ctx, gap-time.Since(last)) {
			return
		}
		gap = min(2*gap, w.max)
	}
}

// checkAll checks every broker at once. It returns the failure to report,
// if any, and whether a broker accepted us. A broker that cannot be
// reached is reported only when none can be: a cluster with one broker
// down still serves, and moves that broker's partitions to the others.
func (w *connWatch) checkAll(ctx context.Context) (*connFailure, bool) {
	fs := make([]*connFailure, len(w.brokers))
	var wg sync.WaitGroup
	for i, b := range w.brokers {
		wg.Go(func() { fs[i] = w.check(ctx, b) })
	}
	wg.Wait()
	var first, unreachable *connFailure
	reached := false
	for _, f := range fs {
		switch {
		case f == nil:
			reached = true
		case f.reason == connUnreachable:
			if unreachable == nil {
				unreachable = f
			}
		case first == nil:
			first = f
		}
	}
	if first == nil && !reached {
		first = unreachable
	}
	return first, reached
}

// set records the outcome of a check: logs and reports a failure that
// starts or changes, and a failure that clears.
func (w *connWatch) set(f *connFailure) {
	w.mu.Lock()
	prev, since := w.cur, w.since
	w.cur = f
	if f != nil && prev == nil {
		w.since = time.Now()
	}
	w.mu.Unlock()
	if f != nil {
		w.m.connErrors.WithLabelValues(f.reason).Inc()
	}
	switch {
	case f == nil && prev != nil:
		w.m.connFailing.Set(0)
		if w.health != nil {
			w.health.Clear(HealthKey)
		}
		w.log.Info("kafka: the brokers accept the connection again", "failed_for", time.Since(since).Round(time.Second).String())
	case f != nil && (prev == nil || prev.reason != f.reason || prev.broker != f.broker || prev.msg != f.msg):
		w.m.connFailing.Set(1)
		if w.health != nil {
			w.health.Fail(HealthKey, f.msg)
		}
		w.log.Warn("kafka: "+f.msg, "reason", f.reason, "broker", f.broker, "err", f.err,
			"checking_again", "after "+w.min.String()+", doubling to "+w.max.String())
	}
}
