// Package offline is the file engine of `stormradius analyze` (and of
// `whatif` over a file): the same analysis as the streaming service
// (package pipeline), for a finite input, with no store.
//
// It reads the input once. Spans are copied, packed without pointers,
// into fixed chunks of a span store, with the index of their trace: no
// per-trace slice, nothing allocated per span. An input whose spans fit
// the memory budget (Config.MemoryBudget) never touches the disk; past
// it, the spans held are sorted by trace id and written to a spill file
// (a run), and the store starts empty again. Once the input ends, the
// traces are visited — in the order the store first saw them when
// nothing was spilled, else in trace id order, the runs merged with what
// the store holds (a trace whose spans are in several runs is whole
// again):
// each trace is assembled and added to its window's state; then, every
// window's state being final (an evaluation needs it: docs/SPEC.md §4.3),
// visited again, assembled again and evaluated. Assembling twice costs
// less than writing and reading back each trace's facts. On one core
// everything runs on the caller's goroutine; on several, one goroutine
// merges and hands batches of traces to a worker per core. Memory is
// bounded by the budget, the window states and a trace's spans at a time,
// not by the input.
package offline

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// DefaultMemoryBudget is Config.MemoryBudget's default: about 1.2 M spans
// held in memory. With the window states, the decoder's buffers and the
// Go runtime, `analyze` stays within 256 MiB.
const DefaultMemoryBudget = 96 << 20

// Config configures Analyze.
type Config struct {
	// Analysis holds the analysis rules (window length included).
	Analysis analysis.Config
	// MemoryBudget bounds the bytes the spans held in memory take (their
	// packed form, their traces' index and their names): past it, they
	// go to a spill file. Zero: DefaultMemoryBudget.
	MemoryBudget int64
	// MaxPendingSpans, when positive, also bounds the spans held in
	// memory (tests use it to spill small inputs).
	MaxPendingSpans int
	// TempDir holds the spill files (os.TempDir() when empty).
	TempDir string
	// Range selects the traces the document counts, by the minute of
	// their start, exactly as `report` selects them (zero: everything);
	// every trace still counts in its window, and the document's window
	// figures come from the windows the range overlaps.
	Range store.Query
}

// Stats describes an Analyze run.
type Stats struct {
	Traces int
	// Reopened counts the traces whose spans were split between runs
	// (late spans of a trace already spilled), made whole by the merge.
	Reopened int
	// FlushedEarly counts the traces written to a spill file before the
	// input ended (a trace in several runs is counted in each).
	FlushedEarly int
	// SpillBytes is the size of the spill files of spans.
	SpillBytes int64
	// Folded counts the traces whose names were past their window's caps
	// (analysis.Limits), by kind.
	Folded analysis.FoldCounts
	// Truncated counts the spans read with a name cut to
	// graph.MaxNameLen.
	Truncated int
}

// Analyze analyses the spans read pulls from a finite input (`analyze`): the
// same analysis as the service, on a finite input, with the same caps on the
// names a window admits (cfg.Analysis.Limits: past them, names are
// admitted in the order of trace ids on one core, as analysis.InMemory
// admits those of a graph.Grouper's traces; on several, in the order the
// workers reach them). See the package doc for how: one pass over the input, spans
// spilled only past cfg.MemoryBudget.
//
// read calls emit with the spans of each request it decodes; the slice is
// not kept after emit returns. emit is not called concurrently.
func Analyze(ctx context.Context, read func(emit func([]graph.Span) error) error, cfg Config) (*analysis.Document, *analysis.Windows, Stats, error) {
	if cfg.MemoryBudget <= 0 {
		cfg.MemoryBudget = DefaultMemoryBudget
	}
	if cfg.Analysis.Window <= 0 {
		cfg.Analysis.Window = analysis.DefaultWindow
	}
	e := &engine{cfg: cfg, adm: analysis.NewAdmissions(cfg.Analysis),
		workers: max(1, min(runtime.GOMAXPROCS(0), maxWorkers))}
	e.spans.reset()
	defer func() {
		for _, r := range e.runs {
			r.remove()
		}
	}()
	readErr := read(func(spans []graph.Span) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return e.add(spans)
	})
	if ctx.Err() != nil {
		return nil, nil, e.stats, ctx.Err()
	}
	if e.spillErr != nil {
		return nil, nil, e.stats, e.spillErr
	}
	// With every span in memory, traces are visited in the order the
	// store first saw them (the input's: read in order) and names are
	// admitted in that order, which changes nothing unless a window has
	// more names than its caps. When the first visit folded a name, it
	// is done again in trace id order (the order runs are merged in):
	// which names a window admits does not depend on how the input was
	// batched.
	inputOrder := len(e.runs) == 0
	if err := e.firstPass(ctx, inputOrder); err != nil {
		return nil, nil, e.stats, err
	}
	if inputOrder && e.stats.Folded != (analysis.FoldCounts{}) {
		e.adm = analysis.NewAdmissions(cfg.Analysis)
		e.stats.Traces, e.stats.Folded = 0, analysis.FoldCounts{}
		if err := e.firstPass(ctx, false); err != nil {
			return nil, nil, e.stats, err
		}
	}
	// A read error after some input still gives the report of what was
	// read (the caller reports the error).
	doc, err := e.evaluate(ctx)
	if err != nil {
		return nil, nil, e.stats, err
	}
	return doc, e.windows, e.stats, readErr
}

