package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// cfg analyses with 10-minute windows, so that the corpus spans several,
// and flushes traces after 30 ms of silence.
func cfg() pipeline.Config {
	return pipeline.Config{
		Analysis:  analysis.Config{Window: 10 * time.Minute},
		TraceIdle: 30 * time.Millisecond, MaxTraceAge: 2 * time.Second, Tick: 5 * time.Millisecond,
		SummaryInterval: 20 * time.Millisecond, Retention: -1,
	}
}

func openStore(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Window: 10 * time.Minute, Synchronous: "normal"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs a pipeline over st until the returned stop is called.
func start(t *testing.T, st store.Store, c pipeline.Config) (*pipeline.Pipeline, func()) {
	t.Helper()
	p := pipeline.New(st, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Started():
	case err := <-done:
		t.Fatalf("pipeline did not start: %v", err)
	}
	return p, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pipeline: %v", err)
		}
	}
}

func docJSON(t *testing.T, d *analysis.Document) string { return storetest.DocJSON(t, d) }

// checkRecords checks that every trace of the corpus has one stored record
// and that its result is the one analyze computes: evaluated against the
// trace's complete window.
func checkRecords(t *testing.T, st store.Records, c *storetest.Corpus, acfg analysis.Config) {
	t.Helper()
	ws := analysis.NewWindows(acfg.Window)
	var asm graph.Assembler
	var trs []*graph.Trace
	ids := make([]graph.TraceID, 0, len(c.Spans))
	for _, s := range c.Spans {
		tr := asm.Assemble(append([]graph.Span(nil), s...))
		trs = append(trs, tr)
		ws.Add(tr)
		ids = append(ids, tr.ID)
	}
	recs, err := st.Records(context.Background(), ids)
	if err != nil || len(recs) != len(ids) {
		t.Fatalf("%d records for %d traces (%v)", len(recs), len(ids), err)
	}
	ev := analysis.NewEvaluator(acfg)
	stale := 0
	for _, tr := range trs {
		r := ev.Evaluate(tr, ws.State(ws.Of(tr)))
		if !reflect.DeepEqual(&r, recs[tr.ID].Result) {
			stale++
		}
	}
	if stale > 0 {
		t.Fatalf("%d of %d stored results differ from analyze's", stale, len(trs))
	}
}

// checkReport checks that the stored report equals want (analyze's
// document) and every record analyze's result; what names the report.
func checkReport(t *testing.T, st store.Store, c *storetest.Corpus, acfg analysis.Config, want, what string) {
	t.Helper()
	got, err := query.Document(context.Background(), st, store.Query{}, acfg)
	if err != nil {
		t.Fatal(err)
	}
	if g := docJSON(t, got); g != want {
		t.Fatalf("%s differs from analyze:\n got %s\nwant %s", what, g, want)
	}
	checkRecords(t, st, c, acfg)
}

