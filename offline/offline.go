// Package offline is the file engine of `stormradius analyze` (and of
// `whatif` over a file): the same analysis as the streaming service
// (package pipeline), for a finite input, with no store. Spans wait per
// trace in a bounded buffer, assembled traces and their spans go to a spill
// file, and once the input ends every trace is evaluated against its
// window's final state; memory is bounded by the buffer and the window
// states, not by the input.
package offline

import (
	"bufio"
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// readChunk is how many spans the reading goroutine hands to the
// assembling one at a time.
const readChunk = 4096

// Config configures Analyze.
type Config struct {
	// Analysis holds the analysis rules (window length included).
	Analysis analysis.Config
	// MaxPendingSpans bounds the spans held in memory waiting for their
	// trace to complete (default 500,000, about 100 MB): past it, the
	// traces that received a span least recently are analysed first.
	MaxPendingSpans int
	// TempDir holds the spill file (os.TempDir() when empty).
	TempDir string
	// Range selects the traces the document counts, by the minute of
	// their start, exactly as `report` selects them (zero: everything);
	// every trace still counts in its window, and the document's window
	// figures come from the windows the range overlaps.
	Range store.Query
}

// Stats describes an Analyze run.
type Stats struct {
	Traces, Reopened, FlushedEarly int
	SpillBytes                     int64
	// Folded counts the traces whose names were past their window's caps
	// (analysis.Limits), by kind, as their last analysis left them.
	Folded analysis.FoldCounts
	// Truncated counts the spans read with a name cut to
	// graph.MaxNameLen.
	Truncated int
}

// Analyze analyses the spans read pulls from a finite input (`analyze`): the
// same analysis as the service, on a finite input, with the same caps on the
// names a window admits (cfg.Analysis.Limits: names are admitted in the
// order traces leave the buffer). Spans wait per trace in a
// bounded buffer; a trace that stops receiving spans long enough (in input
// order) is assembled and added to its window's state, and its facts and
// spans go to a spill file; a span arriving later re-opens its trace (its
// spilled spans are read back, its old facts subtracted). When the input
// ends every trace is evaluated against its window's final state. Memory is
// bounded by the pending buffer, the window states and a few dozen bytes
// per trace — not by the input.
//
// read calls emit with the spans of each request it decodes; the slice is
// not kept after emit returns.
func Analyze(ctx context.Context, read func(emit func([]graph.Span) error) error, cfg Config) (*analysis.Document, *analysis.Windows, Stats, error) {
	if cfg.MaxPendingSpans <= 0 {
		cfg.MaxPendingSpans = 500_000
	}
	if cfg.Analysis.Window <= 0 {
		cfg.Analysis.Window = analysis.DefaultWindow
	}
	b := &engine{cfg: cfg, windows: analysis.NewWindows(cfg.Analysis.Window), pending: map[graph.TraceID]*list.Element{},
		adm: analysis.NewAdmissions(cfg.Analysis)}
	b.lru.Init()
	// Decoding (the caller's read) and buffering run on two goroutines: the
	// spans are copied into chunks handed over a channel, and chunks come
	// back for reuse, so the copy costs no allocation once warm.
	chunk := min(readChunk, max(1, cfg.MaxPendingSpans/8))
	chunks := make(chan []graph.Span, 8)
	free := make(chan []graph.Span, 10)
	addErr := make(chan error, 1)
	// Traces leave the buffer on that goroutine and are assembled, added
	// to their windows and spilled by shards (a trace always goes to the
	// same one), each on a goroutine with its own spill file and windows.
	b.recycle = make(chan []graph.Span, 64)
	defer func() {
		for _, sh := range b.shards {
			sh.spill.remove()
		}
	}()
	flushErrs, err := b.startShards(max(1, min(runtime.GOMAXPROCS(0), maxShards)))
	if err != nil {
		return nil, nil, Stats{}, err
	}
	go func() { addErr <- b.buffer(chunks, free, flushErrs) }()
	readErr := readChunks(ctx, read, chunk, chunks, free)
	err = <-addErr
	b.mergeShards()
	if err != nil {
		return nil, nil, b.stats, err
	}
	if readErr != nil && ctx.Err() != nil {
		return nil, nil, b.stats, ctx.Err()
	}
	// A read error after some input still gives the report of what was
	// read (the caller reports the error).
	doc, err := b.evaluate(ctx)
	if err != nil {
		return nil, nil, b.stats, err
	}
	return doc, b.windows, b.stats, readErr
}

// startShards opens n shards, each with its spill file and a goroutine
// that flushes the traces sent to it and, once its channel is closed,
// sends its first error (or nil) on the channel returned. If a spill file
// cannot be opened, the shards opened are stopped.
func (b *engine) startShards(n int) (<-chan error, error) {
	flushErrs := make(chan error, n)
	for range n {
		sp, err := openSpill(b.cfg.TempDir)
		if err != nil {
			for _, sh := range b.shards {
				close(sh.flushes)
				<-flushErrs
			}
			return nil, err
		}
		sh := &shard{b: b, spill: sp, windows: analysis.NewWindows(b.cfg.Analysis.Window),
			done: map[graph.TraceID]*spilled{}, flushes: make(chan *pendingTrace, 64)}
		b.shards = append(b.shards, sh)
		go func() {
			var err error
			for t := range sh.flushes {
				if err == nil {
					if err = sh.flush(t); err != nil {
						b.failed.Store(true)
					}
				}
			}
			flushErrs <- err
		}()
	}
	return flushErrs, nil
}

// buffer adds the spans of every chunk to the pending buffer, handing the
// chunk back on free; once chunks is closed it flushes every pending
// trace, stops the shards and returns the first error of the buffer or of
// any shard.
func (b *engine) buffer(chunks <-chan []graph.Span, free chan<- []graph.Span, flushErrs <-chan error) error {
	var err error
	for c := range chunks {
		if err == nil {
			err = b.add(c)
		}
		select {
		case free <- c[:0]:
		default:
		}
	}
	if err == nil {
		b.flushAll()
	}
	for _, sh := range b.shards {
		close(sh.flushes)
	}
	for range b.shards {
		err = errors.Join(err, <-flushErrs)
	}
	return err
}

// readChunks runs read, copying the spans it emits into chunks of about
// chunk spans (taken from free when one is there) sent on chunks, which
// it closes at the end; it returns read's error (ctx's once ctx ends).
func readChunks(ctx context.Context, read func(emit func([]graph.Span) error) error, chunk int,
	chunks chan<- []graph.Span, free <-chan []graph.Span) error {
	var cur []graph.Span
	send := func() {
		if len(cur) > 0 {
			chunks <- cur
			cur = nil
		}
	}
	readErr := read(func(spans []graph.Span) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cur == nil {
			select {
			case cur = <-free:
			default:
				cur = make([]graph.Span, 0, chunk)
			}
		}
		cur = append(cur, spans...)
		if len(cur) >= chunk {
			send()
		}
		return nil
	})
	send()
	close(chunks)
	return readErr
}

