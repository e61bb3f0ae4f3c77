// Package storetest is the conformance suite every store.Store passes. A
// store's own tests call Run with a function that opens a store over the
// same place each time (so that durability across Close can be checked).
package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/radius"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store"
)

// Opener opens the store under test. Each call within one subtest opens
// the same underlying data; fresh reports whether to start empty.
type Opener func(t *testing.T, fresh bool) store.Store

// Run runs the conformance suite; opt declares the optional interfaces
// the store implements (see Optional).
func Run(t *testing.T, open Opener, opt Optional) {
	t.Run("Spans", func(t *testing.T) { testSpans(t, open) })
	t.Run("Records", func(t *testing.T) { testRecords(t, open) })
	t.Run("Rollups", func(t *testing.T) { testRollups(t, open) })
	t.Run("Windows", func(t *testing.T) { testWindows(t, open) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, open) })
	t.Run("StaleSummaries", func(t *testing.T) { testStaleSummaries(t, open) })
	t.Run("Optional", func(t *testing.T) { testOptional(t, open, opt) })
	t.Run("Figures", func(t *testing.T) { testFigures(t, open) })
	t.Run("Position", func(t *testing.T) { testPosition(t, open) })
	t.Run("Kept", func(t *testing.T) { testKept(t, open) })
	t.Run("LateWrite", func(t *testing.T) { testLateWrite(t, open) })
}

// Corpus is a simulated incident over several hours, assembled and
// evaluated: what a pipeline would store.
type Corpus struct {
	Spans   [][]graph.Span // by trace
	Traces  []*graph.Trace
	Results []*analysis.TraceResult
	Windows *analysis.Windows
}

// Scenario is the incident the suite simulates: n traces, one every
// spacing, from start. An ownership front end (failing on its own now and
// then) calls a naive router and a learned fail-open ads service; the
// router retries a persistently failing driver and a flaky redis; a cron
// job calls the driver too.
func Scenario(n int, start time.Time, spacing time.Duration) sim.Scenario {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	naive := sim.Policy{Retry: sim.RetryNaive, Retries: 2}
	svcs := []sim.Service{
		{Name: "front", Operation: "GET /dispatch", Policy: own, ErrorRate: 0.08, Calls: []sim.Edge{{To: "route"}, {To: "ads", FailOpen: true}}},
		{Name: "route", Operation: "GET /route", Policy: naive, Calls: []sim.Edge{{To: "driver"}, {To: "redis", Virtual: true}}},
		{Name: "driver", Operation: "GET /driver", Policy: own, ErrorRate: 0.05},
		{Name: "ads", Operation: "GET /ads", Policy: own, ErrorRate: 0.3},
		{Name: "batch", Operation: "tick", Policy: naive, Calls: []sim.Edge{{To: "driver"}}},
	}
	return sim.Scenario{Services: svcs, Root: "front", Traces: n, Seed: 7, Start: start, Spacing: spacing,
		Faults: []sim.Fault{{Service: "driver", Rate: 0.4, Persistent: true}, {Service: "redis", Rate: 0.1}}}
}

// NewCorpus simulates Scenario(n, start, spacing) and assembles it.
func NewCorpus(t testing.TB, n int, start time.Time, spacing time.Duration) *Corpus {
	t.Helper()
	return newCorpus(t, n, start, spacing, true)
}

// NewUnsampledCorpus is NewCorpus of traffic received whole: what a
// store written before sampled traffic was weighted holds.
func NewUnsampledCorpus(t testing.TB, n int, start time.Time, spacing time.Duration) *Corpus {
	t.Helper()
	return newCorpus(t, n, start, spacing, false)
}

