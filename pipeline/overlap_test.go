package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// gatedStore is a real store whose span writes overlap
// (store.SpanWriteStarter), with commits the test holds: the commit of
// write i (counting from 1) waits for a value on hold[i] — nil commits,
// an error fails the write — and Apply checks that no checkpoint passes
// a write whose commit has not returned. ClickHouse's writes are its own
// (a held write's insert is sent once released; a failed one's never);
// the embedded store cannot overlap writes, so each is made at its start
// and its commit only reports it, as a server whose answer is slow or
// lost would.
type gatedStore struct {
	store.Store
	mu        sync.Mutex
	hold      map[int]chan error
	writes    []gatedWrite // by start
	crashed   bool         // Apply and PutSummaries refuse (a dead process stores nothing more)
	violation string       // the first checkpoint past a write in flight
	event     chan string  // "start i", "done i" (when not nil)
	delay     time.Duration
	inflight  int // writes started and not committed, and the most at once
	most      int
}

type gatedWrite struct {
	seq  uint64
	done bool // its commit returned (durable or failed)
}

func (g *gatedStore) note(ev string) {
	if g.event != nil {
		g.event <- ev
	}
}

func (g *gatedStore) StartSpans(ctx context.Context, spans []graph.Span) (uint64, func(context.Context) error, error) {
	var seq uint64
	var commit func(context.Context) error
	var err error
	if st, ok := g.Store.(store.SpanWriteStarter); ok {
		seq, commit, err = st.StartSpans(ctx, spans)
	} else {
		seq, err = g.Store.WriteSpans(ctx, spans)
		commit = func(context.Context) error { return nil }
	}
	if err != nil {
		return 0, nil, err
	}
	g.mu.Lock()
	g.writes = append(g.writes, gatedWrite{seq: seq})
	i := len(g.writes)
	h := g.hold[i]
	g.inflight++
	g.most = max(g.most, g.inflight)
	g.mu.Unlock()
	g.note(fmt.Sprint("start ", i))
	return seq, func(ctx context.Context) error {
		time.Sleep(g.delay)
		err := error(nil)
		if h != nil {
			err = <-h
		}
		if err != nil {
			gone, cancel := context.WithCancel(ctx)
			cancel()
			commit(gone) // ClickHouse: the insert is never sent
		} else {
			err = commit(ctx)
		}
		g.mu.Lock()
		g.writes[i-1].done = true
		g.inflight--
		g.mu.Unlock()
		g.note(fmt.Sprint("done ", i))
		return err
	}, nil
}

func (g *gatedStore) WriteSpans(ctx context.Context, spans []graph.Span) (uint64, error) {
	seq, commit, err := g.StartSpans(ctx, spans)
	if err != nil {
		return 0, err
	}
	return seq, commit(ctx)
}

func (g *gatedStore) Apply(ctx context.Context, b store.Batch) error {
	g.mu.Lock()
	if g.crashed {
		g.mu.Unlock()
		return fmt.Errorf("gated: crashed: %w", store.ErrUnavailable)
	}
	for i, w := range g.writes {
		if !w.done && b.Watermark >= w.seq && g.violation == "" {
			g.violation = fmt.Sprintf("checkpoint %d stored while write %d (sequence %d) was in flight", b.Watermark, i+1, w.seq)
		}
	}
	g.mu.Unlock()
	return g.Store.Apply(ctx, b)
}

func (g *gatedStore) PutSummaries(ctx context.Context, sums []*analysis.WindowSummary) error {
	g.mu.Lock()
	crashed := g.crashed
	g.mu.Unlock()
	if crashed {
		return fmt.Errorf("gated: crashed: %w", store.ErrUnavailable)
	}
	return g.Store.PutSummaries(ctx, sums)
}

var _ store.SpanWriteStarter = (*gatedStore)(nil)

// waitEvent waits for the store's event want, failing after 10 s.
func waitEvent(t *testing.T, g *gatedStore, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-g.event:
			if ev == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q", want)
		}
	}
}

