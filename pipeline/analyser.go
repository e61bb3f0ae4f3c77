package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// analyser is the goroutine that owns the window states: it flushes
// pending traces, assembles and evaluates them, re-evaluates the records a
// window change made stale, and stores each step as one store batch.
type analyser struct {
	p       *Pipeline
	cfg     analysis.Config
	windows *analysis.Windows
	touched map[int64]time.Time // window → last change, for summaries and eviction
	dirty   map[int64]bool      // windows whose summary is not stored yet
	suspect map[int64]bool      // windows a failed batch touched (see settle)

	asm   graph.Assembler
	eval  *analysis.Evaluator
	spans []graph.Span
}

func newAnalyser(p *Pipeline) *analyser {
	return &analyser{
		p:       p,
		cfg:     p.cfg.Analysis,
		windows: analysis.NewWindows(p.cfg.Analysis.Window),
		touched: map[int64]time.Time{},
		dirty:   map[int64]bool{},
		suspect: map[int64]bool{},
		eval:    analysis.NewEvaluator(p.cfg.Analysis),
	}
}

// run flushes due traces every tick and stores summaries every interval,
// until ctx ends. A batch under way when ctx ends is finished, not cut
// short (its work runs on a context that only stop can end: see process).
func (a *analyser) run(ctx context.Context) error {
	tick := time.NewTicker(a.p.cfg.Tick)
	defer tick.Stop()
	sums := time.NewTicker(a.p.cfg.SummaryInterval)
	defer sums.Stop()
	work := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := a.flushDue(ctx, work); err != nil && ctx.Err() == nil {
				a.p.log.Warn("analysis", "err", err)
			}
		case <-sums.C:
			if err := a.storeSummaries(work); err != nil && ctx.Err() == nil {
				a.p.log.Warn("window summaries", "err", err)
			}
			a.evict()
		case r := <-a.p.flushReq:
			r.done <- a.flushAll(ctx, work, "flush")
		}
	}
}

// flushDue analyses the traces that are due.
func (a *analyser) flushDue(stop, work context.Context) error {
	p := a.p
	p.mu.Lock()
	limit := p.cfg.MaxInflightSpans * 8 / 10
	group, reasons := p.pending.take(p.cfg.Now(), p.cfg.TraceIdle, p.cfg.MaxTraceAge, limit, nil, nil)
	p.mu.Unlock()
	for _, r := range reasons {
		p.m.flushed.WithLabelValues(r).Inc()
	}
	return a.process(stop, work, group)
}

// flushAll analyses every pending trace and stores the summaries.
func (a *analyser) flushAll(stop, work context.Context, reason string) error {
	p := a.p
	p.mu.Lock()
	group := p.pending.all(nil)
	p.mu.Unlock()
	p.m.flushed.WithLabelValues(reason).Add(float64(len(group)))
	if err := a.process(stop, work, group); err != nil {
		return err
	}
	return a.storeSummaries(work)
}

// maxGroup bounds the traces analysed in one store batch.
const maxGroup = 10000

