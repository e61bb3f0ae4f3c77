package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// writeReq is one Consume call waiting for its spans to be durable.
type writeReq struct {
	spans []graph.Span
	done  chan error
}

// spanWrite is one group-committed span write: the requests it holds,
// their spans, its sequence and its outcome. The writer keeps
// Config.SpanWritesInFlight of them and reuses each once its callers are
// answered.
type spanWrite struct {
	batch    []*writeReq
	spans    []graph.Span
	reqs     int // len(batch) while in flight
	seq      uint64
	start    time.Time
	finished time.Time  // when its callers were answered
	done     chan error // the commit's outcome (buffered: one)
}

// writer group-commits span writes: it takes the requests waiting, up to
// MaxWriteSpans spans, and writes them in one store write (one
// transaction, one fsync; one ClickHouse part). Up to SpanWritesInFlight
// writes overlap when the store can (store.SpanWriteStarter).
//
// Sequences are taken in the order the writes start, and the writes are
// finished — their spans queued for analysis, then their callers
// answered — in that order, each only once it and every earlier write are
// done: the pending buffer, hence the checkpoint, never holds a write
// while an earlier one may still become durable, and a caller answered
// has its spans queued (Flush sees them).
//
// A write starts when the requests waiting reach MaxWriteSpans, or (a
// write being free) when they are their share of the callers: those being
// written plus those answered lately — clients that wait for their answer
// before sending again (SDKs, a collector's exporter) come back — or, if
// more, those waiting; with two writes, half. Callers answered are counted
// until they sent again, or for the last write's latency. Each write costs
// the store about the same whatever its size (a ClickHouse part, an
// fsync): a write started for every free slot split 8 clients into writes
// of 2–3 requests, and one that waited for all the callers answered kept
// them in unequal groups (7 and 1); shares settle into equal groups that
// overlap. A group waits at most until the writes in flight, started
// before it, are done, or, none being in flight, one write's latency for
// its share to come back. With one write at a time (a store whose writes
// cannot overlap) a write starts as soon as the previous one is done.
//
// On ctx's end it writes what was already queued and answers later
// callers with ErrClosed.
func (p *Pipeline) writer(ctx context.Context) {
	g := p.newGroupCommit()
	go g.finishInOrder()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		g.take()
		if g.due() {
			g.launch()
			continue
		}
		in := p.writes
		if g.waitingSpans >= p.cfg.MaxWriteSpans {
			in = nil // full: the next write takes them once one is done
		}
		select {
		case r := <-in:
			g.wait(r)
		case w := <-g.back:
			g.returned(w)
		case <-g.lapse(timer):
		case <-ctx.Done():
			g.drain()
			return
		}
	}
}

// groupCommit is the writer's state: the writes free and in flight, the
// requests waiting for the next one, and the callers expected back.
type groupCommit struct {
	p       *Pipeline
	starter store.SpanWriteStarter // nil when the store's writes cannot overlap
	n       int                    // the writes in flight at most
	// idle holds the writes not in flight; started the writes in flight,
	// in the order they started; back the writes finished.
	idle    []*spanWrite
	started chan *spanWrite
	back    chan *spanWrite

	waiting      []*writeReq
	waitingSpans int
	inflightReqs int // the requests of the writes in flight
	// expect is how many callers answered lately are to send again (see
	// due): those of the writes finished, less the requests written
	// since; it lapses after expectFor, the last write's latency, since
	// expectAt, its end.
	expect    int
	expectAt  time.Time
	expectFor time.Duration
}

// newGroupCommit returns the writer's state with every write idle:
// Config.SpanWritesInFlight of them, or one when the store's writes cannot
// overlap.
func (p *Pipeline) newGroupCommit() *groupCommit {
	g := &groupCommit{p: p, n: p.cfg.SpanWritesInFlight}
	g.starter, _ = p.st.(store.SpanWriteStarter)
	if g.starter == nil {
		g.n = 1
	}
	g.idle = make([]*spanWrite, 0, g.n)
	for range g.n {
		g.idle = append(g.idle, &spanWrite{done: make(chan error, 1)})
	}
	g.started = make(chan *spanWrite, g.n)
	g.back = make(chan *spanWrite, g.n)
	return g
}

// finishInOrder finishes the writes in the order they started, each once
// it is done, and hands them back; it ends once started is closed and
// every write it held is back.
func (g *groupCommit) finishInOrder() {
	defer close(g.back)
	for w := range g.started {
		g.p.finish(w, <-w.done)
		g.back <- w
	}
}

// wait adds r to the requests waiting.
func (g *groupCommit) wait(r *writeReq) {
	g.waiting = append(g.waiting, r)
	g.waitingSpans += len(r.spans)
}

// take moves the requests queued to waiting, without blocking, up to
// MaxWriteSpans.
func (g *groupCommit) take() {
	for g.waitingSpans < g.p.cfg.MaxWriteSpans {
		select {
		case r := <-g.p.writes:
			g.wait(r)
		default:
			return
		}
	}
}