// maxWorkers bounds the goroutines that assemble and evaluate traces.
const maxWorkers = 8

// engine is one Analyze run.
type engine struct {
	cfg      Config
	windows  *analysis.Windows
	adm      *analysis.Admissions // what each window admitted, in trace id order
	stats    Stats
	workers  int
	spans    spanStore
	runs     []*spill // the spilled runs, each sorted by trace id
	spillErr error
}

// add copies spans into the store, spilling it when it is over budget.
func (e *engine) add(spans []graph.Span) error {
	if e.spillErr != nil {
		return e.spillErr
	}
	s := &e.spans
	for i := range spans {
		sp := &spans[i]
		s.add(sp)
		if sp.Truncated {
			e.stats.Truncated++
		}
		if s.n == e.cfg.MaxPendingSpans || s.n&1023 == 0 && s.size() > e.cfg.MemoryBudget {
			if e.spillErr = e.spill(); e.spillErr != nil {
				return e.spillErr
			}
		}
	}
	return nil
}

// spill writes the store's traces, in trace id order, to a new run and
// empties the store.
func (e *engine) spill() error {
	sp, err := openSpill(e.cfg.TempDir)
	if err != nil {
		return err
	}
	e.runs = append(e.runs, sp)
	s := &e.spans
	s.group(true)
	var buf []graph.Span
	for r := range s.order {
		buf = s.gather(r, buf[:0])
		sp.enc = append(sp.enc[:0], buf[0].TraceID[:]...)
		sp.enc = sp.coder.AppendSpans(sp.enc, buf)
		if _, err := sp.write(recSpans, sp.enc); err != nil {
			return err
		}
	}
	if err := sp.w.Flush(); err != nil {
		return fmt.Errorf("analyze: spill file: %w", err)
	}
	e.stats.FlushedEarly += len(s.order)
	e.stats.SpillBytes += sp.size
	s.reset()
	return nil
}

// firstPass orders the store's traces (by trace id, or in the order the
// store first saw them: inputOrder), copies its spans into that order
// when worth it and within half the budget (sortSpans: both visits then
// read them in order), and adds every trace to its window's state.
func (e *engine) firstPass(ctx context.Context, inputOrder bool) error {
	e.spans.group(!inputOrder)
	if e.spans.size() <= e.cfg.MemoryBudget/2 {
		e.spans.sortSpans()
	}
	return e.addToWindows(ctx)
}

// addToWindows assembles every trace and adds it to its window's state.
func (e *engine) addToWindows(ctx context.Context) error {
	asm := make([]graph.Assembler, e.workers)
	windows := make([]*analysis.Windows, e.workers)
	traces := make([]int, e.workers)
	folded := make([]analysis.FoldCounts, e.workers)
	for w := range windows {
		windows[w] = analysis.NewWindows(e.cfg.Analysis.Window)
		windows[w].Growing() // traces are only added
	}
	err := e.eachTrace(ctx, true, func(w int, spans []graph.Span) error {
		t := asm[w].AssembleTransient(spans)
		folded[w].Add(e.adm.Fold(t), 1)
		windows[w].Add(t)
		traces[w]++
		return nil
	})
	for w := range windows {
		e.stats.Traces += traces[w]
		e.stats.Folded.Merge(folded[w])
		if w == 0 {
			e.windows = windows[0]
		} else {
			e.windows.Merge(windows[w])
		}
	}
	return err
}