// process analyses a group of traces, in store batches of at most maxGroup
// traces. Each batch runs on work; a batch the store refused as
// unavailable is retried with backoff until it is stored or stop ends.
// Traces that could not be stored go back to the pending buffer, so that
// the checkpoint never passes their spans: they are analysed at a later
// tick, or — after a stop — recovered from the store at the next start.
func (a *analyser) process(stop, work context.Context, group []*pendingTrace) error {
	for i := 0; i < len(group); i += maxGroup {
		part := group[i:min(i+maxGroup, len(group))]
		backoff := 100 * time.Millisecond
		for {
			err := a.step(work, part)
			if err == nil {
				break
			}
			if stop.Err() != nil || !errors.Is(err, store.ErrUnavailable) {
				a.restore(group[i:])
				if !errors.Is(err, store.ErrUnavailable) {
					a.p.m.storeErrors.WithLabelValues("analysis").Inc()
				}
				return err
			}
			a.p.m.storeErrors.WithLabelValues("apply").Inc()
			a.p.log.Warn("store batch failed, retrying", "traces", len(part), "err", err, "in", backoff)
			select {
			case <-stop.Done():
				a.restore(group[i:])
				return stop.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
		a.release(part)
	}
	return nil
}

// restore puts traces that could not be analysed back in the pending
// buffer, with their original write sequences.
func (a *analyser) restore(traces []*pendingTrace) {
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for _, t := range traces {
		p.pending.restore(t, now)
	}
}

// release returns the in-flight budget of analysed traces.
func (a *analyser) release(part []*pendingTrace) {
	n := 0
	for _, t := range part {
		n += len(t.spans)
	}
	a.p.inflight.Add(-int64(n))
	a.p.m.pendingSpans.Set(float64(a.p.inflightPending()))
}

// step analyses part as one store batch. On error nothing of it is
// applied to the in-memory windows (they are restored), so it can be
// retried.
func (a *analyser) step(ctx context.Context, part []*pendingTrace) error {
	p := a.p
	start := time.Now()
	ids := make([]graph.TraceID, len(part))
	for i, t := range part {
		ids[i] = t.id
	}
	olds, err := p.st.Records(ctx, ids)
	if err != nil {
		return err
	}
	type item struct {
		old    *store.Record
		oldT   *graph.Trace
		newT   *graph.Trace
		maxSeq uint64
	}
	items := make([]item, 0, len(part))
	for _, t := range part {
		it := item{old: olds[t.id], maxSeq: t.maxSeq}
		var spans []graph.Span
		if it.old != nil {
			// A late span re-opens the trace: all its stored spans (they
			// include the new ones) make the new trace.
			p.m.reopened.Inc()
			if late := minStart(t.spans); late-it.old.Start > int64(a.windows.Size) {
				p.m.idReused.Inc()
			}
			if it.oldT, err = graph.DecodeTrace(it.old.Facts); err != nil {
				return fmt.Errorf("pipeline: trace %s: %w: %w", t.id, store.ErrCorrupt, err)
			}
			if spans, err = p.st.TraceSpans(ctx, t.id, a.spans[:0]); err != nil {
				return err
			}
			a.spans = spans[:0]
			it.maxSeq = max(it.old.Seq, t.maxSeq)
		} else {
			spans = append(a.spans[:0], t.spans...)
		}
		it.newT = a.asm.Assemble(spans)
		if it.old == nil {
			a.spans = it.newT.Spans[:0]
		}
		it.newT.Spans = nil
		p.m.duplicates.Add(float64(it.newT.Duplicates))
		items = append(items, it)
	}

	// Apply the group to the window states, remembering every touched
	// edge's class before, so that flips are found and the states can be
	// restored if the store refuses the batch.
	before := map[int64]map[graph.Edge]analysis.EdgeClass{}
	snapshot := func(w int64, t *graph.Trace) error {
		st, err := a.state(ctx, w)
		if err != nil {
			return err
		}
		m := before[w]
		if m == nil {
			m = map[graph.Edge]analysis.EdgeClass{}
			before[w] = m
		}
		for i := range t.Calls {
			e := analysis.CallEdge(t, &t.Calls[i])
			if _, ok := m[e]; !ok {
				m[e] = st.Class(e, a.cfg)
			}
		}
		return nil
	}
	for _, it := range items {
		if it.oldT != nil {
			if err := snapshot(a.windows.Of(it.oldT), it.oldT); err != nil {
				return err
			}
		}
		if err := snapshot(a.windows.Of(it.newT), it.newT); err != nil {
			return err
		}
	}
	// If the batch is not stored, the touched windows are forgotten, to be
	// loaded again from the store at the retry: after every stored batch
	// the in-memory states equal the stored ones, and a store that could
	// not apply the batch atomically (ClickHouse) may hold part of it —
	// its states then say they are not exact, and are rebuilt from the
	// records as they are.
	undo := func() {
		for w := range before {
			a.windows.Drop(w)
			delete(a.touched, w)
			a.suspect[w] = true
		}
	}
	for _, it := range items {
		if it.oldT != nil {
			a.windows.Remove(it.oldT)
		}
		a.windows.Add(it.newT)
	}

	changes := make([]store.Change, 0, len(items))
	inGroup := make(map[graph.TraceID]bool, len(items))
	for _, it := range items {
		w := a.windows.Of(it.newT)
		r := a.eval.Evaluate(it.newT, a.windows.State(w))
		changes = append(changes, store.Change{Old: it.old, New: store.NewRecord(it.newT, &r, it.maxSeq)})
		inGroup[it.newT.ID] = true
	}

	// Records of other traces evaluated with a class that just changed are
	// stale: evaluate them again, in the same batch.
	states := map[int64]*analysis.State{}
	for w, m := range before {
		st := a.windows.State(w)
		states[w] = st
		a.touched[w] = p.cfg.Now()
		a.dirty[w] = true
		var flipped []uint64
		for e, was := range m {
			if st.Class(e, a.cfg) != was {
				flipped = append(flipped, store.EdgeKey(e))
			}
		}
		if len(flipped) == 0 {
			continue
		}
		slices.Sort(flipped)
		err := p.st.WindowRecords(ctx, w, flipped, func(rec *store.Record) error {
			if inGroup[rec.TraceID] {
				return nil // being replaced in this batch
			}
			t, err := graph.DecodeTrace(rec.Facts)
			if err != nil {
				return fmt.Errorf("pipeline: trace %s: %w: %w", rec.TraceID, store.ErrCorrupt, err)
			}
			r := a.eval.Evaluate(t, st)
			if reflect.DeepEqual(&r, rec.Result) {
				return nil // the flip does not change this trace's figures
			}
			nr := &store.Record{TraceID: rec.TraceID, Start: r.Start, Window: r.Window, API: r.API, Seq: rec.Seq,
				Result: &r, Facts: rec.Facts, Edges: rec.Edges}
			changes = append(changes, store.Change{Old: rec, New: nr})
			p.m.reevaluated.Inc()
			return nil
		})
		if err != nil {
			undo()
			return err
		}
	}
	for w := range states {
		if states[w] == nil {
			states[w] = analysis.NewState() // emptied: the store drops it
		}
	}
	p.mu.Lock()
	wm := p.pending.watermark()
	p.mu.Unlock()
	if err := p.st.Apply(ctx, store.Batch{Changes: changes, States: states, Watermark: wm}); err != nil {
		undo()
		return err
	}
	p.m.applySeconds.Observe(time.Since(start).Seconds())
	if err := a.settle(ctx, before); err != nil {
		p.log.Warn("checking window states after a failed batch", "err", err)
	}
	p.m.analysed.Add(float64(len(items)))
	return nil
}

// settle checks, once a batch is stored, the windows a failed batch
// touched earlier: a store that could not apply that batch atomically may
// have let part of it land after the pipeline read the store again (an
// insert whose connection died), so the state is summed from the window's
// records as they now are — the stored batch superseded whatever landed —
// and replaces the in-memory and stored state if it differs.
func (a *analyser) settle(ctx context.Context, touched map[int64]map[graph.Edge]analysis.EdgeClass) error {
	for w := range touched {
		if !a.suspect[w] {
			continue
		}
		st := analysis.NewState()
		var recs []*store.Record
		var traces []*graph.Trace
		err := a.p.st.WindowRecords(ctx, w, nil, func(rec *store.Record) error {
			t, err := graph.DecodeTrace(rec.Facts)
			if err != nil {
				return fmt.Errorf("pipeline: trace %s: %w: %w", rec.TraceID, store.ErrCorrupt, err)
			}
			st.Add(t, 1)
			recs, traces = append(recs, rec), append(traces, t)
			return nil
		})
		if err != nil {
			return err
		}
		cur := a.windows.State(w)
		if cur == nil {
			cur = analysis.NewState()
		}
		x, _ := json.Marshal(st)
		y, _ := json.Marshal(cur)
		if string(x) != string(y) {
			a.p.log.Warn("window state corrected from its records after a failed batch", "window", w,
				"traces", st.Traces, "was", cur.Traces)
			// The window's results were evaluated against the wrong state:
			// evaluate them again, in the batch that stores the state.
			var changes []store.Change
			for i, rec := range recs {
				r := a.eval.Evaluate(traces[i], st)
				if reflect.DeepEqual(&r, rec.Result) {
					continue
				}
				changes = append(changes, store.Change{Old: rec, New: &store.Record{TraceID: rec.TraceID, Start: r.Start,
					Window: r.Window, API: r.API, Seq: rec.Seq, Result: &r, Facts: rec.Facts, Edges: rec.Edges}})
			}
			if err := a.p.st.Apply(ctx, store.Batch{Changes: changes, States: map[int64]*analysis.State{w: st}}); err != nil {
				return err
			}
			if st.Traces > 0 {
				a.windows.Put(w, st)
			} else {
				a.windows.Drop(w)
			}
			a.dirty[w] = true
		}
		delete(a.suspect, w)
	}
	return nil
}

// state returns the state of window w, loading it from the store the
// first time the window is touched (a late trace, or after a restart);
// a state the store cannot vouch for is rebuilt from the window's records.
func (a *analyser) state(ctx context.Context, w int64) (*analysis.State, error) {
	if st := a.windows.State(w); st != nil {
		return st, nil
	}
	if _, ok := a.touched[w]; ok {
		return analysis.NewState(), nil // known, and empty
	}
	st, exact, err := a.p.st.State(ctx, w)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st, exact = analysis.NewState(), true
	case err != nil:
		return nil, err
	}
	if !exact {
		st = analysis.NewState()
		err := a.p.st.WindowRecords(ctx, w, nil, func(rec *store.Record) error {
			t, err := graph.DecodeTrace(rec.Facts)
			if err != nil {
				return fmt.Errorf("pipeline: trace %s: %w: %w", rec.TraceID, store.ErrCorrupt, err)
			}
			st.Add(t, 1)
			return nil
		})
		if err != nil {
			return nil, err
		}
		a.p.log.Info("window state rebuilt from its records", "window", w, "traces", st.Traces)
	}
	if st.Traces > 0 {
		a.windows.Put(w, st)
	}
	a.touched[w] = a.p.cfg.Now()
	return st, nil
}

// storeSummaries stores the summaries of the windows that changed.
func (a *analyser) storeSummaries(ctx context.Context) error {
	if len(a.dirty) == 0 {
		return nil
	}
	var sums []*analysis.WindowSummary
	for w := range a.dirty {
		st := a.windows.State(w)
		if st == nil {
			st = analysis.NewState()
		}
		sums = append(sums, st.Summary(w, a.cfg))
	}
	if err := a.p.st.PutSummaries(ctx, sums); err != nil {
		a.p.m.storeErrors.WithLabelValues("summaries").Inc()
		return err
	}
	clear(a.dirty)
	return nil
}

// evict forgets the states of windows nobody touched for two windows'
// length: they are in the store, and loaded again if a late trace comes.
func (a *analyser) evict() {
	horizon := a.p.cfg.Now().Add(-2 * a.windows.Size)
	for w, at := range a.touched {
		if at.Before(horizon) && !a.dirty[w] {
			a.windows.Drop(w)
			delete(a.touched, w)
		}
	}
}

// inflightPending returns the spans waiting in the buffer.
func (p *Pipeline) inflightPending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending.spans
}

// minStart returns the earliest start of spans.
func minStart(spans []graph.Span) int64 {
	m := int64(0)
	for i := range spans {
		if i == 0 || spans[i].Start < m {
			m = spans[i].Start
		}
	}
	return m
}
