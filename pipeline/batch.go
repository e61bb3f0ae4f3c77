package pipeline

import (
	"bufio"
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// batchChunk is how many spans the reading goroutine hands to the
// assembling one at a time.
const batchChunk = 4096

// BatchConfig configures Batch.
type BatchConfig struct {
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

// BatchStats describes a Batch run.
type BatchStats struct {
	Traces, Reopened, FlushedEarly int
	SpillBytes                     int64
}

// Batch analyses the spans read pulls from a finite input (`analyze`): the
// same analysis as the service, in batch mode. Spans wait per trace in a
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
func Batch(ctx context.Context, read func(emit func([]graph.Span) error) error, cfg BatchConfig) (*analysis.Document, *analysis.Windows, BatchStats, error) {
	if cfg.MaxPendingSpans <= 0 {
		cfg.MaxPendingSpans = 500_000
	}
	if cfg.Analysis.Window <= 0 {
		cfg.Analysis.Window = analysis.DefaultWindow
	}
	f, err := os.CreateTemp(cfg.TempDir, "stormradius-spill-*")
	if err != nil {
		return nil, nil, BatchStats{}, fmt.Errorf("analyze: spill file: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	b := &batcher{cfg: cfg, spill: newSpill(f), windows: analysis.NewWindows(cfg.Analysis.Window),
		pending: map[graph.TraceID]*list.Element{}, done: map[graph.TraceID]*spilled{}}
	b.lru.Init()
	// Decoding (the caller's read) and assembly run on two goroutines: the
	// spans are copied into chunks handed over a channel, and chunks come
	// back for reuse, so the copy costs no allocation once warm.
	chunk := min(batchChunk, max(1, cfg.MaxPendingSpans/8))
	chunks := make(chan []graph.Span, 8)
	free := make(chan []graph.Span, 10)
	addErr := make(chan error, 1)
	go func() {
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
			err = b.flushAll()
		}
		addErr <- err
	}()
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
	if err := <-addErr; err != nil {
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
	b.stats.SpillBytes = b.spill.size
	return doc, b.windows, b.stats, readErr
}

// batcher is one Batch run.
type batcher struct {
	cfg     BatchConfig
	spill   *spill
	windows *analysis.Windows
	stats   BatchStats

	pending      map[graph.TraceID]*list.Element // of *batchTrace, in lru
	lru          list.List                       // front: most recently touched
	pendingSpans int
	done         map[graph.TraceID]*spilled

	asm graph.Assembler
	buf []graph.Span
}

type batchTrace struct {
	id    graph.TraceID
	spans []graph.Span
}

// spilled is where a flushed trace's spans and facts are in the spill
// file.
type spilled struct {
	spans []spillRef // every flush of the trace adds its spans
	facts spillRef   // the current facts; older ones are superseded
}

func (b *batcher) add(spans []graph.Span) error {
	for i := range spans {
		sp := &spans[i]
		e := b.pending[sp.TraceID]
		if e == nil {
			e = b.lru.PushFront(&batchTrace{id: sp.TraceID})
			b.pending[sp.TraceID] = e
		} else {
			b.lru.MoveToFront(e)
		}
		t := e.Value.(*batchTrace)
		t.spans = append(t.spans, *sp)
	}
	b.pendingSpans += len(spans)
	for b.pendingSpans > b.cfg.MaxPendingSpans && b.lru.Len() > 0 {
		b.stats.FlushedEarly++
		if err := b.flush(b.lru.Back()); err != nil {
			return err
		}
	}
	return nil
}

func (b *batcher) flushAll() error {
	for b.lru.Len() > 0 {
		if err := b.flush(b.lru.Back()); err != nil {
			return err
		}
	}
	return nil
}

// flush assembles the trace of e and adds it to its window.
func (b *batcher) flush(e *list.Element) error {
	t := b.lru.Remove(e).(*batchTrace)
	delete(b.pending, t.id)
	b.pendingSpans -= len(t.spans)
	spans := append(b.buf[:0], t.spans...)
	prev := b.done[t.id]
	if prev == nil {
		prev = &spilled{}
		b.done[t.id] = prev
		b.stats.Traces++
	} else {
		// A late span re-opens the trace: its old spans come back from the
		// spill file and its old facts leave its window.
		b.stats.Reopened++
		for _, ref := range prev.spans {
			var err error
			if spans, err = b.spill.readSpans(ref, spans); err != nil {
				return err
			}
		}
		old, err := b.spill.readFacts(prev.facts)
		if err != nil {
			return err
		}
		b.windows.Remove(old)
	}
	ref, err := b.spill.writeSpans(t.spans)
	if err != nil {
		return err
	}
	prev.spans = append(prev.spans, ref)
	tr := b.asm.Assemble(spans)
	b.buf = tr.Spans[:0]
	tr.Spans = nil
	b.windows.Add(tr)
	if prev.facts, err = b.spill.writeFacts(tr); err != nil {
		return err
	}
	return nil
}

// evaluate reads the current facts of every trace back, in spill order,
// and evaluates each against its window's final state; then, when the
// per-minute counts show incidents, a second pass gathers their figures
// from the traces of their minutes.
func (b *batcher) evaluate(ctx context.Context) (*analysis.Document, error) {
	if err := b.spill.w.Flush(); err != nil {
		return nil, fmt.Errorf("analyze: spill file: %w", err)
	}
	current := make(map[int64]bool, len(b.done))
	for _, s := range b.done {
		current[s.facts.off] = true
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), 8))
	reports := make([]*analysis.Report, workers)
	minutes := make([]analysis.MinuteNodes, workers)
	for w := range reports {
		reports[w], minutes[w] = analysis.NewReport(), analysis.MinuteNodes{}
	}
	err := b.scan(ctx, current, workers, func(w int, r *analysis.TraceResult) {
		reports[w].Add(r, 1)
		minutes[w].Add(r)
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
	sums := b.windows.Summaries(b.cfg.Analysis)
	out := sums[:0]
	for _, s := range sums {
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
	for w := range cols {
		cols[w] = analysis.NewIncidentCollector(spans)
	}
	err = b.scan(ctx, current, workers, func(w int, r *analysis.TraceResult) {
		if cols[w].Covers(r.Start) {
			cols[w].Add(r)
		}
	})
	if err != nil {
		return nil, err
	}
	for w := 1; w < workers; w++ {
		cols[0].Merge(cols[w])
	}
	doc.Incidents = cols[0].Docs(analysis.SummaryGraphs(out, b.cfg.Analysis.Window), b.cfg.Analysis.Incidents)
	return doc, nil
}

// scan evaluates the current facts of every trace in range, read in one
// pass and evaluated by workers, each with its own evaluator; fn(w, r)
// gets worker w's results (sums do not care about order).
func (b *batcher) scan(ctx context.Context, current map[int64]bool, workers int, fn func(w int, r *analysis.TraceResult)) error {
	work := make(chan []*graph.Trace, 2*workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ev := analysis.NewEvaluator(b.cfg.Analysis)
			for ts := range work {
				for _, t := range ts {
					r := ev.Evaluate(t, b.windows.State(b.windows.Of(t)))
					if b.cfg.Range.Contains(r.Start) {
						fn(w, &r)
					}
				}
			}
		}(w)
	}
	var group []*graph.Trace
	err := b.spill.scanFacts(func(off int64, t *graph.Trace) error {
		if !current[off] {
			return nil // superseded by a re-open
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if group = append(group, t); len(group) == 256 {
			work <- group
			group = nil
		}
		return nil
	})
	if len(group) > 0 {
		work <- group
	}
	close(work)
	wg.Wait()
	return err
}

// spillRef locates a record in the spill file.
type spillRef struct {
	off int64
	n   int32
}

// spill is an append-only temporary file of records: a kind byte, a
// length, the payload (encoded spans or facts).
type spill struct {
	f     *os.File
	w     *bufio.Writer
	size  int64
	rbuf  []byte
	enc   []byte
	coder graph.TraceEncoder
	in    map[string]string
}

const (
	recSpans byte = 1
	recFacts byte = 2
)

func newSpill(f *os.File) *spill {
	return &spill{f: f, w: bufio.NewWriterSize(f, 1<<20), in: map[string]string{}}
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

func (s *spill) intern(b []byte) string {
	if v, ok := s.in[string(b)]; ok {
		return v
	}
	if len(s.in) > 1<<16 {
		clear(s.in)
	}
	v := string(b)
	s.in[v] = v
	return v
}

func (s *spill) readSpans(ref spillRef, dst []graph.Span) ([]graph.Span, error) {
	b, err := s.read(ref)
	if err != nil {
		return dst, err
	}
	dst, err = graph.DecodeSpans(b, dst, s.intern)
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
	t, err := graph.DecodeTraceInterned(b, s.intern)
	if err != nil {
		return nil, fmt.Errorf("analyze: spill file: %w", err)
	}
	return t, nil
}

// scanFacts calls fn with every facts record, in file order.
func (s *spill) scanFacts(fn func(off int64, t *graph.Trace) error) error {
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
		if hdr[0] != recFacts {
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
		t, err := graph.DecodeTraceInterned(b, s.intern)
		if err != nil {
			return fmt.Errorf("analyze: spill file: %w", err)
		}
		if err := fn(off, t); err != nil {
			return err
		}
		off += int64(5 + n)
	}
	return nil
}