// evaluate assembles every trace again and evaluates it against its
// window's final state, on every core. Each result (in range) is added
// once: to its minute's sums for a worker's first maxMinuteResults
// minutes (the report and the per-minute counts are then the sums'),
// beyond them to the worker's report and counts, and to a file of its
// own for the incidents. When the per-minute counts show incidents, their figures
// are gathered from both: only the filed results of their minutes are
// decoded, and no trace is evaluated twice.
func (e *engine) evaluate(ctx context.Context) (*analysis.Document, error) {
	workers := e.workers
	reports := make([]*analysis.Report, workers)
	minutes := make([]analysis.MinuteNodes, workers)
	results := make([]*spill, workers) // opened when first needed
	defer func() {
		for _, f := range results {
			if f != nil {
				f.remove()
			}
		}
	}()
	asm := make([]graph.Assembler, workers)
	evs := make([]*analysis.Evaluator, workers)
	// What incidents will need of each result: its minute's sums while a
	// worker has few minutes (no second look at the result), the result
	// itself in a spill file of the worker's beyond that.
	sums := make([]analysis.MinuteResults, workers)
	for w := range reports {
		reports[w], minutes[w], sums[w] = analysis.NewReport(), analysis.MinuteNodes{}, analysis.MinuteResults{}
		evs[w] = analysis.NewEvaluator(e.cfg.Analysis)
		evs[w].FrozenStates()     // every window's state is final now
		evs[w].TransientResults() // each result is summed or filed before the next
	}
	err := e.eachTrace(ctx, false, func(w int, spans []graph.Span) error {
		t := asm[w].AssembleTransient(spans)
		// The same names as the first time: a window's admitted names
		// only grew since, and a name refused was refused for a full set
		// (when none was refused, there is nothing to fold).
		if e.stats.Folded != (analysis.FoldCounts{}) { // a name was folded in the first pass
			e.adm.Fold(t)
		}
		r := evs[w].Evaluate(t, e.windows.State(e.windows.Of(t)))
		if !e.cfg.Range.Contains(r.Start) {
			return nil
		}
		if len(sums[w]) < maxMinuteResults || sums[w].Has(analysis.MinuteOf(r.Start)) {
			sums[w].Add(&r) // the report and the minute's counts are the sums' (below)
			return nil
		}
		reports[w].Add(&r, 1)
		minutes[w].Add(&r)
		if results[w] == nil {
			var err error
			if results[w], err = openSpill(e.cfg.TempDir); err != nil {
				return err
			}
		}
		return results[w].writeResult(&r)
	})
	if err != nil {
		return nil, err
	}
	rep := reports[0]
	for w := 1; w < workers; w++ {
		rep.Merge(reports[w], 1)
		minutes[0].Merge(minutes[w])
	}
	for w := range workers {
		sums[w].MergeInto(rep)
		sums[w].Nodes(minutes[0])
	}
	lo, hi := store.WindowRange(e.cfg.Range, e.cfg.Analysis.Window)
	windows := e.windows.Summaries(e.cfg.Analysis)
	out := windows[:0]
	for _, s := range windows {
		if s.Window >= lo && s.Window <= hi {
			out = append(out, s)
		}
	}
	doc := rep.Document(out, e.cfg.Analysis)
	spans := analysis.DetectIncidentsIn(minutes[0], e.cfg.Analysis.Incidents)
	if len(spans) == 0 {
		return doc, nil
	}
	cols := make([]*analysis.IncidentCollector, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range cols {
		cols[w] = analysis.NewIncidentCollector(spans)
		sums[w].AddTo(cols[w])
		if results[w] == nil {
			continue
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs[w] = results[w].eachResult(ctx, cols[w].CoversMinute, cols[w].Add)
		}(w)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for w := 1; w < workers; w++ {
		cols[0].Merge(cols[w])
	}
	doc.Incidents = cols[0].Docs(analysis.SummaryGraphs(out, e.cfg.Analysis.Window), e.cfg.Analysis.Incidents)
	return doc, nil
}

// maxMinuteResults bounds the minutes whose sums a worker keeps for the
// incidents' figures (6 hours of a file's traces; a minute's report holds
// its APIs, services and nodes); later minutes' results go to a spill file.
var maxMinuteResults = 360

// batchSpans is about how many spans a batch of traces handed to a worker
// holds.
const batchSpans = 8192

// eachTrace calls fn(w, spans) with the spans of every trace, the runs
// merged with the store, in trace id order on one core (fn may keep or
// modify spans until it returns). On several, one goroutine merges and
// hands batches of traces to e.workers workers, fn(w, …) being called by
// worker w only. count says to count the traces found in several runs.
func (e *engine) eachTrace(ctx context.Context, count bool, fn func(w int, spans []graph.Span) error) error {
	m, err := e.merger()
	if err != nil {
		return err
	}
	if e.workers == 1 {
		var buf []graph.Span
		for i := 0; ; i++ {
			if i&255 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			var parts int
			var ok bool
			buf, parts, ok, err = m.next(buf[:0])
			if err != nil || !ok {
				return err
			}
			if count && parts > 1 {
				e.stats.Reopened++
			}
			if err := fn(0, buf); err != nil {
				return err
			}
		}
	}
	type batch struct {
		spans []graph.Span
		ends  []int
	}
	work := make(chan *batch, 2*e.workers)
	free := make(chan *batch, 3*e.workers)
	for range cap(free) {
		free <- &batch{}
	}
	errs := make([]error, e.workers)
	failed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := range e.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				lo := 0
				for _, end := range b.ends {
					if errs[w] != nil {
						break // drain
					}
					if errs[w] = fn(w, b.spans[lo:end]); errs[w] != nil {
						once.Do(func() { close(failed) })
					}
					lo = end
				}
				free <- b
			}
		}()
	}
	b := <-free
	b.spans, b.ends = b.spans[:0], b.ends[:0]
	// Once a worker failed, merging stops: a batch not handed over is not
	// handed back either, and the free ones would run out.