// mergeShards adds the shards' counts and windows to the run's, once they
// stopped.
func (b *engine) mergeShards() {
	for _, sh := range b.shards {
		b.stats.Traces += sh.traces
		b.stats.Reopened += sh.reopened
		b.stats.SpillBytes += sh.spill.size
		b.stats.Folded.Merge(sh.folded)
		b.windows.Merge(sh.windows)
	}
}

// engine is one Analyze run.
type engine struct {
	cfg     Config
	windows *analysis.Windows // the shards', merged when the input ends
	stats   Stats

	pending      map[graph.TraceID]*list.Element // of *pendingTrace, in lru
	lru          list.List                       // front: most recently touched
	pendingSpans int

	shards  []*shard
	failed  atomic.Bool       // a flush failed: stop adding
	recycle chan []graph.Span // span slices of flushed traces, for new ones
	// adm holds what each window admitted, for every shard: a window's
	// traces are spread over the shards, its caps are not.
	adm *analysis.Admissions
}

// maxShards bounds the goroutines that flush traces.
const maxShards = 4

// shard flushes the traces whose id hashes to it, on a goroutine of its
// own: it alone touches its done traces, spill file and windows until the
// input ends.
type shard struct {
	b       *engine
	spill   *spill
	windows *analysis.Windows
	done    map[graph.TraceID]*spilled
	flushes chan *pendingTrace

	asm              graph.Assembler
	buf              []graph.Span
	traces, reopened int
	folded           analysis.FoldCounts
}