// flushWithin flushes p until a flush succeeds (a refused batch makes one
// fail), for at most d.
func flushWithin(t *testing.T, p *pipeline.Pipeline, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for err := p.Flush(context.Background()); err != nil; err = p.Flush(context.Background()) {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// reference is analyze's document of the corpus.
func reference(t *testing.T, c *storetest.Corpus, acfg analysis.Config) string {
	t.Helper()
	return storetest.DocJSON(t, c.Document(acfg))
}

// shuffled returns every span of the corpus in random order, in random
// batches of 1 to 150 spans, and a tenth of the traces' last span held
// back as late spans.
func shuffled(c *storetest.Corpus, seed uint64) (batches, late [][]graph.Span) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var all, held []graph.Span
	for i, tr := range c.Spans {
		if i%10 == 3 && len(tr) > 1 {
			all = append(all, tr[:len(tr)-1]...)
			held = append(held, tr[len(tr)-1])
			continue
		}
		all = append(all, tr...)
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	split := func(s []graph.Span) (out [][]graph.Span) {
		for len(s) > 0 {
			n := min(len(s), 1+rng.IntN(150))
			out = append(out, s[:n])
			s = s[n:]
		}
		return out
	}
	return split(all), split(held)
}

// feed sends batches from 4 goroutines, retrying on backpressure.
func feed(t *testing.T, p *pipeline.Pipeline, batches [][]graph.Span) {
	t.Helper()
	var wg sync.WaitGroup
	ch := make(chan []graph.Span)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range ch {
				for {
					err := p.Consume(context.Background(), b)
					if errors.Is(err, pipeline.ErrBackpressure) {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if err != nil {
						t.Error(err)
					}
					break
				}
			}
		}()
	}
	for _, b := range batches {
		ch <- b
	}
	close(ch)
	wg.Wait()
}

// The invariant: once ingestion is quiet, the stored report equals
// analyze of the same traces — whatever the arrival order, batching, late
// spans re-opening traces already analysed, and window states changing
// under stored results. Arrival is roughly chronological, shuffled within
// chunks of 40 traces, and every chunk is analysed before the next
// arrives: early traces are evaluated against windows that still lack most
// of their traces (edges not yet learned, not yet seen retried), so their
// stored results go stale and must be re-evaluated.
func TestStreamEqualsAnalyze(t *testing.T) {
	c := storetest.NewCorpus(t, 500, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 3*time.Second) // 9:55–10:20: 3 windows
	c2 := cfg()
	want := reference(t, c, c2.Analysis)
	st := openStore(t, t.TempDir())
	defer st.Close()
	p, stop := start(t, st, c2)
	defer stop()
	ctx := context.Background()
	var late [][]graph.Span
	for lo := 0; lo < len(c.Spans); lo += 40 {
		chunk := &storetest.Corpus{Spans: c.Spans[lo:min(lo+40, len(c.Spans))]}
		b, l := shuffled(chunk, uint64(lo))
		feed(t, p, b)
		late = append(late, l...)
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	feed(t, p, late) // spans of traces already analysed
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkReport(t, st, c, c2.Analysis, want, "stream report")
}

// A crash: spans acknowledged (stored) but not analysed, some of them
// late spans of traces analysed before. A new pipeline recovers them from
// the checkpoint; the report then equals analyze, nothing counted twice.
func TestRecoveryAfterCrash(t *testing.T) {
	c := storetest.NewCorpus(t, 300, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), 2*time.Second)
	c2 := cfg()
	want := reference(t, c, c2.Analysis)
	dir := t.TempDir()
	st := openStore(t, dir)
	batches, late := shuffled(c, 2)
	half := len(batches) / 2
	p, stop := start(t, st, c2)
	feed(t, p, batches[:half])
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop()
	// "Acknowledged, then the process died": written, never analysed.
	ctx := context.Background()
	for _, b := range append(batches[half:], late...) {
		if _, err := st.WriteSpans(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	st = openStore(t, dir)
	defer st.Close()
	p, stop = start(t, st, c2)
	defer stop()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkReport(t, st, c, c2.Analysis, want, "report after recovery")
}

// Past the in-flight budget, Consume refuses with pipeline.ErrBackpressure and
// stores nothing; once the pipeline has caught up it accepts again.
func TestBackpressure(t *testing.T) {
	c := storetest.NewCorpus(t, 50, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	c2 := cfg()
	c2.MaxInflightSpans = 100
	c2.TraceIdle = time.Hour // nothing leaves the buffer on its own
	c2.MaxTraceAge = time.Hour
	st := openStore(t, filepath.Join(t.TempDir(), "d"))
	defer st.Close()
	p, stop := start(t, st, c2)
	defer stop()
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	ctx := context.Background()
	if err := p.Consume(ctx, all[:90]); err != nil {
		t.Fatal(err)
	}
	if p.Saturated() {
		t.Fatal("saturated at 90 spans of 100")
	}
	if err := p.Consume(ctx, all[90:100]); err != nil {
		t.Fatal(err)
	}
	if !p.Saturated() {
		t.Fatal("not saturated at 100 spans of 100")
	}
	if err := p.Consume(ctx, all[100:101]); !errors.Is(err, pipeline.ErrBackpressure) {
		t.Fatalf("one span over budget: %v, want pipeline.ErrBackpressure", err)
	}
	if err := p.Consume(ctx, all[90:120]); !errors.Is(err, pipeline.ErrBackpressure) {
		t.Fatalf("over budget: %v, want pipeline.ErrBackpressure", err)
	}
	if spans, _ := st.TraceSpans(ctx, all[100].TraceID, nil); containsSpan(spans, all[100].SpanID) {
		t.Fatalf("a refused span was stored")
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Saturated() {
		t.Fatal("saturated after the flush")
	}
	if err := p.Consume(ctx, all[100:120]); err != nil {
		t.Fatalf("after catching up: %v", err)
	}
}

func containsSpan(spans []graph.Span, id graph.SpanID) bool {
	for _, s := range spans {
		if s.SpanID == id {
			return true
		}
	}
	return false
}

// flakyStore fails or delays batches on demand.
type flakyStore struct {
	*sqlite.Store
	mu      sync.Mutex
	fails   int           // batches to refuse with a non-transient error
	delay   time.Duration // before each batch
	began   chan struct{} // receives when a batch starts (if not nil)
	unavail []int         // batches (counting from 1) to refuse as unavailable
	applies int
}

func (f *flakyStore) Apply(ctx context.Context, b store.Batch) error {
	f.mu.Lock()
	f.applies++
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	delay, began := f.delay, f.began
	down := slices.Contains(f.unavail, f.applies)
	f.mu.Unlock()
	if down {
		time.Sleep(delay)
		return fmt.Errorf("flaky: %w", store.ErrUnavailable)
	}
	if began != nil {
		select {
		case began <- struct{}{}:
		default:
		}
	}
	time.Sleep(delay)
	if fail {
		return errors.New("boom")
	}
	return f.Store.Apply(ctx, b)
}

// Batches are computed while the previous one is being stored: a trace
// re-opened, or a record made stale by a flip, while its batch is in
// flight is read from that batch, not from the store, which does not hold
// it yet. Spans stream in without a flush between chunks (late spans
// two chunks later), every store batch is slow, and two of them are
// refused as unavailable (their traces, and the batch computed on top of
// them, are analysed again): once quiet, the report equals analyze.
func TestPipelinedBatches(t *testing.T) {
	c := storetest.NewCorpus(t, 600, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2500*time.Millisecond)
	c2 := cfg()
	want := reference(t, c, c2.Analysis)
	st := &flakyStore{Store: openStore(t, t.TempDir()), delay: 60 * time.Millisecond, unavail: []int{4, 9}}
	defer st.Close()
	p, stop := start(t, st, c2)
	var late [][][]graph.Span
	for lo := 0; lo < len(c.Spans); lo += 30 {
		chunk := &storetest.Corpus{Spans: c.Spans[lo:min(lo+30, len(c.Spans))]}
		b, l := shuffled(chunk, uint64(lo))
		feed(t, p, b)
		late = append(late, l)
		if len(late) > 2 {
			feed(t, p, late[0])
			late = late[1:]
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, l := range late {
		feed(t, p, l)
	}
	flushWithin(t, p, 20*time.Second)
	stop()
	if n := pipeline.FromFlight(p); n == 0 {
		t.Error("no record was read from a batch in flight: the test does not test it")
	}
	if st.applies < 5 {
		t.Errorf("only %d store batches", st.applies)
	}
	checkReport(t, st, c, c2.Analysis, want, "stream report")
}

// A batch the store refuses puts its traces back: a later flush analyses
// them, nothing is lost to the checkpoint.
func TestRefusedBatchIsKept(t *testing.T) {
	c := storetest.NewCorpus(t, 100, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	st := &flakyStore{Store: openStore(t, t.TempDir()), fails: 2}
	defer st.Close()
	c2 := cfg()
	p, stop := start(t, st, c2)
	defer stop()
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	feed(t, p, [][]graph.Span{all})
	ctx := context.Background()
	if err := p.Flush(ctx); err == nil {
		t.Fatal("the refused batch was not reported")
	}
	flushWithin(t, p, 10*time.Second)
	checkRecords(t, st, c, c2.Analysis)
}

// Stopping the pipeline while a batch is being stored finishes that batch
// and analyses what is pending; a restart has nothing to recover that was
// lost: every trace has its record, equal to analyze's.
func TestStopDuringBatch(t *testing.T) {
	c := storetest.NewCorpus(t, 100, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	dir := t.TempDir()
	st := &flakyStore{Store: openStore(t, dir), delay: 200 * time.Millisecond, began: make(chan struct{}, 1)}
	c2 := cfg()
	p, stop := start(t, st, c2)
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	feed(t, p, [][]graph.Span{all[:len(all)/2]})
	<-st.began // a batch is under way
	feed(t, p, [][]graph.Span{all[len(all)/2:]})
	stop()
	st.Close()
	s2 := openStore(t, dir)
	defer s2.Close()
	p, stop = start(t, s2, c2)
	defer stop()
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, s2, c, c2.Analysis)
}

// compactRecorder is a store that records the pipeline's Compact calls.
type compactRecorder struct {
	store.Store
	calls chan int64
}

func (c *compactRecorder) Compact(_ context.Context, t int64) error {
	c.calls <- t
	return nil
}

// A store that compacts is asked to, for the days that closed two hours
// before now, as the pipeline starts (and hourly), also when data is kept
// forever.
func TestCompactsClosedDays(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	now := time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC)
	c := cfg()
	c.Now = func() time.Time { return now }
	rec := &compactRecorder{Store: st, calls: make(chan int64, 4)}
	_, stop := start(t, rec, c)
	defer stop()
	select {
	case got := <-rec.calls:
		if want := now.Add(-2 * time.Hour).UnixNano(); got != want {
			t.Fatalf("Compact(%v), want Compact(%v)", time.Unix(0, got).UTC(), time.Unix(0, want).UTC())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline never compacted")
	}
}