merge:
	for i := 0; ; i++ {
		if i&255 == 0 {
			if err = ctx.Err(); err != nil {
				break
			}
		}
		var parts int
		var ok bool
		b.spans, parts, ok, err = m.next(b.spans)
		if err != nil || !ok {
			break
		}
		if count && parts > 1 {
			e.stats.Reopened++
		}
		b.ends = append(b.ends, len(b.spans))
		if len(b.spans) >= batchSpans {
			select {
			case work <- b:
			case <-failed:
				break merge
			}
			b = <-free
			b.spans, b.ends = b.spans[:0], b.ends[:0]
		}
	}
	if err == nil && len(b.ends) > 0 {
		select {
		case work <- b:
		case <-failed:
		}
	}
	close(work)
	wg.Wait()
	return errors.Join(err, errors.Join(errs...))
}

// merger returns a merger of the runs and the store, each positioned at
// its first trace.
func (e *engine) merger() (*merger, error) {
	m := &merger{s: &e.spans, in: graph.Interner{}}
	for _, r := range e.runs {
		c, err := newCursor(r)
		if err != nil {
			return nil, err
		}
		m.cursors = append(m.cursors, c)
		if c.ok {
			m.push(len(m.cursors) - 1)
		}
	}
	return m, nil
}

// merger visits the traces of the runs and of the store in trace id
// order, a trace's spans from every one of them together, in the order
// of the runs (the input's).
type merger struct {
	s       *spanStore
	rank    int // the store's next trace
	cursors []*cursor
	heap    []int // the cursors not at their end, by their trace id
	same    []int // scratch: the cursors at the trace being merged
	in      graph.Interner
}

// next appends the spans of the next trace to dst and says from how many
// runs (the store included) they came; ok is false once every trace was
// visited.
func (m *merger) next(dst []graph.Span) (_ []graph.Span, parts int, ok bool, err error) {
	var id graph.TraceID
	have := false
	if m.rank < len(m.s.order) {
		id, have = m.s.ids[m.s.order[m.rank]], true
	}
	if len(m.heap) > 0 {
		if c := m.cursors[m.heap[0]]; !have || idLess(c.id, id) {
			id, have = c.id, true
		}
	}
	if !have {
		return dst, 0, false, nil
	}
	m.same = m.same[:0]
	for len(m.heap) > 0 && m.cursors[m.heap[0]].id == id {
		m.same = append(m.same, m.pop())
	}
	slices.Sort(m.same)
	for _, i := range m.same {
		c := m.cursors[i]
		if dst, err = graph.DecodeSpans(c.rec, dst, m.in.Intern); err != nil {
			return dst, 0, false, fmt.Errorf("analyze: spill file: %w", err)
		}
		parts++
		if err := c.advance(); err != nil {
			return dst, 0, false, err
		}
		if c.ok {
			m.push(i)
		}
	}
	if m.rank < len(m.s.order) && m.s.ids[m.s.order[m.rank]] == id {
		dst = m.s.gather(m.rank, dst)
		m.rank++
		parts++
	}
	return dst, parts, true, nil
}