type pendingTrace struct {
	id    graph.TraceID
	spans []graph.Span
}

// spilled is where a flushed trace's spans and facts are in the spill
// file.
type spilled struct {
	spans []spillRef // every flush of the trace adds its spans
	facts spillRef   // the current facts; older ones are superseded
}

func (b *engine) add(spans []graph.Span) error {
	if b.failed.Load() {
		return errFlushFailed
	}
	for i := range spans {
		sp := &spans[i]
		e := b.pending[sp.TraceID]
		if e == nil {
			e = b.lru.PushFront(&pendingTrace{id: sp.TraceID})
			b.pending[sp.TraceID] = e
		} else {
			b.lru.MoveToFront(e)
		}
		t := e.Value.(*pendingTrace)
		if t.spans == nil {
			select {
			case t.spans = <-b.recycle: // a flushed trace's, emptied
			default:
			}
		}
		t.spans = append(t.spans, *sp)
		if sp.Truncated {
			b.stats.Truncated++
		}
	}
	b.pendingSpans += len(spans)
	for b.pendingSpans > b.cfg.MaxPendingSpans && b.lru.Len() > 0 {
		b.stats.FlushedEarly++
		b.detach(b.lru.Back())
	}
	return nil
}

// maxRecycled bounds the span slices kept for reuse (a huge trace's is
// left to the collector).
const maxRecycled = 4096

// errFlushFailed stops adding once a flush failed (the flush's error is
// the one reported).
var errFlushFailed = errors.New("analyze: flush failed")

// detach takes the trace of e out of the buffer and hands it to the
// flushing goroutine.
func (b *engine) detach(e *list.Element) {
	t := b.lru.Remove(e).(*pendingTrace)
	delete(b.pending, t.id)
	b.pendingSpans -= len(t.spans)
	b.shards[binary.LittleEndian.Uint64(t.id[8:])%uint64(len(b.shards))].flushes <- t
}

func (b *engine) flushAll() {
	for b.lru.Len() > 0 {
		b.detach(b.lru.Back())
	}
}

// flush assembles a trace that left the buffer and adds it to its window.
func (sh *shard) flush(t *pendingTrace) error {
	// The spans as they came (assembly dedups in place), for a re-open.
	ref, err := sh.spill.writeSpans(t.spans)
	if err != nil {
		return err
	}
	spans := t.spans
	prev := sh.done[t.id]
	if prev == nil {
		prev = &spilled{}
		sh.done[t.id] = prev
		sh.traces++
	} else {
		// A late span re-opens the trace: its old spans come back from the
		// spill file and its old facts leave its window.
		sh.reopened++
		spans = append(sh.buf[:0], t.spans...)
		for _, ref := range prev.spans {
			if spans, err = sh.spill.readSpans(ref, spans); err != nil {
				return err
			}
		}
		old, err := sh.spill.readFacts(prev.facts)
		if err != nil {
			return err
		}
		sh.windows.Remove(old)
		sh.folded.Add(analysis.FoldedOf(old), -1)
	}
	prev.spans = append(prev.spans, ref)
	tr := sh.asm.AssembleTransient(spans)
	sh.folded.Add(sh.b.adm.Fold(tr), 1)
	sh.windows.Add(tr)
	if prev.facts, err = sh.spill.writeFacts(tr); err != nil {
		return err
	}
	if len(prev.spans) > 1 { // re-opened: assembled in buf
		sh.buf = tr.Spans[:0]
	}
	if cap(t.spans) <= maxRecycled {
		select {
		case sh.b.recycle <- t.spans[:0]:
		default:
		}
	}
	t.spans = nil
	return nil
}