func newCorpus(t testing.TB, n int, start time.Time, spacing time.Duration, sampled bool) *Corpus {
	t.Helper()
	res, err := sim.Run(Scenario(n, start, spacing))
	if err != nil {
		t.Fatal(err)
	}
	dec := ingest.NewDecoder(ingest.DecoderConfig{})
	var spans []graph.Span
	for _, tr := range res.Traces {
		spans = dec.AppendTraces(spans, tr.Data)
	}
	c := &Corpus{Spans: graph.GroupTraces(spans), Windows: analysis.NewWindows(time.Hour)}
	if sampled {
		sampleCorpus(c.Spans)
	}
	var asm graph.Assembler
	for _, sp := range c.Spans {
		tr := asm.Assemble(append([]graph.Span(nil), sp...))
		tr.Spans = nil
		c.Traces = append(c.Traces, tr)
		c.Windows.Add(tr)
	}
	ev := analysis.NewEvaluator(analysis.Config{})
	for _, tr := range c.Traces {
		r := ev.Evaluate(tr, c.Windows.State(c.Windows.Of(tr)))
		c.Results = append(c.Results, &r)
	}
	return c
}

// sampleCorpus makes a corpus's traces sampled traffic (docs/SPEC.md
// §4.9), as a head sampler that records its probability on every span
// writes it: a quarter of the traces (by the last byte of their id)
// sampled at 1/4, a quarter at 0.3 (an adjusted count that is no
// integer: weights 3 and 4), the rest unsampled. So every test of a
// store, the pipeline or analyze over a corpus holds sampled traffic to
// the same answers as the rest.
func sampleCorpus(traces [][]graph.Span) {
	for _, tr := range traces {
		var a float64
		switch tr[0].TraceID[15] % 4 {
		case 0:
			a = 4
		case 1:
			a = 1 / 0.3
		default:
			continue
		}
		for i := range tr {
			tr[i].Sampling, tr[i].AdjustedCount = graph.SamplingRecorded, a
		}
	}
}

// Record returns the record of trace i.
func (c *Corpus) Record(i int, seq uint64) *store.Record {
	return store.NewRecord(c.Traces[i], c.Results[i], seq)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a loaded CI machine, a cluster
	t.Cleanup(cancel)
	return c
}

func sortSpans(s []graph.Span) {
	slices.SortFunc(s, func(a, b graph.Span) int { return bytes.Compare(a.SpanID[:], b.SpanID[:]) })
}