// before orders the heap: by trace id, then by run.
func (m *merger) before(i, j int) bool {
	a, b := m.cursors[m.heap[i]], m.cursors[m.heap[j]]
	if c := compareIDs(a.id, b.id); c != 0 {
		return c < 0
	}
	return m.heap[i] < m.heap[j]
}

// push adds cursor i to the heap.
func (m *merger) push(i int) {
	m.heap = append(m.heap, i)
	for k := len(m.heap) - 1; k > 0; {
		p := (k - 1) / 2
		if !m.before(k, p) {
			break
		}
		m.heap[k], m.heap[p] = m.heap[p], m.heap[k]
		k = p
	}
}

// pop removes the heap's first cursor and returns it.
func (m *merger) pop() int {
	top := m.heap[0]
	last := len(m.heap) - 1
	m.heap[0] = m.heap[last]
	m.heap = m.heap[:last]
	for k := 0; ; {
		l, r, least := 2*k+1, 2*k+2, k
		if l < len(m.heap) && m.before(l, least) {
			least = l
		}
		if r < len(m.heap) && m.before(r, least) {
			least = r
		}
		if least == k {
			break
		}
		m.heap[k], m.heap[least] = m.heap[least], m.heap[k]
		k = least
	}
	return top
}

// idLess orders trace ids as bytes.Compare does.
func idLess(a, b graph.TraceID) bool { return compareIDs(a, b) < 0 }

func compareIDs(a, b graph.TraceID) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}

// cursor reads a run's records in order: a trace id, then its spans
// (graph.TraceEncoder.AppendSpans).
type cursor struct {
	r    *bufio.Reader
	left int64
	ok   bool
	id   graph.TraceID
	rec  []byte // the spans of id
	buf  []byte
}

// cursorBuffer is a cursor's read buffer: a few dozen runs, each read at
// once, stay a few MiB.
const cursorBuffer = 64 << 10

func newCursor(s *spill) (*cursor, error) {
	c := &cursor{r: bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.size), cursorBuffer), left: s.size}
	return c, c.advance()
}

// advance reads the next record; c.ok is false at the end of the run.
func (c *cursor) advance() error {
	if c.left == 0 {
		c.ok = false
		return nil
	}
	var hdr [5]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return fmt.Errorf("analyze: spill file: %w", err)
	}
	n := int64(binary.LittleEndian.Uint32(hdr[1:]))
	if hdr[0] != recSpans || n < 16 || n > c.left-5 {
		return fmt.Errorf("analyze: spill file: a bad record (kind %d, %d bytes)", hdr[0], n)
	}
	if int64(cap(c.buf)) < n {
		c.buf = make([]byte, n)
	}
	b := c.buf[:n]
	if _, err := io.ReadFull(c.r, b); err != nil {
		return fmt.Errorf("analyze: spill file: %w", err)
	}
	c.left -= 5 + n
	copy(c.id[:], b)
	c.rec, c.ok = b[16:], true
	return nil
}

// chunkSpans is how many spans a chunk of the store holds: chunks are
// never regrown, so adding spans copies each span once.
const chunkSpans = 1 << 14

// packedSpan is a graph.Span without pointers, its trace an index in the
// store's ids and its names indexes in the store's names: chunks of them
// are memory the garbage collector does not scan.
type packedSpan struct {
	SpanID, ParentID                        graph.SpanID
	Start, End                              int64
	Target                                  uint64
	trace                                   int32
	service, version, name, operation, peer uint32
	Resend, StatusCode                      int32
	// adjusted is the span's adjusted count, an index in the store's
	// table of them (a sampled input has few distinct ones; 0: none).
	adjusted uint32
	Kind     graph.Kind
	Claim    graph.Claim
	FailOpen graph.Tri
	flags    uint8 // the flags below, and the span's sampling source at bits 4–5
}

// Span flags.
const (
	fFailed uint8 = 1 << iota
	fHasResend
	fCriteria
	fSuppressed
)

// Memory accounted per span (packed, plus its place in the grouping) and
// per trace (id, count, order, offset, index entry).
const (
	spanCost  = int64(unsafe.Sizeof(packedSpan{})) + 4
	traceCost = 16 + 4 + 4 + 4 + 48
	nameCost  = 16 + 16 + 8 // the string header, its index entry
)