// evaluate reads the current facts of every trace back, in spill order,
// and evaluates each against its window's final state, on every core.
// What incidents will need of the results (in range) is kept by each
// worker: per-minute sums for its first maxMinuteResults minutes, the
// results themselves in a file of its own beyond. When the per-minute
// counts show incidents, their figures are gathered from both: only the
// filed results of their minutes are decoded, and no trace is evaluated
// twice.
func (b *engine) evaluate(ctx context.Context) (*analysis.Document, error) {
	current := make([]map[int64]bool, len(b.shards))
	for i, sh := range b.shards {
		current[i] = make(map[int64]bool, len(sh.done))
		for _, s := range sh.done {
			current[i][s.facts.off] = true
		}
		sh.done = nil
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), 8))
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
	for w := range reports {
		reports[w], minutes[w] = analysis.NewReport(), analysis.MinuteNodes{}
	}
	// What incidents will need of each result: its minute's sums while a
	// worker has few minutes (no second look at the result), the result
	// itself in a spill file of the worker's beyond that.
	sums := make([]analysis.MinuteResults, workers)
	for w := range sums {
		sums[w] = analysis.MinuteResults{}
	}
	err := b.scan(ctx, current, workers, func(w int, r *analysis.TraceResult) error {
		reports[w].Add(r, 1)
		minutes[w].Add(r)
		if len(sums[w]) < maxMinuteResults || sums[w].Has(analysis.MinuteOf(r.Start)) {
			sums[w].Add(r)
			return nil
		}
		if results[w] == nil {
			var err error
			if results[w], err = openSpill(b.cfg.TempDir); err != nil {
				return err
			}
		}
		return results[w].writeResult(r)
	})
	if err != nil {
		return nil, err
	}
	rep := reports[0]
	for w := 1; w < workers; w++ {
		rep.Merge(reports[w], 1)
		minutes[0].Merge(minutes[w])
	}
	lo, hi := store.WindowRange(b.cfg.Range, b.cfg.Analysis.Window)
	windows := b.windows.Summaries(b.cfg.Analysis)
	out := windows[:0]
	for _, s := range windows {
		if s.Window >= lo && s.Window <= hi {
			out = append(out, s)
		}
	}
	doc := rep.Document(out, b.cfg.Analysis)
	spans := analysis.DetectIncidentsIn(minutes[0], b.cfg.Analysis.Incidents)
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
	doc.Incidents = cols[0].Docs(analysis.SummaryGraphs(out, b.cfg.Analysis.Window), b.cfg.Analysis.Incidents)
	return doc, nil
}

// scan evaluates the current facts of every trace in range: one goroutine
// reads the spill file and hands the records, undecoded, to workers that
// decode and evaluate them, each with its own evaluator and names; fn(w,
// r) gets worker w's results (sums do not care about order).
func (b *engine) scan(ctx context.Context, current []map[int64]bool, workers int, fn func(w int, r *analysis.TraceResult) error) error {
	type group struct {
		data []byte
		ends []int
	}
	work := make(chan group, 2*workers)
	// Groups go back for reuse: as many as can be in flight.
	free := make(chan group, 3*workers+len(b.shards))
	for range cap(free) {
		free <- group{}
	}
	errs := make([]error, workers)
	failed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ev := analysis.NewEvaluator(b.cfg.Analysis)
			dec := graph.TraceDecoder{Intern: graph.Interner{}.Intern}
			for g := range work {
				if errs[w] != nil {
					free <- g
					continue // drain
				}
				lo := 0
				for _, end := range g.ends {
					t, err := dec.Decode(g.data[lo:end])
					lo = end
					if err == nil {
						r := ev.Evaluate(t, b.windows.State(b.windows.Of(t)))
						if b.cfg.Range.Contains(r.Start) {
							err = fn(w, &r)
						}
					} else {
						err = fmt.Errorf("analyze: spill file: %w", err)
					}
					if err != nil {
						errs[w] = err
						once.Do(func() { close(failed) })
						break
					}
				}
				free <- g
			}
		}(w)
	}
	// One reader per shard's spill file.
	readErrs := make([]error, len(b.shards))
	var readers sync.WaitGroup
	for i, sh := range b.shards {
		readers.Add(1)
		go func() {
			defer readers.Done()
			g := <-free
			err := sh.spill.scanRecords(recFacts, func(off int64, rec []byte) error {
				if !current[i][off] {
					return nil // superseded by a re-open
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				g.data = append(g.data, rec...)
				g.ends = append(g.ends, len(g.data))
				if len(g.ends) == 256 {
					select {
					case work <- g:
					case <-failed:
						return errStopScan
					}
					g = <-free
					g.data, g.ends = g.data[:0], g.ends[:0]
				}
				return nil
			})
			if len(g.ends) > 0 && err == nil {
				select {
				case work <- g:
				case <-failed:
				}
			}
			if errors.Is(err, errStopScan) {
				err = nil
			}
			readErrs[i] = err
		}()
	}
	readers.Wait()
	close(work)
	wg.Wait()
	return errors.Join(errors.Join(readErrs...), errors.Join(errs...))
}

