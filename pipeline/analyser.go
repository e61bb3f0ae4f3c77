package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
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
	// peers holds, for each window in memory, the other partitions'
	// states summed as they are included in it (partitions only: see
	// peers.go): the window's state in memory is its own plus these.
	peers     map[int64]*analysis.State
	peerSince time.Time // PeerWindows looks back from here
	// recheck holds the windows loaded from the store whose records the
	// next refresh evaluates again, all of them (partitions only).
	recheck map[int64]bool
	prev    *job // the batch being stored
	// restored counts batches whose traces went back to the pending
	// buffer after the store refused them.
	restored int
	// fromFlight counts records read from the batch in flight in place of
	// the store's (tests).
	fromFlight int

	asm   graph.Assembler
	eval  *analysis.Evaluator
	spans []graph.Span

	// folder folds names past their window's caps; folds counts them
	// since foldLogged, when they were last logged.
	folder     *analysis.Folder
	folds      analysis.FoldCounts
	foldLogged time.Time
}

func newAnalyser(p *Pipeline) *analyser {
	return &analyser{
		p:       p,
		cfg:     p.cfg.Analysis,
		windows: analysis.NewWindows(p.cfg.Analysis.Window),
		touched: map[int64]time.Time{},
		dirty:   map[int64]bool{},
		suspect: map[int64]bool{},
		peers:   map[int64]*analysis.State{},
		recheck: map[int64]bool{},
		eval:    analysis.NewEvaluator(p.cfg.Analysis),
		folder:  analysis.NewFolder(p.cfg.Analysis.Limits),
	}
}

// run flushes due traces every tick and stores summaries every interval,
// until ctx ends. A batch under way when ctx ends is finished, not cut
// short (its work runs on a context that only stop can end: see process);
// one in flight is left to the caller (flushAll).
func (a *analyser) run(ctx context.Context) error {
	tick := time.NewTicker(a.p.cfg.Tick)
	defer tick.Stop()
	sums := time.NewTicker(a.p.cfg.SummaryInterval)
	defer sums.Stop()
	var peerTick <-chan time.Time // nil (never) unless partitioned
	if a.p.peers != nil {
		t := time.NewTicker(a.p.cfg.PeerRefresh)
		defer t.Stop()
		peerTick = t.C
	}
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
		case <-peerTick:
			if err := a.refreshPeers(work); err != nil && ctx.Err() == nil {
				a.p.m.storeErrors.WithLabelValues("peers").Inc()
				a.p.log.Warn("reading the other partitions' window states", "err", err)
			}
		case r := <-a.p.flushReq:
			r.done <- a.flushAll(ctx, work, "flush")
		case err := <-a.inFlight():
			a.prev.err, a.prev.ended = err, true
			if err := a.finish(work); err != nil && ctx.Err() == nil {
				a.p.m.storeErrors.WithLabelValues("apply").Inc()
				a.p.log.Warn("store batch failed, its traces are analysed again", "err", err)
			}
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
	return a.process(stop, work, group, false)
}

// flushAll analyses every pending trace, waits until every batch is
// stored, and stores the summaries.
func (a *analyser) flushAll(stop, work context.Context, reason string) error {
	p := a.p
	for {
		restored := a.restored
		p.mu.Lock()
		group := p.pending.all(nil)
		p.mu.Unlock()
		p.m.flushed.WithLabelValues(reason).Add(float64(len(group)))
		if err := a.process(stop, work, group, true); err != nil {
			return err
		}
		if a.restored == restored {
			break // else a batch failed and its traces are pending again
		}
	}
	if a.p.peers != nil {
		// One of several partitions: what the others stored so far is in
		// the windows too, and the records it makes stale are replaced.
		if err := a.refreshPeers(work); err != nil {
			return err
		}
	}
	return a.storeSummaries(work)
}

// maxGroup bounds the traces analysed in one store batch.
const maxGroup = 10000