// spanStore holds spans in chunks, by trace.
type spanStore struct {
	chunks [][]packedSpan // kept when the store is emptied
	n      int
	index  map[graph.TraceID]int32
	ids    []graph.TraceID
	counts []int32
	last   int32 // the trace of the last span added, -1 when none
	lastID graph.TraceID

	names map[string]uint32
	table []string
	// adjusted numbers the adjusted counts of the spans added, from 1
	// (adjustedTable[i-1]).
	adjusted      map[float64]uint32
	adjustedTable []float64
	nameBytes     int64
	cache         []nameSlot

	// By group: the traces in id order, where each one's spans start in
	// perm, and the spans (their places in the chunks) by trace.
	order []int32
	off   []int32
	perm  []int32
	next  []int32 // scratch
}

type nameSlot struct {
	p   *byte
	n   int
	idx uint32
}

// reset empties the store.
func (s *spanStore) reset() {
	s.n, s.last = 0, -1
	for i := range s.chunks {
		s.chunks[i] = s.chunks[i][:0]
	}
	s.index = make(map[graph.TraceID]int32, 1024)
	s.ids, s.counts = s.ids[:0], s.counts[:0]
	s.names = make(map[string]uint32, 256)
	s.table, s.nameBytes = s.table[:0], 0
	s.adjusted, s.adjustedTable = nil, s.adjustedTable[:0]
	if s.cache == nil {
		s.cache = make([]nameSlot, 4096)
	} else {
		clear(s.cache)
	}
	s.order, s.off, s.perm = s.order[:0], s.off[:0], s.perm[:0]
}

// size returns the bytes the store accounts for.
func (s *spanStore) size() int64 {
	return int64(s.n)*spanCost + int64(len(s.ids))*traceCost + s.nameBytes
}

// name returns the number of name n. Decoders intern names: a cache keyed
// by where a string's bytes are answers most lookups without hashing.
func (s *spanStore) name(n string) uint32 {
	p := unsafe.StringData(n)
	c := &s.cache[(uintptr(unsafe.Pointer(p))>>4^uintptr(len(n)))&uintptr(len(s.cache)-1)]
	if c.p == p && c.n == len(n) && p != nil {
		return c.idx
	}
	i, ok := s.names[n]
	if !ok {
		i = uint32(len(s.table))
		s.names[n] = i
		s.table = append(s.table, n)
		s.nameBytes += int64(len(n)) + nameCost
	}
	*c = nameSlot{p: p, n: len(n), idx: i}
	return i
}

// add copies sp into the store.
func (s *spanStore) add(sp *graph.Span) {
	t := s.last
	if t < 0 || sp.TraceID != s.lastID {
		var ok bool
		if t, ok = s.index[sp.TraceID]; !ok {
			t = int32(len(s.ids))
			s.index[sp.TraceID] = t
			s.ids = append(s.ids, sp.TraceID)
			s.counts = append(s.counts, 0)
		}
		s.last, s.lastID = t, sp.TraceID
	}
	s.counts[t]++
	c := s.n / chunkSpans
	if c == len(s.chunks) {
		s.chunks = append(s.chunks, make([]packedSpan, 0, chunkSpans))
	}
	var f uint8
	if sp.Failed {
		f |= fFailed
	}
	if sp.HasResend {
		f |= fHasResend
	}
	if sp.CriteriaSatisfied {
		f |= fCriteria
	}
	if sp.Suppressed {
		f |= fSuppressed
	}
	f |= uint8(sp.Sampling&3) << 4
	var adj uint32
	if sp.Sampling != graph.SamplingNone {
		adj = s.adjustedCount(sp.AdjustedCount)
	}
	chunk := s.chunks[c]
	chunk = chunk[:len(chunk)+1]
	p := &chunk[len(chunk)-1]
	*p = packedSpan{adjusted: adj,
		SpanID: sp.SpanID, ParentID: sp.ParentID, Start: sp.Start, End: sp.End, Target: sp.Target, trace: t,
		service: s.name(sp.Service), version: s.name(sp.Version), name: s.name(sp.Name),
		operation: s.name(sp.Operation), peer: s.name(sp.Peer),
		Resend: sp.Resend, StatusCode: sp.StatusCode, Kind: sp.Kind, Claim: sp.Claim, FailOpen: sp.FailOpen, flags: f,
	}
	s.chunks[c] = chunk
	s.n++
}