// consumeAsync consumes spans on a goroutine of its own; its answer
// arrives on the returned channel.
func consumeAsync(p *pipeline.Pipeline, spans []graph.Span) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.Consume(context.Background(), spans) }()
	return done
}

// notAnswered checks that no answer arrives on done for a while.
func notAnswered(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s answered (%v) while an earlier write was in flight", what, err)
	case <-time.After(100 * time.Millisecond):
	}
}

// Two span writes in flight: write 2 (traces A) is held while write 3
// (traces B, started after it) is durable. Neither caller is answered
// and B's spans are not analysed — a flush stores no checkpoint past
// write 2 — until write 2 is done. Then, as the case says: write 2
// commits (both answered, everything analysed); or it fails (A's caller
// told so, B's answered; A sent again is analysed once); or the process
// dies (nothing more stored), after which a new pipeline recovers what
// the checkpoint left — B, and A where the embedded store holds it —
// and A, sent again, is analysed once: the report equals analyze's of
// every trace, each counted once. On both stores.
func TestOverlappingWrites(t *testing.T) {
	for _, outcome := range []string{"commit", "fail", "crash"} {
		t.Run(outcome, func(t *testing.T) {
			bothStores(t, func(t *testing.T, open func() store.Store) { overlappingWrites(t, open, outcome) })
		})
	}
}

func overlappingWrites(t *testing.T, open func() store.Store, outcome string) {
	c := storetest.NewCorpus(t, 60, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), 2*time.Second)
	c2 := cfg()
	c2.SpanWritesInFlight = 2
	want := reference(t, c, c2.Analysis)
	var cs, as, bs []graph.Span // traces 0–19, 20–39, 40–59
	for i, s := range c.Spans {
		switch i / 20 {
		case 0:
			cs = append(cs, s...)
		case 1:
			as = append(as, s...)
		default:
			bs = append(bs, s...)
		}
	}
	held := make(chan error, 1)
	g := &gatedStore{Store: open(), hold: map[int]chan error{2: held}, event: make(chan string, 16)}
	p := pipeline.New(g, c2)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	<-p.Started()
	if err := p.Consume(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := g.Watermark(ctx)
	if err != nil || first == 0 {
		t.Fatalf("checkpoint %d after the first write (%v)", first, err)
	}

	aDone := consumeAsync(p, as)
	waitEvent(t, g, "start 2")
	bDone := consumeAsync(p, bs)
	waitEvent(t, g, "start 3")
	waitEvent(t, g, "done 3")
	notAnswered(t, aDone, "the held write's caller")
	notAnswered(t, bDone, "the later write's caller")
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if wm, err := g.Watermark(ctx); err != nil || wm != first {
		t.Fatalf("checkpoint %d with write 2 in flight, want %d (%v)", wm, first, err)
	}
	recs, err := g.Records(ctx, []graph.TraceID{bs[0].TraceID})
	if err != nil || len(recs) != 0 {
		t.Fatalf("a trace of write 3 analysed (%d records, %v) while write 2 was in flight", len(recs), err)
	}

	switch outcome {
	case "commit":
		held <- nil
		if err := <-aDone; err != nil {
			t.Fatal(err)
		}
		if err := <-bDone; err != nil {
			t.Fatal(err)
		}
	case "fail", "crash":
		if outcome == "crash" {
			g.mu.Lock()
			g.crashed = true
			g.mu.Unlock()
		}
		held <- fmt.Errorf("gated: write lost: %w", store.ErrUnavailable)
		if err := <-aDone; !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("the failed write's caller got %v, want store.ErrUnavailable", err)
		}
		if err := <-bDone; err != nil {
			t.Fatal(err)
		}
	}
	if outcome == "crash" {
		// The process dies: nothing more is stored (HandOver: it does not
		// try to analyse what is pending on its way out).
		p.HandOver()
		cancel()
		<-ran // an error or not: nothing was stored
		if wm, err := g.Store.Watermark(context.Background()); err != nil || wm != first {
			t.Fatalf("checkpoint %d after the crash, want %d (%v)", wm, first, err)
		}
		g.Store.Close()
		st := open()
		defer st.Close()
		p2, stop := start(t, st, c2)
		defer stop()
		if err := p2.Consume(context.Background(), as); err != nil { // the client retries
			t.Fatal(err)
		}
		flushWithin(t, p2, 10*time.Second)
		checkReport(t, st, c, c2.Analysis, want, "report after recovery")
	} else {
		if outcome == "fail" {
			if err := p.Consume(ctx, as); err != nil { // the client retries
				t.Fatal(err)
			}
		}
		flushWithin(t, p, 10*time.Second)
		checkReport(t, g.Store, c, c2.Analysis, want, "report") // the store itself: its optional readers (incidents)
		cancel()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		g.Store.Close()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.violation != "" {
		t.Fatal(g.violation)
	}
}