// job is one store batch: computed by the analyser, then applied by the
// store on a goroutine of its own while the analyser computes the next
// one. At most one job is in flight (analyser.prev).
type job struct {
	part   []*pendingTrace
	batch  store.Batch
	before map[int64]map[graph.Edge]edgeBefore // the windows it touched
	// recs are the records the batch stores, by trace (nil: deleted):
	// what the store holds once the batch is applied, which the next
	// batch, computed meanwhile, reads in place of the store's answers.
	recs map[graph.TraceID]*store.Record
	// splits are the traces it sets aside as split, with the other
	// partition that wrote spans of each: counted once it is stored.
	splits   map[graph.TraceID]string
	start    time.Time
	computed time.Duration
	done     chan error
	err      error
	ended    bool
}

// wait returns the job's outcome, waiting for it the first time.
func (j *job) wait() error {
	if !j.ended {
		j.err, j.ended = <-j.done, true
	}
	return j.err
}

// inFlight returns the channel that reports the end of the batch in
// flight (nil, which blocks, when there is none).
func (a *analyser) inFlight() <-chan error {
	if a.prev == nil || a.prev.ended {
		return nil
	}
	return a.prev.done
}

// process analyses a group of traces, in store batches of at most maxGroup
// traces. Each batch is computed, then applied while the next one is
// computed; the last stays in flight when process returns unless drain is
// set. Batches run on work; a batch the store refused as unavailable is
// retried with backoff until it is stored or stop ends. Traces that could
// not be stored go back to the pending buffer, so that the checkpoint
// never passes their spans: they are analysed at a later tick, or — after
// a stop — recovered from the store at the next start.
func (a *analyser) process(stop, work context.Context, group []*pendingTrace, drain bool) error {
	// floors[k]: the checkpoint a batch may store while group[k:] is not
	// stored yet (below the first write of each of them).
	floors := make([]uint64, len(group)+1)
	floors[len(group)] = math.MaxUint64
	for k := len(group) - 1; k >= 0; k-- {
		floors[k] = min(floors[k+1], group[k].minSeq-1)
	}
	for i := 0; ; {
		part := group[i:min(i+maxGroup, len(group))]
		if len(part) == 0 && (!drain || a.prev == nil) {
			return nil
		}
		backoff := 100 * time.Millisecond
		for {
			err := a.step(work, part, floors[i+len(part)])
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
		if len(part) == 0 {
			return nil
		}
		i += len(part)
	}
}

// restore puts traces that could not be analysed back in the pending
// buffer, with their original write sequences.
func (a *analyser) restore(traces []*pendingTrace) {
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending.restore(traces, p.cfg.Now())
}

// release returns the in-flight budget of analysed traces.
func (a *analyser) release(part []*pendingTrace) {
	n := 0
	for _, t := range part {
		n += len(t.spans)
	}
	a.p.inflight.Add(-int64(n))
	a.p.mu.Lock()
	a.p.setPendingGauges()
	a.p.mu.Unlock()
}

// step computes part as one store batch (its checkpoint at most floor)
// and hands it to the store once the batch in flight is stored. On error
// nothing of part is applied to the in-memory windows (they are
// restored), so it can be retried; when the batch in flight failed, its
// traces are back in the pending buffer. With part empty, step finishes
// the batch in flight.
func (a *analyser) step(ctx context.Context, part []*pendingTrace, floor uint64) error {
	// After a failed batch, windows are read from the store again and
	// checked (settle): nothing may be in flight meanwhile.
	careful := len(a.suspect) > 0
	if careful {
		if err := a.finish(ctx); err != nil {
			return err
		}
	}
	var j *job
	if len(part) > 0 {
		var err error
		if j, err = a.compute(ctx, part, floor); err != nil {
			// The windows it dropped are read from the store again: the
			// batch in flight must be stored first.
			return errors.Join(err, a.finish(ctx))
		}
	}
	if err := a.finish(ctx); err != nil {
		if j != nil {
			a.undo(j, false)
		}
		return err
	}
	if j == nil {
		return nil
	}
	j.done = make(chan error, 1)
	go func(b store.Batch) { j.done <- a.p.st.Apply(ctx, b) }(j.batch)
	a.prev = j
	if careful {
		return a.finish(ctx)
	}
	return nil
}

// finish waits for the batch in flight. Once it is stored, its traces'
// budget is released (and the suspect windows are checked); if it
// failed, its windows are forgotten and its traces go back to the pending
// buffer.
func (a *analyser) finish(ctx context.Context) error {
	j := a.prev
	if j == nil {
		return nil
	}
	err := j.wait()
	a.prev = nil
	p := a.p
	if err != nil {
		a.undo(j, true)
		a.restore(j.part)
		a.restored++
		return err
	}
	p.m.applySeconds.Observe(time.Since(j.start).Seconds())
	if p.log.Enabled(ctx, slog.LevelDebug) {
		p.log.Debug("analysis batch stored", "traces", len(j.part), "changes", len(j.batch.Changes),
			"computed_in", j.computed, "stored_after", time.Since(j.start))
	}
	a.release(j.part)
	p.m.analysed.Add(float64(len(j.part) - len(j.splits)))
	for id, other := range j.splits {
		p.m.split.Inc()
		if p.cfg.OnSplit != nil {
			p.cfg.OnSplit(id, other)
		}
	}
	if err := a.settle(ctx); err != nil {
		p.log.Warn("checking window states after a failed batch", "err", err)
	}
	return nil
}

// undo forgets the windows j touched, to be loaded again from the store:
// after every stored batch the in-memory states equal the stored ones. A
// store that could not apply a submitted batch atomically (ClickHouse)
// may hold part of it: its states then say they are not exact, and are
// rebuilt from the records as they are, and the windows are checked
// again once a batch is stored (settle).
func (a *analyser) undo(j *job, submitted bool) {
	for w := range j.before {
		a.forget(w)
		if submitted {
			a.suspect[w] = true
			a.dirty[w] = true // its summary may have been stored with the batch's changes
		}
	}
}

// compute analyses part as one store batch, against the windows as the
// batch in flight leaves them and reading that batch's records in place of
// the store's (it may not be stored yet). Its steps follow the data path
// (docs/ARCHITECTURE.md, "Data path", steps 5–7): re-open, assemble, fold
// and snapshot, add to the windows, evaluate, re-evaluate the records a
// flip made stale, build the store batch.
func (a *analyser) compute(ctx context.Context, part []*pendingTrace, floor uint64) (*job, error) {
	start := time.Now()
	olds, err := a.oldRecords(ctx, part)
	if err != nil {
		return nil, err
	}
	splits, err := a.sharedTraces(ctx, part)
	if err != nil {
		return nil, err
	}
	items, err := a.assemble(ctx, part, olds, splits)
	if err != nil {
		return nil, err
	}
	before, err := a.foldAndSnapshot(ctx, items)
	if err != nil {
		return nil, err
	}
	j := &job{part: part, before: before, start: start, splits: splits}
	a.addToWindows(items)
	changes, inGroup := a.evaluate(items)
	if changes, err = a.reevaluateFlipped(ctx, before, inGroup, changes); err != nil {
		a.undo(j, false)
		return nil, err
	}
	a.buildBatch(ctx, j, changes, floor)
	return j, nil
}

// batchTrace is one trace of a batch being computed: its new assembly,
// and, when it is re-opened, its stored record and that record's trace.
type batchTrace struct {
	old    *store.Record
	oldT   *graph.Trace // nil when old is nil or a split trace's
	newT   *graph.Trace
	maxSeq uint64 // the latest write its new record covers
	// split: another partition wrote spans of the trace too; it is set
	// aside (newT, assembled from every partition's spans, gives its start
	// alone): its old record's facts leave the window, none enter it, and
	// a record marks it split. Partitions that find it at the same time
	// (none with a record of it yet) leave that record to the one of least
	// name (drop: the others store nothing), or each would add one.
	split, drop bool
}

// sharedTraces returns, of part's traces, those another partition wrote
// spans of too (nil unless the pipeline is one partition's analyser).
func (a *analyser) sharedTraces(ctx context.Context, part []*pendingTrace) (map[graph.TraceID]string, error) {
	if a.p.routing == nil {
		return nil, nil
	}
	ids := make([]graph.TraceID, len(part))
	for i, t := range part {
		ids[i] = t.id
	}
	m, err := a.p.routing.SharedTraces(ctx, ids)
	if len(m) == 0 {
		m = nil
	}
	return m, err
}

// oldRecords returns the stored records of part's traces (a trace with
// one is re-opened), reading those the batch in flight stores in place of
// the store's.
func (a *analyser) oldRecords(ctx context.Context, part []*pendingTrace) (map[graph.TraceID]*store.Record, error) {
	ids := make([]graph.TraceID, len(part))
	for i, t := range part {
		ids[i] = t.id
	}
	olds, err := a.p.st.Records(ctx, ids)
	if err != nil {
		return nil, err
	}
	if prev := a.prev; prev != nil {
		for _, id := range ids {
			if r, ok := prev.recs[id]; ok {
				a.fromFlight++
				if r == nil {
					delete(olds, id)
				} else {
					olds[id] = r
				}
			}
		}
	}
	return olds, nil
}

// assemble assembles part's traces, a re-opened one (its record in olds)
// from all its stored spans. The span buffer a.spans is reused from trace
// to trace.
func (a *analyser) assemble(ctx context.Context, part []*pendingTrace, olds map[graph.TraceID]*store.Record,
	splits map[graph.TraceID]string) ([]batchTrace, error) {
	p := a.p
	items := make([]batchTrace, 0, len(part))
	for _, t := range part {
		it := batchTrace{old: olds[t.id], maxSeq: t.maxSeq}
		other, split := splits[t.id]
		it.split = split
		it.drop = split && it.old == nil && other < p.routing.PartitionName()
		var spans []graph.Span
		if it.split {
			// Its start, whichever partition sets it aside, is that of
			// every partition's spans: the record lands in one minute.
			var err error
			if it.old != nil {
				if it.oldT, err = facts(it.old); err != nil {
					return nil, err
				}
				it.maxSeq = max(it.old.Seq, t.maxSeq)
			}
			if spans, err = p.st.TraceSpans(ctx, t.id, a.spans[:0]); err != nil {
				return nil, err
			}
			a.spans = spans[:0]
		} else if it.old != nil {
			// A late span re-opens the trace: all its stored spans (they
			// include the new ones) make the new trace.
			p.m.reopened.Inc()
			if late := minStart(t.spans); late-it.old.Start > int64(a.windows.Size) {
				p.m.idReused.Inc()
			}
			var err error
			if it.oldT, err = facts(it.old); err != nil {
				return nil, err
			}
			if spans, err = p.st.TraceSpans(ctx, t.id, a.spans[:0]); err != nil {
				return nil, err
			}
			a.spans = spans[:0]
			it.maxSeq = max(it.old.Seq, t.maxSeq)
		} else {
			spans = append(a.spans[:0], t.spans...)
		}
		it.newT = a.asm.Assemble(spans)
		if it.old == nil && !it.split {
			a.spans = it.newT.Spans[:0]
		}
		it.newT.Spans = nil
		p.m.duplicates.Add(float64(it.newT.Duplicates))
		items = append(items, it)
	}
	return items, nil
}

// foldAndSnapshot folds the names past each new trace's window's caps,
// and remembers, before the batch changes the window states, the class
// of every edge it touches (the old traces' and the new ones'), so that
// flips are found and the states can be restored if the store refuses the
// batch: by window, the edges' classes before.
func (a *analyser) foldAndSnapshot(ctx context.Context, items []batchTrace) (map[int64]map[graph.Edge]edgeBefore, error) {
	before := map[int64]map[graph.Edge]edgeBefore{}
	for _, it := range items {
		if it.oldT != nil {
			w := a.windows.Of(it.oldT)
			st, err := a.state(ctx, w)
			if err != nil {
				return nil, err
			}
			a.snapshot(before, w, st, it.oldT)
		}
		if it.split {
			continue // nothing of it enters a window
		}
		// Names past the window's caps are folded before the trace's
		// edges are looked at: they are its edges from here on. A
		// re-opened trace finds its names admitted (they stay so).
		w := a.windows.Of(it.newT)
		st, err := a.state(ctx, w)
		if err != nil {
			return nil, err
		}
		a.folded(a.folder.Fold(st.Admitted(), it.newT), w)
		a.snapshot(before, w, st, it.newT)
	}
	return before, nil
}

// snapshot adds to before the edges of t in window w not there yet, with
// their class in the window's state st as it is now.
func (a *analyser) snapshot(before map[int64]map[graph.Edge]edgeBefore, w int64, st *analysis.State, t *graph.Trace) {
	m := before[w]
	if m == nil {
		m = map[graph.Edge]edgeBefore{}
		before[w] = m
	}
	for i := range t.Calls {
		e := analysis.CallEdge(t, &t.Calls[i])
		if _, ok := m[e]; !ok {
			m[e] = edgeBefore{class: st.Class(e, a.cfg), used: st.Edges[e] != nil}
		}
	}
}

// addToWindows applies the batch to the window states: a re-opened
// trace's old facts are subtracted, every new trace added.
func (a *analyser) addToWindows(items []batchTrace) {
	for _, it := range items {
		if it.oldT != nil {
			a.windows.Remove(it.oldT)
		}
		if !it.split {
			a.windows.Add(it.newT)
		}
	}
}

// evaluate evaluates every trace of the batch against its window: the
// changes that store their records, and the set of the batch's traces.
func (a *analyser) evaluate(items []batchTrace) ([]store.Change, map[graph.TraceID]bool) {
	changes := make([]store.Change, 0, len(items))
	inGroup := make(map[graph.TraceID]bool, len(items))
	for _, it := range items {
		w := a.windows.Of(it.newT)
		inGroup[it.newT.ID] = true
		if it.drop {
			continue
		}
		if it.split {
			r := analysis.TraceResult{TraceID: it.newT.ID, Start: it.newT.Start(), Window: w, Split: true}
			changes = append(changes, store.Change{Old: it.old, New: &store.Record{TraceID: r.TraceID, Start: r.Start,
				Window: w, Seq: it.maxSeq, Result: &r, Facts: []byte{}}})
			continue
		}
		r := a.eval.Evaluate(it.newT, a.windows.State(w))
		changes = append(changes, store.Change{Old: it.old, New: store.NewRecord(it.newT, &r, it.maxSeq)})
	}
	return changes, inGroup
}

// reevaluateFlipped marks the windows the batch touched as changed and
// appends to changes those that replace the records of other traces
// evaluated with an edge class that just changed (flipped): they are
// stale, and are evaluated again in the same batch.
func (a *analyser) reevaluateFlipped(ctx context.Context, before map[int64]map[graph.Edge]edgeBefore,
	inGroup map[graph.TraceID]bool, changes []store.Change) ([]store.Change, error) {
	for w, m := range before {
		st := a.windows.State(w)
		a.touched[w] = a.p.cfg.Now()
		a.dirty[w] = true
		var flipped []uint64
		for e, was := range m {
			// An edge no record used yet has no record to evaluate again.
			if now := st.Class(e, a.cfg); was.used && now != was.class {
				flipped = append(flipped, store.EdgeKey(e))
			}
		}
		if len(flipped) == 0 {
			continue
		}
		slices.Sort(flipped)
		var err error
		if changes, err = a.reevaluateWindow(ctx, w, st, flipped, inGroup, changes); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// reevaluateWindow evaluates again, against st, the records of window w
// that use a flipped edge (EdgeKeys, sorted), but those of the batch's own
// traces (inGroup), and appends the changes of those whose result
// changed. The records of the batch in flight are read from it, not from
// the store.
func (a *analyser) reevaluateWindow(ctx context.Context, w int64, st *analysis.State, flipped []uint64,
	inGroup map[graph.TraceID]bool, changes []store.Change) ([]store.Change, error) {
	p, prev := a.p, a.prev
	again := func(rec *store.Record) error {
		t, err := facts(rec)
		if err != nil || t == nil {
			return err
		}
		// A flip that does not change this trace's figures changes nothing.
		if c, ok := a.reevaluate(rec, t, st); ok {
			changes = append(changes, c)
			p.m.reevaluated.Inc()
		}
		return nil
	}
	err := p.st.WindowRecords(ctx, w, flipped, func(rec *store.Record) error {
		if inGroup[rec.TraceID] {
			return nil // being replaced in this batch
		}
		if prev != nil {
			if _, ok := prev.recs[rec.TraceID]; ok {
				return nil // read from the batch in flight, below
			}
		}
		return again(rec)
	})
	if prev != nil {
		for _, c := range prev.batch.Changes {
			if err != nil {
				break
			}
			rec := c.New // the record it stores (the last change of the trace: recs)
			if rec != nil && prev.recs[rec.TraceID] == rec && rec.Window == w && !inGroup[rec.TraceID] &&
				store.SharesEdge(rec.Edges, flipped) {
				a.fromFlight++
				err = again(rec)
			}
		}
	}
	return changes, err
}

// buildBatch makes j's store batch from changes: with the states of the
// windows it touched as it leaves them, copied (the next batch changes
// the windows while this one is stored), and the checkpoint, at most
// floor.
func (a *analyser) buildBatch(ctx context.Context, j *job, changes []store.Change, floor uint64) {
	p := a.p
	states := make(map[int64]*analysis.State, len(j.before))
	for w := range j.before {
		states[w] = a.ownState(w)
	}
	p.mu.Lock()
	wm := min(p.pending.watermark(), floor)
	p.mu.Unlock()
	j.batch = store.Batch{Changes: changes, States: states, Watermark: wm}
	j.computed = time.Since(j.start)
	j.recs = make(map[graph.TraceID]*store.Record, len(changes))
	for _, c := range changes {
		j.recs[c.ID()] = c.New
	}
	if p.log.Enabled(ctx, slog.LevelDebug) {
		p.log.Debug("analysis batch computed", "traces", len(j.part), "changes", len(changes), "windows", len(j.before),
			"in", j.computed, "in_flight", a.prev != nil)
	}
}

// foldLogEvery spaces the log lines that say names were folded.
const foldLogEvery = time.Minute

// folded counts a trace's folded names (window w) and logs them, at most
// once per foldLogEvery: a client inventing names is worth knowing about,
// not worth a line per trace.
func (a *analyser) folded(f analysis.Folded, w int64) {
	if f == 0 {
		return
	}
	for i, c := range a.p.m.folded {
		if f&(1<<i) != 0 {
			c.Inc()
		}
	}
	a.folds.Add(f, 1)
	now := a.p.cfg.Now()
	if now.Sub(a.foldLogged) < foldLogEvery {
		return
	}
	lim := a.folder.Limits()
	args := []any{"window_start", time.Unix(0, w*int64(a.windows.Size)).UTC(),
		"traces_with_apis_folded", a.folds.APIs, "traces_with_services_folded", a.folds.Services,
		"traces_with_operations_folded", a.folds.Operations, "traces_with_versions_folded", a.folds.Versions,
		"max_apis", lim.APIs, "max_services", lim.Services, "max_operations", lim.Operations, "max_versions", lim.Versions}
	if !a.foldLogged.IsZero() {
		args = append(args, "since", a.foldLogged)
	}
	a.p.log.Warn("names past a window's caps are counted under "+graph.OtherAPI+", "+graph.OtherService+", "+
		graph.OtherOperation+" and "+graph.OtherVersion+" (see --max-apis, --max-services, --max-operations, --max-versions)",
		args...)
	a.folds, a.foldLogged = analysis.FoldCounts{}, now
}

// edgeBefore is an edge's class in a window before a batch, and whether
// the window's records (stored, or in the batch in flight) used it.
type edgeBefore struct {
	class analysis.EdgeClass
	used  bool
}

// facts decodes the trace of a stored record: nil for a trace set aside
// as split, which has none (it is in no window).
func facts(rec *store.Record) (*graph.Trace, error) {
	if rec.Result != nil && rec.Result.Split {
		return nil, nil
	}
	t, err := graph.DecodeTrace(rec.Facts)
	if err != nil {
		return nil, fmt.Errorf("pipeline: trace %s: %w: %w", rec.TraceID, store.ErrCorrupt, err)
	}
	return t, nil
}

// reevaluate evaluates the trace t of a stored record against st: the
// change that replaces the record, or false when its result stays.
func (a *analyser) reevaluate(rec *store.Record, t *graph.Trace, st *analysis.State) (store.Change, bool) {
	r := a.eval.Evaluate(t, st)
	if reflect.DeepEqual(&r, rec.Result) {
		return store.Change{}, false
	}
	return store.Change{Old: rec, New: &store.Record{TraceID: rec.TraceID, Start: r.Start, Window: r.Window, API: r.API,
		Seq: rec.Seq, Result: &r, Facts: rec.Facts, Edges: rec.Edges}}, true
}

// settle checks, once a batch is stored and none is in flight, the
// windows a failed batch touched: a store that could not apply that batch
// atomically may have let part of it land after the pipeline read the
// store again (an insert whose connection died), so the state is summed
// from the window's records as they now are — the stored batch superseded
// whatever landed — and replaces the in-memory and stored state if it
// differs.
func (a *analyser) settle(ctx context.Context) error {
	for w := range a.suspect {
		st := analysis.NewState()
		var recs []*store.Record
		var traces []*graph.Trace
		err := a.p.st.WindowRecords(ctx, w, nil, func(rec *store.Record) error {
			t, err := facts(rec)
			if err != nil || t == nil {
				return err
			}
			st.Add(t, 1)
			recs, traces = append(recs, rec), append(traces, t)
			return nil
		})
		if err != nil {
			return err
		}
		cur := a.ownState(w)
		// What the window admitted is not in its records: it stays.
		st.KeepAdmitted(cur)
		x, _ := json.Marshal(st)
		y, _ := json.Marshal(cur)
		if string(x) != string(y) {
			a.p.log.Warn("window state corrected from its records after a failed batch", "window", w,
				"traces", st.Traces, "was", cur.Traces)
			// The window's results were evaluated against the wrong state:
			// evaluate them again, in the batch that stores the state,
			// against the whole window (with the other partitions' part).
			whole := st
			if pe := a.peers[w]; pe != nil {
				whole = analysis.NewState()
				whole.Merge(st, 1)
				whole.Merge(pe, 1)
				whole.KeepAdmitted(st)
				if mem := a.windows.State(w); mem != nil {
					whole.KeepAdmitted(mem)
				}
			}
			var changes []store.Change
			for i, rec := range recs {
				if c, ok := a.reevaluate(rec, traces[i], whole); ok {
					changes = append(changes, c)
				}
			}
			if err := a.p.st.Apply(ctx, store.Batch{Changes: changes, States: map[int64]*analysis.State{w: st}}); err != nil {
				return err
			}
			if whole.Traces > 0 {
				a.windows.Put(w, whole)
			} else {
				a.windows.Drop(w)
			}
			a.touched[w] = a.p.cfg.Now()
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
	// The state returned is the window's, even empty: the names a batch
	// admits into it (Folder.Fold) are those the next trace sees.
	if _, ok := a.touched[w]; ok {
		st := analysis.NewState() // known, and empty
		if err := a.addPeers(ctx, w, st); err != nil {
			return nil, err
		}
		a.windows.Put(w, st)
		return st, nil
	}
	st, exact, err := a.p.st.State(ctx, w)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st, exact = analysis.NewState(), true
	case err != nil:
		return nil, err
	case a.p.peers != nil:
		a.recheck[w] = true
	}
	if !exact {
		st = analysis.NewState()
		err := a.p.st.WindowRecords(ctx, w, nil, func(rec *store.Record) error {
			t, err := facts(rec)
			if err != nil || t == nil {
				return err
			}
			st.Add(t, 1)
			return nil
		})
		if err != nil {
			return nil, err
		}
		a.p.log.Info("window state rebuilt from its records", "window", w, "traces", st.Traces)
	}
	if err := a.addPeers(ctx, w, st); err != nil {
		return nil, err
	}
	// The names the window admitted are those its counts hold now (and
	// those stored with it): fix them before a re-opened trace that leaves
	// the window takes its names out of the counts (they stay admitted).
	st.Admitted()
	a.windows.Put(w, st)
	a.touched[w] = a.p.cfg.Now()
	return st, nil
}

// storeSummaries stores the summaries of the windows that changed. The
// in-memory states are those the batch in flight leaves (it is the only
// one not stored yet); if it fails, its windows are summarised again
// (undo). A window forgotten after a failed batch is read from the store.
func (a *analyser) storeSummaries(ctx context.Context) error {
	if len(a.dirty) == 0 {
		return nil
	}
	var sums []*analysis.WindowSummary
	for w := range a.dirty {
		st, err := a.state(ctx, w)
		if err != nil {
			return err
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
			a.forget(w)
		}
	}
}

// setPendingGauges sets the pending gauges from the buffer; p.mu is held.
func (p *Pipeline) setPendingGauges() {
	p.m.pendingTraces.Set(float64(p.pending.traces()))
	p.m.pendingSpans.Set(float64(p.pending.spans))
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