// due reports whether the requests waiting are to be written now.
func (g *groupCommit) due() bool {
	switch {
	case len(g.waiting) == 0 || len(g.idle) == 0:
		return false
	case g.n == 1 || g.waitingSpans >= g.p.cfg.MaxWriteSpans:
		return true
	}
	if g.expect > 0 && time.Since(g.expectAt) >= g.expectFor {
		g.expect = 0
	}
	// The callers: those being written, and those answered (or, if
	// more, waiting). The waiting are a group once their share.
	callers := g.inflightReqs + max(g.expect, len(g.waiting))
	return len(g.waiting)*g.n >= callers
}

// lapse returns when the callers expected back lapse, through timer,
// while requests wait for them and a write is free; nil (never) otherwise.
func (g *groupCommit) lapse(timer *time.Timer) <-chan time.Time {
	if len(g.waiting) == 0 || len(g.idle) == 0 || g.expect == 0 {
		return nil
	}
	timer.Reset(time.Until(g.expectAt.Add(g.expectFor)))
	return timer.C
}

// launch starts a write of the requests waiting.
func (g *groupCommit) launch() {
	w := g.idle[len(g.idle)-1]
	g.idle = g.idle[:len(g.idle)-1]
	w.batch = append(w.batch[:0], g.waiting...)
	w.reqs = len(g.waiting)
	g.expect = max(0, g.expect-len(g.waiting))
	clear(g.waiting)
	g.waiting, g.waitingSpans = g.waiting[:0], 0
	g.p.start(w, g.starter)
	g.inflightReqs += w.reqs
	g.started <- w
}

// returned takes back write w, finished: it is idle again, and its
// callers are expected back for as long as it took.
func (g *groupCommit) returned(w *spanWrite) {
	g.idle = append(g.idle, w)
	g.inflightReqs -= w.reqs
	g.expect += w.reqs
	g.expectAt, g.expectFor = w.finished, w.finished.Sub(w.start)
}

// drain writes what was accepted before the end, then waits for every
// write to be finished.
func (g *groupCommit) drain() {
	for {
		g.take()
		if len(g.waiting) == 0 {
			break
		}
		if len(g.idle) == 0 {
			g.returned(<-g.back)
		}
		g.launch()
	}
	close(g.started)
	for range g.back {
	}
}

// start starts write w: it takes its sequence, and its commit runs on a
// goroutine of its own when the store's writes can overlap (starter not
// nil); otherwise the write is made durable before start returns.
func (p *Pipeline) start(w *spanWrite, starter store.SpanWriteStarter) {
	w.spans = w.spans[:0]
	for _, r := range w.batch {
		w.spans = append(w.spans, r.spans...)
	}
	w.start = time.Now()
	// The write must not be abandoned half-way because one caller gave up:
	// the others are waiting for it. A bounded context of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if starter == nil {
		var err error
		w.seq, err = p.st.WriteSpans(ctx, w.spans)
		cancel()
		w.done <- err
		return
	}
	seq, commit, err := starter.StartSpans(ctx, w.spans)
	if err != nil {
		cancel()
		w.done <- err
		return
	}
	w.seq = seq
	go func() {
		defer cancel()
		w.done <- commit(ctx)
	}()
}

// finish ends write w, whose outcome is err, once every earlier write is
// finished: its spans are queued for analysis with its sequence, then its
// callers are answered.
func (p *Pipeline) finish(w *spanWrite, err error) {
	p.m.writeSeconds.Observe(time.Since(w.start).Seconds())
	spans := w.spans
	if err != nil {
		// Its spans are not acknowledged (their senders retry): the
		// checkpoint may pass its sequence once a later write is queued.
		p.inflight.Add(-int64(len(spans)))
		p.m.rejected.WithLabelValues("store").Add(float64(len(spans)))
		p.m.storeErrors.WithLabelValues("write_spans").Inc()
		p.log.Warn("span write failed", "spans", len(spans), "err", err)
		err = fmt.Errorf("pipeline: %w", err)
		for _, r := range w.batch {
			r.done <- err
		}
		w.finished = time.Now()
		p.release(w)
		return
	}
	p.m.stored.Add(float64(len(spans)))
	now := p.cfg.Now()
	skewed, truncated, invalid, configured := 0, 0, 0, 0
	for i := range spans {
		if d := spans[i].Start - now.UnixNano(); d > int64(time.Hour) || d < -int64(time.Hour) {
			skewed++
		}
		if spans[i].Truncated {
			truncated++
		}
		switch spans[i].Sampling {
		case graph.SamplingInvalid:
			invalid++
		case graph.SamplingConfigured:
			configured++
		}
	}
	p.m.skewed.Add(float64(skewed))
	p.m.truncated.Add(float64(truncated))
	p.m.sampInvalid.Add(float64(invalid))
	p.m.sampConfig.Add(float64(configured))
	p.mu.Lock()
	p.pending.add(spans, w.seq, now)
	p.setPendingGauges()
	p.mu.Unlock()
	for _, r := range w.batch {
		r.done <- nil
	}
	w.finished = time.Now()
	p.release(w)
}

// release forgets w's requests and spans before w is reused.
func (p *Pipeline) release(w *spanWrite) {
	clear(w.batch)
	w.batch = w.batch[:0]
	// Don't keep a huge buffer alive between bursts.
	if cap(w.spans) > 4*p.cfg.MaxWriteSpans {
		w.spans = nil
	}
	w.spans = w.spans[:0]
}

var (
	_ Consumer  = (*Pipeline)(nil)
	_ Saturated = (*Pipeline)(nil)
)