// adjustedCount returns the number of adjusted count a (from 1).
func (s *spanStore) adjustedCount(a float64) uint32 {
	if s.adjusted == nil {
		s.adjusted = map[float64]uint32{}
	}
	i, ok := s.adjusted[a]
	if !ok {
		s.adjustedTable = append(s.adjustedTable, a)
		i = uint32(len(s.adjustedTable))
		s.adjusted[a] = i
		s.nameBytes += 24 // accounted with the names
	}
	return i
}

// group orders the store's traces — by id, or in the order they were
// first seen — and their spans by trace (each trace's in input order),
// without moving them.
func (s *spanStore) group(byID bool) {
	s.order = s.order[:0]
	for i := range s.ids {
		s.order = append(s.order, int32(i))
	}
	if byID {
		slices.SortFunc(s.order, func(x, y int32) int { return compareIDs(s.ids[x], s.ids[y]) })
	}
	// next[t]: where trace t's next span goes in perm.
	next := slices.Grow(s.next[:0], len(s.ids))[:len(s.ids)]
	s.next = next
	pos := int32(0)
	for _, t := range s.order {
		next[t] = pos
		pos += s.counts[t]
	}
	s.perm = slices.Grow(s.perm[:0], s.n)[:s.n]
	for c, chunk := range s.chunks {
		base := int32(c * chunkSpans)
		for i := range chunk {
			t := chunk[i].trace
			s.perm[next[t]] = base + int32(i)
			next[t]++
		}
	}
	// next[t] is now where trace t ends; off[r] where the trace of rank r
	// starts.
	ends := next
	s.off = slices.Grow(s.off[:0], len(s.order)+1)[:len(s.order)+1]
	s.off[0] = 0
	for r, t := range s.order {
		s.off[r+1] = ends[t]
	}
}

// sortSpans copies the spans, after group, into the order of their
// traces' ranks, so that gathering the traces one after the other reads
// them in order (a trace's spans, in input order, are scattered among
// other traces', or the traces are visited by id, not by arrival): one
// pass of scattered reads instead of one per visit. The store takes
// twice its memory meanwhile; the caller checks it has the room. It
// takes no more spans after.
func (s *spanStore) sortSpans() {
	if s.n >= minRunSpans*s.runs() {
		return // the traces' spans mostly lie together already (a trace a request)
	}
	sorted := make([][]packedSpan, 0, len(s.chunks))
	var cur []packedSpan
	for r, t := range s.order {
		for _, k := range s.perm[s.off[r]:s.off[r+1]] {
			if len(cur) == cap(cur) {
				cur = make([]packedSpan, 0, chunkSpans)
				sorted = append(sorted, cur)
			}
			cur = append(cur, s.chunks[k/chunkSpans][k%chunkSpans])
			cur[len(cur)-1].trace = int32(r)
			sorted[len(sorted)-1] = cur
		}
		s.next[r] = s.counts[t] // scratch: the counts by rank
	}
	ids := make([]graph.TraceID, len(s.order))
	for r, t := range s.order {
		ids[r] = s.ids[t]
		s.order[r] = int32(r)
	}
	s.ids, s.counts, s.next = ids, s.next[:len(s.order)], s.counts
	for i := range s.perm {
		s.perm[i] = int32(i)
	}
	s.chunks, s.index, s.last = sorted, nil, -1
}

// minRunSpans is how many spans that lie together, on average, make
// sortSpans not worth its copy: gathering them costs one scattered read
// each time, then reads in order. A variable for tests.
var minRunSpans = 16

// runs counts the stretches of spans that lie one after the other in the
// chunks in the order gather reads them (after group).
func (s *spanStore) runs() int {
	runs, prev := 0, int32(-2)
	for _, k := range s.perm[:s.off[len(s.order)]] {
		if k != prev+1 {
			runs++
		}
		prev = k
	}
	return runs
}