// maxMinuteResults bounds the minutes whose sums a worker keeps for the
// incidents' figures (6 hours of a file's traces; a minute's report holds
// its APIs, services and nodes); later minutes' results go to a spill file.
var maxMinuteResults = 360

// errStopScan stops a spill scan once a worker failed.
var errStopScan = errors.New("stop")

// spillRef locates a record in the spill file.
type spillRef struct {
	off int64
	n   int32
}

// spill is an append-only temporary file of records: a kind byte, a
// length, the payload (encoded spans, facts or results).
type spill struct {
	f       *os.File
	w       *bufio.Writer
	size    int64
	rbuf    []byte
	enc     []byte
	coder   graph.TraceEncoder
	results analysis.ResultEncoder
	in      graph.Interner
}

const (
	recSpans  byte = 1
	recFacts  byte = 2
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

func (s *spill) write(kind byte, payload []byte) (spillRef, error) {
	var hdr [5]byte
	hdr[0] = kind
	binary.LittleEndian.PutUint32(hdr[1:], uint32(len(payload)))
	ref := spillRef{off: s.size, n: int32(len(payload))}
	if _, err := s.w.Write(hdr[:]); err != nil {
		return ref, fmt.Errorf("analyze: spill file: %w", err)
	}
	if _, err := s.w.Write(payload); err != nil {
		return ref, fmt.Errorf("analyze: spill file: %w", err)
	}
	s.size += int64(len(hdr) + len(payload))
	return ref, nil
}

func (s *spill) writeSpans(spans []graph.Span) (spillRef, error) {
	s.enc = s.coder.AppendSpans(s.enc[:0], spans)
	return s.write(recSpans, s.enc)
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

func (s *spill) writeFacts(t *graph.Trace) (spillRef, error) {
	s.enc = s.coder.Append(s.enc[:0], t)
	return s.write(recFacts, s.enc)
}

// read returns the payload of ref (valid until the next read).
func (s *spill) read(ref spillRef) ([]byte, error) {
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("analyze: spill file: %w", err)
	}
	if cap(s.rbuf) < int(ref.n) {
		s.rbuf = make([]byte, ref.n)
	}
	b := s.rbuf[:ref.n]
	if _, err := s.f.ReadAt(b, ref.off+5); err != nil {
		return nil, fmt.Errorf("analyze: spill file: %w", err)
	}
	return b, nil
}

func (s *spill) readSpans(ref spillRef, dst []graph.Span) ([]graph.Span, error) {
	b, err := s.read(ref)
	if err != nil {
		return dst, err
	}
	dst, err = graph.DecodeSpans(b, dst, s.in.Intern)
	if err != nil {
		return dst, fmt.Errorf("analyze: spill file: %w", err)
	}
	return dst, nil
}

func (s *spill) readFacts(ref spillRef) (*graph.Trace, error) {
	b, err := s.read(ref)
	if err != nil {
		return nil, err
	}
	t, err := graph.DecodeTraceInterned(b, s.in.Intern)
	if err != nil {
		return nil, fmt.Errorf("analyze: spill file: %w", err)
	}
	return t, nil
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