// plainStore is a real store whose writes cannot overlap (not a
// store.SpanWriteStarter), counting the writes in progress at once.
type plainStore struct {
	store.Store
	mu             sync.Mutex
	inflight, most int
}

func (s *plainStore) WriteSpans(ctx context.Context, spans []graph.Span) (uint64, error) {
	s.mu.Lock()
	s.inflight++
	s.most = max(s.most, s.inflight)
	s.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	seq, err := s.Store.WriteSpans(ctx, spans)
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
	return seq, err
}

// SpanWritesInFlight bounds the writes in flight, and writes overlap up
// to it on a store that can overlap them; a store that cannot has one at
// a time, whatever it says. 8 callers, each sending again once answered
// (as SDKs do); the report then equals analyze's.
func TestSpanWritesInFlight(t *testing.T) {
	c := storetest.NewCorpus(t, 160, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	c2 := cfg()
	c2.SpanWritesInFlight = 2
	want := reference(t, c, c2.Analysis)
	run := func(t *testing.T, st store.Store) {
		p, stop := start(t, st, c2)
		defer stop()
		var wg sync.WaitGroup
		for k := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := k; i < len(c.Spans); i += 8 {
					if err := p.Consume(context.Background(), c.Spans[i]); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		flushWithin(t, p, 10*time.Second)
	}
	t.Run("overlapping", func(t *testing.T) {
		// Deterministic, whatever the machine's speed: the first request
		// is written alone and its commit held; the other callers' requests
		// then wait, more than their share, so a second write must start
		// beside the first before it is released.
		inner := openStore(t, t.TempDir())
		defer inner.Close()
		release := make(chan error, 1)
		g := &gatedStore{Store: inner, hold: map[int]chan error{1: release}, event: make(chan string, 2*len(c.Spans)+16)}
		p, stop := start(t, g, c2)
		defer stop()
		first := consumeAsync(p, c.Spans[0])
		waitEvent(t, g, "start 1")
		var wg sync.WaitGroup
		for k := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 1 + k; i < len(c.Spans); i += 8 {
					if err := p.Consume(context.Background(), c.Spans[i]); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		waitEvent(t, g, "start 2") // fails after 10 s: no write beside the held one
		release <- nil
		wg.Wait()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		flushWithin(t, p, 10*time.Second)
		checkReport(t, inner, c, c2.Analysis, want, "report")
		if g.most != 2 {
			t.Errorf("at most %d writes in flight at once, want 2", g.most)
		}
	})
	t.Run("one at a time", func(t *testing.T) {
		inner := openStore(t, t.TempDir())
		defer inner.Close()
		s := &plainStore{Store: inner}
		run(t, s)
		checkReport(t, inner, c, c2.Analysis, want, "report")
		if s.most != 1 {
			t.Errorf("at most %d writes in progress at once, want 1", s.most)
		}
	})
}