// gather appends the spans of the trace of rank r (after group) to dst.
func (s *spanStore) gather(r int, dst []graph.Span) []graph.Span {
	id := s.ids[s.order[r]]
	idx := s.perm[s.off[r]:s.off[r+1]]
	n := len(dst)
	dst = slices.Grow(dst, len(idx))[:n+len(idx)]
	for j, k := range idx {
		p := &s.chunks[k/chunkSpans][k%chunkSpans]
		d := &dst[n+j]
		// Written in place (a literal appended is built, then copied).
		*d = graph.Span{
			TraceID: id, SpanID: p.SpanID, ParentID: p.ParentID, Kind: p.Kind,
			Service: s.table[p.service], Version: s.table[p.version], Name: s.table[p.name],
			Operation: s.table[p.operation], Peer: s.table[p.peer],
			Start: p.Start, End: p.End, Failed: p.flags&fFailed != 0, Claim: p.Claim,
			HasResend: p.flags&fHasResend != 0, Resend: p.Resend, CriteriaSatisfied: p.flags&fCriteria != 0,
			Suppressed: p.flags&fSuppressed != 0, FailOpen: p.FailOpen, Target: p.Target, StatusCode: p.StatusCode,
			Sampling: graph.Sampling(p.flags>>4) & 3,
		}
		if p.adjusted > 0 {
			d.AdjustedCount = s.adjustedTable[p.adjusted-1]
		}
	}
	return dst
}

// spill is an append-only temporary file of records: a kind byte, a
// length, the payload (encoded spans, facts or results).
type spill struct {
	f       *os.File
	w       *bufio.Writer
	size    int64
	enc     []byte
	coder   graph.TraceEncoder
	results analysis.ResultEncoder
	in      graph.Interner
}

const (
	recSpans  byte = 1 // a trace id, then its spans (graph.TraceEncoder.AppendSpans)
	recResult byte = 3 // the start minute (8 bytes), then the result
)

// openSpill creates a spill file in dir (os.TempDir() when empty): 0600,
// as os.CreateTemp makes it, for it holds the spans.
func openSpill(dir string) (*spill, error) {
	f, err := os.CreateTemp(dir, "stormradius-spill-*")
	if err != nil {
		return nil, fmt.Errorf("analyze: spill file: %w", err)
	}
	return newSpill(f), nil
}

// remove closes and deletes the spill file.
func (s *spill) remove() {
	s.f.Close()
	os.Remove(s.f.Name())
}

func newSpill(f *os.File) *spill {
	return &spill{f: f, w: bufio.NewWriterSize(f, 1<<20), in: graph.Interner{}}
}

func (s *spill) write(kind byte, payload []byte) (int64, error) {
	var hdr [5]byte
	hdr[0] = kind
	binary.LittleEndian.PutUint32(hdr[1:], uint32(len(payload)))
	off := s.size
	if _, err := s.w.Write(hdr[:]); err != nil {
		return off, fmt.Errorf("analyze: spill file: %w", err)
	}
	if _, err := s.w.Write(payload); err != nil {
		return off, fmt.Errorf("analyze: spill file: %w", err)
	}
	s.size += int64(len(hdr) + len(payload))
	return off, nil
}

func (s *spill) writeResult(r *analysis.TraceResult) error {
	s.enc = binary.LittleEndian.AppendUint64(s.enc[:0], uint64(analysis.MinuteOf(r.Start)))
	s.enc = s.results.Append(s.enc, r)
	_, err := s.write(recResult, s.enc)
	return err
}

// eachResult calls fn with every result whose start minute want accepts
// (only those are decoded).
func (s *spill) eachResult(ctx context.Context, want func(minute int64) bool, fn func(*analysis.TraceResult)) error {
	i := 0
	return s.scanRecords(recResult, func(_ int64, rec []byte) error {
		if i++; i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if len(rec) < 8 {
			return fmt.Errorf("analyze: spill file: a result record of %d bytes", len(rec))
		}
		if !want(int64(binary.LittleEndian.Uint64(rec))) {
			return nil
		}
		res, err := analysis.DecodeResult(rec[8:], s.in.Intern)
		if err != nil {
			return fmt.Errorf("analyze: spill file: %w", err)
		}
		fn(res)
		return nil
	})
}

// scanRecords calls fn with every record of kind, in file order (rec is
// valid until fn returns).
func (s *spill) scanRecords(kind byte, fn func(off int64, rec []byte) error) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("analyze: spill file: %w", err)
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.size), 1<<20)
	var off int64
	var hdr [5]byte
	var buf []byte
	for off < s.size {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return fmt.Errorf("analyze: spill file: %w", err)
		}
		n := int(binary.LittleEndian.Uint32(hdr[1:]))
		if hdr[0] != kind {
			if _, err := r.Discard(n); err != nil {
				return fmt.Errorf("analyze: spill file: %w", err)
			}
			off += int64(5 + n)
			continue
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("analyze: spill file: %w", err)
		}
		if err := fn(off, b); err != nil {
			return err
		}
		off += int64(5 + n)
	}
	return nil
}
