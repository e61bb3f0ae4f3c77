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
	n := p.cfg.SpanWritesInFlight
	starter, _ := p.st.(store.SpanWriteStarter)
	if starter == nil {
		n = 1
	}
	// idle holds the writes not in flight; started the writes in flight,
	// in the order they started; back the writes finished.
	idle := make([]*spanWrite, 0, n)
	for range n {
		idle = append(idle, &spanWrite{done: make(chan error, 1)})
	}
	started := make(chan *spanWrite, n)
	back := make(chan *spanWrite, n)
	go func() {
		defer close(back)
		for w := range started {
			p.finish(w, <-w.done)
			back <- w
		}
	}()
	var waiting []*writeReq
	waitingSpans, inflight, inflightReqs := 0, 0, 0
	// expect is how many callers answered lately are to send again (see
	// due): those of the writes finished, less the requests written
	// since; it lapses after expectFor, the last write's latency, since
	// expectAt, its end.
	expect := 0
	var expectAt time.Time
	var expectFor time.Duration
	returned := func(w *spanWrite) {
		idle = append(idle, w)
		inflight--
		inflightReqs -= w.reqs
		expect += w.reqs
		expectAt, expectFor = w.finished, w.finished.Sub(w.start)
	}
	// due reports whether the requests waiting are to be written now.
	due := func() bool {
		switch {
		case len(waiting) == 0 || len(idle) == 0:
			return false
		case n == 1 || waitingSpans >= p.cfg.MaxWriteSpans:
			return true
		}
		if expect > 0 && time.Since(expectAt) >= expectFor {
			expect = 0
		}
		// The callers: those being written, and those answered (or, if
		// more, waiting). The waiting are a group once their share.
		callers := inflightReqs + max(expect, len(waiting))
		return len(waiting)*n >= callers
	}
	// take moves the requests queued to waiting, without blocking, up to
	// MaxWriteSpans.
	take := func() {
		for waitingSpans < p.cfg.MaxWriteSpans {
			select {
			case r := <-p.writes:
				waiting = append(waiting, r)
				waitingSpans += len(r.spans)
			default:
				return
			}
		}
	}
	// launch starts a write of the requests waiting.
	launch := func() {
		w := idle[len(idle)-1]
		idle = idle[:len(idle)-1]
		w.batch = append(w.batch[:0], waiting...)
		w.reqs = len(waiting)
		expect = max(0, expect-len(waiting))
		clear(waiting)
		waiting, waitingSpans = waiting[:0], 0
		p.start(w, starter)
		inflight++
		inflightReqs += w.reqs
		started <- w
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		take()
		if due() {
			launch()
			continue
		}
		in := p.writes
		if waitingSpans >= p.cfg.MaxWriteSpans {
			in = nil // full: the next write takes them once one is done
		}
		// Waiting for callers to come back: until they lapse at the
		// latest.
		var lapse <-chan time.Time
		if len(waiting) > 0 && len(idle) > 0 && expect > 0 {
			timer.Reset(time.Until(expectAt.Add(expectFor)))
			lapse = timer.C
		}
		select {
		case r := <-in:
			waiting = append(waiting, r)
			waitingSpans += len(r.spans)
		case w := <-back:
			returned(w)
		case <-lapse:
		case <-ctx.Done():
			// Drain: what was accepted before the end is written.
			for {
				take()
				if len(waiting) == 0 {
					break
				}
				if len(idle) == 0 {
					returned(<-back)
				}
				launch()
			}
			close(started)
			for range back {
			}
			return
		}
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