func testSpans(t *testing.T, open Opener) {
	c := NewCorpus(t, 20, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	s := open(t, true)
	x := ctx(t)
	// Three writes: traces 0-9, then 10-19 with trace 0 again (a resend),
	// then nothing new but a duplicate of trace 5's first span.
	var w1, w2 []graph.Span
	for i := 0; i < 10; i++ {
		w1 = append(w1, c.Spans[i]...)
	}
	for i := 10; i < 20; i++ {
		w2 = append(w2, c.Spans[i]...)
	}
	w2 = append(w2, c.Spans[0]...)
	seq1, err := s.WriteSpans(x, w1)
	if err != nil {
		t.Fatal(err)
	}
	seq2, err := s.WriteSpans(x, w2)
	if err != nil {
		t.Fatal(err)
	}
	seq3, err := s.WriteSpans(x, c.Spans[5][:1])
	if err != nil {
		t.Fatal(err)
	}
	if !(seq1 < seq2 && seq2 < seq3) {
		t.Fatalf("sequences %d %d %d do not increase", seq1, seq2, seq3)
	}
	check := func(s store.Store) {
		for _, i := range []int{0, 5, 19} {
			got, err := s.TraceSpans(x, c.Spans[i][0].TraceID, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(c.Spans[i])
			sortSpans(got)
			sortSpans(want)
			if !slices.Equal(got, want) {
				t.Fatalf("trace %d: %d spans read back, want the %d written once", i, len(got), len(want))
			}
		}
		if got, err := s.TraceSpans(x, graph.TraceID{0xde, 0xad}, nil); err != nil || len(got) != 0 {
			t.Fatalf("unknown trace: %v %v", got, err)
		}
		// After seq1: writes 2 and 3 as they were written (a store may or
		// may not keep a resent span again: at most all of them, at least
		// the new ones), every span id of theirs among them.
		var seqs []uint64
		ids := map[graph.SpanID]bool{}
		n := 0
		err := s.SpansAfter(x, seq1, func(seq uint64, spans []graph.Span) error {
			seqs = append(seqs, seq)
			n += len(spans)
			for _, sp := range spans {
				ids[sp.SpanID] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		newOnes := len(w2) - len(c.Spans[0])
		if len(seqs) == 0 || seqs[0] != seq2 || n < newOnes || n > len(w2)+1 {
			t.Fatalf("after %d: writes %v with %d spans, want from %d with %d to %d", seq1, seqs, n, seq2, newOnes, len(w2)+1)
		}
		for i := 10; i < 20; i++ {
			for _, sp := range c.Spans[i] {
				if !ids[sp.SpanID] {
					t.Fatalf("span %s of trace %d missing after %d", sp.SpanID, i, seq1)
				}
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, false) // durable across a reopen
	defer s.Close()
	check(s)
	seq4, err := s.WriteSpans(x, c.Spans[1])
	if err != nil || seq4 <= seq3 {
		t.Fatalf("after reopen: seq %d (last %d) %v", seq4, seq3, err)
	}
}

func testRecords(t *testing.T, open Opener) {
	c := NewCorpus(t, 30, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	s := open(t, true)
	defer s.Close()
	x := ctx(t)
	var changes []store.Change
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 7)})
	}
	if err := s.Apply(x, store.Batch{Changes: changes, Watermark: 7}); err != nil {
		t.Fatal(err)
	}
	if wm, err := s.Watermark(x); err != nil || wm != 7 {
		t.Fatalf("watermark %d %v, want 7", wm, err)
	}
	ids := []graph.TraceID{c.Traces[3].ID, c.Traces[17].ID, {0xde, 0xad}}
	got, err := s.Records(x, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d records, want 2", len(got))
	}
	for _, i := range []int{3, 17} {
		want := c.Record(i, 7)
		r := got[c.Traces[i].ID]
		if r == nil {
			t.Fatalf("record %d missing", i)
		}
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(want)
		if !bytes.Equal(a, b) {
			t.Fatalf("record %d read back differs:\n%s\nwant\n%s", i, a, b)
		}
		back, err := graph.DecodeTrace(r.Facts)
		if err != nil || back.APIName != c.Traces[i].APIName || len(back.Hops) != len(c.Traces[i].Hops) {
			t.Fatalf("facts of record %d: %v", i, err)
		}
	}
	// WindowRecords with an edge filter: the records using front → ads.
	ads := store.EdgeKey(graph.Edge{Caller: "front", Callee: graph.Node{Service: "ads", Operation: "GET /ads"}})
	want := map[graph.TraceID]bool{}
	w := c.Results[0].Window
	for i, tr := range c.Traces {
		if c.Results[i].Window == w && slices.Contains(store.TraceEdges(tr, nil), ads) {
			want[tr.ID] = true
		}
	}
	if len(want) == 0 {
		t.Fatal("corpus has no front → ads call")
	}
	seen := map[graph.TraceID]bool{}
	if err := s.WindowRecords(x, w, []uint64{ads, 12345}, func(r *store.Record) error { seen[r.TraceID] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(seen, want) {
		t.Fatalf("window records using front→ads: %d, want %d", len(seen), len(want))
	}
	all := 0
	s.WindowRecords(x, w, nil, func(*store.Record) error { all++; return nil })
	if all != len(c.Traces) {
		t.Fatalf("window holds %d records, want %d", all, len(c.Traces))
	}
	// Delete one: gone.
	if err := s.Apply(x, store.Batch{Changes: []store.Change{{Old: c.Record(3, 7)}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Records(x, ids[:1]); len(got) != 0 {
		t.Fatalf("deleted record still there")
	}
	if wm, _ := s.Watermark(x); wm != 7 {
		t.Fatalf("watermark changed to %d by a batch without one", wm)
	}
}

// reportOf sums the results of the records a query selects, in Go.
func reportOf(results map[graph.TraceID]*analysis.TraceResult, q store.Query) *analysis.Report {
	rep := analysis.NewReport()
	for _, r := range results {
		if !q.Contains(r.Start) {
			continue
		}
		if q.API != "" && r.API != q.API {
			one := *r
			one.API = "" // counted in totals and services, not in the API rows
			rep.Add(&one, 1)
			continue
		}
		rep.Add(r, 1)
	}
	rep.Prune()
	return rep
}

func docOf(t *testing.T, r *analysis.Report) string {
	t.Helper()
	b, err := json.Marshal(r.Document(nil, analysis.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Rollups are the exact sum of the stored records, through replacements
// and deletions, for ranges that cut hours and minutes.
func testRollups(t *testing.T, open Opener) {
	start := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	c := NewCorpus(t, 300, start, 50*time.Second) // 9:30 to ~13:40
	s := open(t, true)
	defer s.Close()
	x := ctx(t)
	current := map[graph.TraceID]*analysis.TraceResult{}
	stored := map[graph.TraceID]*store.Record{}
	apply := func(changes []store.Change) {
		t.Helper()
		if err := s.Apply(x, store.Batch{Changes: changes}); err != nil {
			t.Fatal(err)
		}
		for _, ch := range changes {
			if ch.New == nil {
				delete(current, ch.ID())
				delete(stored, ch.ID())
			} else {
				current[ch.ID()] = ch.New.Result
				stored[ch.ID()] = ch.New
			}
		}
	}
	for lo := 0; lo < len(c.Traces); lo += 70 {
		var changes []store.Change
		for i := lo; i < min(lo+70, len(c.Traces)); i++ {
			changes = append(changes, store.Change{New: c.Record(i, 1)})
		}
		apply(changes)
	}
	// Replace every third record by one evaluated against an empty window
	// (different figures), delete every seventh.
	ev := analysis.NewEvaluator(analysis.Config{})
	var changes []store.Change
	for i, tr := range c.Traces {
		switch {
		case i%7 == 0:
			changes = append(changes, store.Change{Old: stored[tr.ID]})
		case i%3 == 0:
			r := ev.Evaluate(tr, analysis.NewState())
			changes = append(changes, store.Change{Old: stored[tr.ID], New: store.NewRecord(tr, &r, 2)})
		}
	}
	apply(changes)
	h := func(hh, mm int) int64 { return time.Date(2026, 3, 1, hh, mm, 0, 0, time.UTC).UnixNano() }
	queries := []store.Query{
		{},
		{From: h(9, 0), To: h(14, 0)},
		{From: h(10, 0), To: h(12, 0)},         // whole hours
		{From: h(9, 45), To: h(12, 17)},        // cut at both ends
		{From: h(10, 5) + 1, To: h(10, 6) + 1}, // a minute that starts after From is in, one that starts before To too
		{From: h(11, 0), To: h(11, 0)},         // empty
		{From: h(9, 31), To: h(13, 2), API: "front GET /dispatch"},
		{API: "nobody"},
	}
	for _, q := range queries {
		got, err := s.Report(x, q)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := docOf(t, got), docOf(t, reportOf(current, q)); g != w {
			t.Fatalf("query %+v:\n got %s\nwant %s", q, g, w)
		}
	}
	// The range covered something in every case but the empty ones.
	if got, _ := s.Report(x, queries[3]); got.Traces == 0 {
		t.Fatalf("query %+v selected nothing", queries[3])
	}
	// Durable: the same after a reopen.
	s.Close()
	s = open(t, false)
	got, err := s.Report(x, queries[3])
	if err != nil {
		t.Fatal(err)
	}
	if g, w := docOf(t, got), docOf(t, reportOf(current, queries[3])); g != w {
		t.Fatalf("after reopen:\n got %s\nwant %s", g, w)
	}
}

func testWindows(t *testing.T, open Opener) {
	c := NewCorpus(t, 40, time.Date(2026, 3, 1, 10, 50, 0, 0, time.UTC), time.Minute) // two hourly windows
	s := open(t, true)
	defer s.Close()
	x := ctx(t)
	idx := c.Windows.Indexes()
	if len(idx) != 2 {
		t.Fatalf("corpus has %d windows", len(idx))
	}
	states := map[int64]*analysis.State{idx[0]: c.Windows.State(idx[0]), idx[1]: c.Windows.State(idx[1])}
	if err := s.Apply(x, store.Batch{States: states}); err != nil {
		t.Fatal(err)
	}
	for _, w := range idx {
		got, exact, err := s.State(x, w)
		if err != nil || !exact {
			t.Fatalf("state %d: exact %v %v", w, exact, err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(c.Windows.State(w))
		if !bytes.Equal(a, b) {
			t.Fatalf("state %d differs", w)
		}
	}
	if _, _, err := s.State(x, idx[1]+5); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing state: %v, want ErrNotFound", err)
	}
	// An emptied window's state is dropped.
	if err := s.Apply(x, store.Batch{States: map[int64]*analysis.State{idx[1]: analysis.NewState()}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.State(x, idx[1]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("emptied state: %v, want ErrNotFound", err)
	}
	sums := c.Windows.Summaries(analysis.Config{})
	if err := s.PutSummaries(x, sums); err != nil {
		t.Fatal(err)
	}
	got, err := s.Summaries(x, idx[0], idx[0])
	if err != nil || len(got) != 1 {
		t.Fatalf("summaries %d %v", len(got), err)
	}
	a, _ := json.Marshal(got[0])
	b, _ := json.Marshal(sums[0])
	if !bytes.Equal(a, b) {
		t.Fatalf("summary differs:\n%s\n%s", a, b)
	}
	if got, _ := s.Summaries(x, idx[0]-10, idx[1]+10); len(got) != 2 {
		t.Fatalf("%d summaries in range, want 2", len(got))
	}
}

func testRetention(t *testing.T, open Opener) {
	start := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	c := NewCorpus(t, 96, start, 5*time.Minute) // 20:00 on the 1st to 03:55 on the 2nd
	s := open(t, true)
	defer s.Close()
	x := ctx(t)
	var changes []store.Change
	current := map[graph.TraceID]*analysis.TraceResult{}
	for i := range c.Traces {
		changes = append(changes, store.Change{New: c.Record(i, 1)})
		current[c.Traces[i].ID] = c.Results[i]
	}
	states := map[int64]*analysis.State{}
	for _, w := range c.Windows.Indexes() {
		states[w] = c.Windows.State(w)
	}
	if err := s.Apply(x, store.Batch{Changes: changes, States: states}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSummaries(x, c.Windows.Summaries(analysis.Config{})); err != nil {
		t.Fatal(err)
	}
	day2 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	if err := s.DeleteBefore(x, day2.Add(2*time.Hour+20*time.Minute).UnixNano()); err != nil { // drops the 1st
		t.Fatal(err)
	}
	keep := map[graph.TraceID]*analysis.TraceResult{}
	var gone, kept []graph.TraceID
	for id, r := range current {
		if r.Start >= day2.UnixNano() {
			keep[id] = r
			kept = append(kept, id)
		} else {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 || len(kept) == 0 {
		t.Fatalf("corpus: %d before the cut, %d after", len(gone), len(kept))
	}
	if got, _ := s.Records(x, gone); len(got) != 0 {
		t.Fatalf("%d old records survived", len(got))
	}
	if got, _ := s.Records(x, kept); len(got) != len(kept) {
		t.Fatalf("%d of %d recent records kept", len(got), len(kept))
	}
	for _, q := range []store.Query{{}, {From: day2.Add(-time.Hour).UnixNano(), To: day2.Add(time.Hour).UnixNano()}} {
		got, err := s.Report(x, q)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := docOf(t, got), docOf(t, reportOf(keep, q)); g != w {
			t.Fatalf("rollups after retention, query %+v:\n got %s\nwant %s", q, g, w)
		}
	}
	w2 := analysis.WindowOf(day2.UnixNano(), time.Hour)
	if _, _, err := s.State(x, w2-1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old state survived: %v", err)
	}
	if _, _, err := s.State(x, w2); err != nil {
		t.Fatalf("recent state: %v", err)
	}
	if sums, _ := s.Summaries(x, 0, w2-1); len(sums) != 0 {
		t.Fatalf("%d old summaries survived", len(sums))
	}
}

// testStaleSummaries: a batch that changes a window's state marks its
// summary stale until the summary is put.
func testStaleSummaries(t *testing.T, open Opener) {
	c := NewCorpus(t, 10, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	s := open(t, true)
	x := ctx(t)
	w := c.Windows.Indexes()[0]
	if got, err := s.StaleSummaries(x); err != nil || len(got) != 0 {
		t.Fatalf("fresh store: stale %v %v", got, err)
	}
	if err := s.Apply(x, store.Batch{States: map[int64]*analysis.State{w: c.Windows.State(w)}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, false) // a crash before the summary: still stale after a reopen
	defer s.Close()
	if got, err := s.StaleSummaries(x); err != nil || !slices.Equal(got, []int64{w}) {
		t.Fatalf("after a state change: stale %v %v, want [%d]", got, err, w)
	}
	if err := s.PutSummaries(x, c.Windows.Summaries(analysis.Config{})); err != nil {
		t.Fatal(err)
	}
	if got, err := s.StaleSummaries(x); err != nil || len(got) != 0 {
		t.Fatalf("after the summary: stale %v %v", got, err)
	}
}

// FillWeek stores, for apis root APIs, one failed trace per API per minute
// over the 7 days before end: the rollups a week of traffic leaves (a
// million records for 100 APIs). It returns the query over that week.
func FillWeek(t testing.TB, s store.Store, apis int, end time.Time) store.Query {
	t.Helper()
	x := context.Background()
	var asm graph.Assembler
	facts := asm.Assemble([]graph.Span{{TraceID: graph.TraceID{1}, SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: "a", Operation: "op"}}).AppendBinary(nil)
	start := end.Add(-7 * 24 * time.Hour).Truncate(time.Hour)
	var batch []store.Change
	var id uint64
	for m := start; m.Before(end); m = m.Add(time.Minute) {
		for a := 0; a < apis; a++ {
			id++
			svc := fmt.Sprintf("svc-%03d", a)
			r := &analysis.TraceResult{API: svc + " GET /api", Start: m.UnixNano(), Spans: 30, Radius: 1 + a%3,
				Events:     []analysis.Event{{Owner: graph.Node{Service: "db-" + svc, Operation: "query"}, Radius: 1 + a%3}},
				Owners:     []radius.OwnerStat{{Node: graph.Node{Service: "db-" + svc, Operation: "query"}, Hops: 2, First: 1, Spurious: 3}},
				Suppressed: 1, Hops: 12, Counterfactual: 15, RootFailed: a%2 == 0,
				Services: []analysis.ServiceResult{{Service: svc, Requests: 4}, {Service: "db-" + svc, Requests: 8, OwnedFailures: 2}},
				Nodes:    []analysis.NodeCount{{Node: graph.Node{Service: "db-" + svc, Operation: "query"}, Requests: 8, Owned: 1}, {Node: graph.Node{Service: svc, Operation: "GET /api"}, Requests: 4}},
			}
			binary.BigEndian.PutUint64(r.TraceID[8:], id)
			r.Window = analysis.WindowOf(r.Start, s.Window())
			batch = append(batch, store.Change{New: &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: r.API, Seq: 1, Result: r, Facts: facts}})
			if len(batch) == 5000 {
				if err := s.Apply(x, store.Batch{Changes: batch}); err != nil {
					t.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if err := s.Apply(x, store.Batch{Changes: batch}); err != nil {
		t.Fatal(err)
	}
	// Every window's summary: each API's call graph (front → its database,
	// retried once), as a window of its traces would learn it.
	st := analysis.NewState()
	for a := 0; a < apis; a++ {
		svc := fmt.Sprintf("svc-%03d", a)
		id := graph.TraceID{2, byte(a)}
		t0 := start.UnixNano()
		spans := []graph.Span{
			{TraceID: id, SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: svc, Operation: "GET /api", Start: t0, End: t0 + 9e6, Failed: true},
			{TraceID: id, SpanID: graph.SpanID{2}, ParentID: graph.SpanID{1}, Kind: graph.KindClient, Service: svc, Name: "query", Start: t0 + 1e6, End: t0 + 3e6, Failed: true},
			{TraceID: id, SpanID: graph.SpanID{3}, ParentID: graph.SpanID{2}, Kind: graph.KindServer, Service: "db-" + svc, Operation: "query", Start: t0 + 1e6, End: t0 + 3e6, Failed: true},
			{TraceID: id, SpanID: graph.SpanID{4}, ParentID: graph.SpanID{1}, Kind: graph.KindClient, Service: svc, Name: "query", Start: t0 + 4e6, End: t0 + 6e6, Failed: true, HasResend: true, Resend: 1},
			{TraceID: id, SpanID: graph.SpanID{5}, ParentID: graph.SpanID{4}, Kind: graph.KindServer, Service: "db-" + svc, Operation: "query", Start: t0 + 4e6, End: t0 + 6e6, Failed: true},
		}
		st.Add(asm.Assemble(spans), 1)
	}
	var sums []*analysis.WindowSummary
	for w := analysis.WindowOf(start.UnixNano(), s.Window()); w <= analysis.WindowOf(end.UnixNano()-1, s.Window()); w++ {
		sums = append(sums, st.Summary(w, analysis.Config{Window: s.Window()}))
	}
	if err := s.PutSummaries(x, sums); err != nil {
		t.Fatal(err)
	}
	return store.Query{From: start.UnixNano(), To: end.UnixNano()}
}

// Document is `stormradius analyze` of the corpus (one core): the
// reference a stored, streamed run must equal.
func (c *Corpus) Document(acfg analysis.Config) *analysis.Document {
	lists := make(graph.Lists, len(c.Spans))
	for i, s := range c.Spans {
		lists[i] = append([]graph.Span(nil), s...)
	}
	d, _ := analysis.InMemory(lists, acfg, 1)
	return d
}

// DocJSON is d as the REST API writes it, for comparing documents.
func DocJSON(t testing.TB, d *analysis.Document) string {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Analyze is `stormradius analyze` of the simulated traces (one window
// length, one core): the reference a stored, streamed run must equal.
func Analyze(res *sim.Result, window time.Duration) (*analysis.Document, *analysis.Windows) {
	return AnalyzeBatches(res.TraceData(), window)
}

// AnalyzeBatches is Analyze of OTLP batches (sampled ones: sim.Sample).
func AnalyzeBatches(batches []ptrace.Traces, window time.Duration) (*analysis.Document, *analysis.Windows) {
	dec := ingest.NewDecoder(ingest.DecoderConfig{})
	var spans []graph.Span
	for _, td := range batches {
		spans = dec.AppendTraces(spans, td)
	}
	return analysis.InMemory(graph.Lists(graph.GroupTraces(spans)), analysis.Config{Window: window}, 1)
}
