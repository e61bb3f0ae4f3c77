package chsource_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/ingest/chsource/oteltable"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// split returns td's spans in two Traces: those keep(span) says, and the
// rest.
func split(td ptrace.Traces, keep func(ptrace.Span) bool) (ptrace.Traces, ptrace.Traces) {
	a, b := ptrace.NewTraces(), ptrace.NewTraces()
	td.CopyTo(a)
	td.CopyTo(b)
	for _, rs := range a.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			ss.Spans().RemoveIf(func(s ptrace.Span) bool { return !keep(s) })
		}
	}
	for _, rs := range b.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			ss.Spans().RemoveIf(keep)
		}
	}
	return a, b
}

// Following the table (serve/ingest --source): the incident's rows
// arrive in two phases; spans whose start is within the lag of the first
// phase's clock arrive only in the second (late, as a collector's queue
// delivers them), and the follower is stopped and started again between
// the phases (a restart). Once quiet, the stored report equals analyze of
// every span: nothing lost, nothing counted twice; the position resumed.
func TestFollow(t *testing.T) {
	tds := exports(t) // 9:50 to 10:00
	want, _ := storetest.AnalyzeBatches(tds, 10*time.Minute)
	conn, db, dsn := server(t)
	ctx := context.Background()
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	mid := time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC)
	lag := 2 * time.Minute
	var now atomic.Int64
	now.Store(mid.Add(30 * time.Second).UnixNano()) // reads up to mid − 90 s
	var second []ptrace.Traces
	late := 0
	for _, td := range tds {
		first, rest := split(td, func(s ptrace.Span) bool {
			st := s.StartTimestamp().AsTime()
			if st.Before(mid.Add(30*time.Second-lag)) || !st.Before(mid) {
				return st.Before(mid)
			}
			// Within the lag of the first phase's clock (not read yet
			// then): a third of them late.
			return s.SpanID()[7]%3 != 0
		})
		late += td.SpanCount() - first.SpanCount() - countFrom(rest, mid)
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, first); err != nil {
			t.Fatal(err)
		}
		second = append(second, rest)
	}
	if late == 0 {
		t.Fatal("no span arrives late")
	}

	st, err := storeurl.Open(ctx, storeurl.Options{Data: t.TempDir(), Window: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pcfg := pipeline.Config{TraceIdle: 50 * time.Millisecond, MaxTraceAge: time.Minute, SummaryInterval: 20 * time.Millisecond, Retention: -1}
	fcfg := chsource.FollowConfig{Lag: lag, Poll: 20 * time.Millisecond, Start: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC),
		Now: func() time.Time { return time.Unix(0, now.Load()) }}
	follow := func(until time.Time) float64 {
		t.Helper()
		reg := prometheus.NewRegistry()
		fcfg.Registerer = reg
		src, err := chsource.Open(ctx, dsn, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		p := pipeline.New(st, pcfg)
		pctx, stopPipe := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(pctx) }()
		<-p.Started()
		fctx, stop := context.WithCancel(ctx)
		fdone := make(chan error, 1)
		go func() { fdone <- src.Follow(fctx, fcfg, st.(store.SourcePositions), p.Consume) }()
		deadline := time.Now().Add(20 * time.Second)
		for {
			v, _, err := st.(store.SourcePositions).SourcePosition(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if v >= until.UnixNano() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the position stayed at %s, short of %s", time.Unix(0, v).UTC(), until.UTC())
			}
			time.Sleep(20 * time.Millisecond)
		}
		stop()
		if err := <-fdone; err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		stopPipe()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "stormradius_source_rows_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no stormradius_source_rows_total")
		return 0
	}
	follow(mid.Add(-90 * time.Second))
	for _, td := range second {
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, td); err != nil {
			t.Fatal(err)
		}
	}
	now.Store(time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC).UnixNano())
	// Resumed where the first run stored its position: the rows from
	// mid − 90 s on, none before.
	if rows, want := follow(time.Date(2026, 3, 1, 10, 28, 0, 0, time.UTC)), countAllFrom(tds, mid.Add(-90*time.Second)); rows != float64(want) {
		t.Errorf("the second run read %v rows, want the %d from the first run's position on", rows, want)
	}

	got, err := query.Document(ctx, st, store.Query{}, analysis.Config{Window: st.Window()})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := storetest.DocJSON(t, got), storetest.DocJSON(t, want); g != w {
		t.Fatalf("the followed table's report differs from analyze:\n got %s\nwant %s", g, w)
	}
}

// countAllFrom counts the spans of tds that start at or after t.
func countAllFrom(tds []ptrace.Traces, t time.Time) int {
	n := 0
	for _, td := range tds {
		n += countFrom(td, t)
	}
	return n
}

// countFrom counts td's spans that start at or after t.
func countFrom(td ptrace.Traces, t time.Time) int {
	n := 0
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if !s.StartTimestamp().AsTime().Before(t) {
					n++
				}
			}
		}
	}
	return n
}

// memPositions is a store.SourcePositions in memory.
type memPositions struct {
	v  atomic.Int64
	ok atomic.Bool
}

func (m *memPositions) SourcePosition(context.Context) (int64, bool, error) {
	return m.v.Load(), m.ok.Load(), nil
}
func (m *memPositions) SetSourcePosition(_ context.Context, v int64) error {
	m.v.Store(v)
	m.ok.Store(true)
	return nil
}

// Rows inserted after the position passed them (later than the lag) are
// not read, and are counted: each range read is counted again once
// another lag has passed. Rows read in time are not counted as late.
func TestLateRowsCounted(t *testing.T) {
	tds := exports(t) // 9:50 to 10:00
	conn, db, dsn := server(t)
	ctx := context.Background()
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC)
	var late []ptrace.Traces
	lateRows := 0
	for _, td := range tds {
		// The spans of traces whose id ends in 0..3 before the cut come late.
		a, b := split(td, func(s ptrace.Span) bool { return s.TraceID()[15]%4 > 0 || !s.StartTimestamp().AsTime().Before(cut) })
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, a); err != nil {
			t.Fatal(err)
		}
		late, lateRows = append(late, b), lateRows+b.SpanCount()
	}
	if lateRows == 0 {
		t.Fatal("nothing comes late")
	}
	src, err := chsource.Open(ctx, dsn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var now atomic.Int64
	now.Store(time.Date(2026, 3, 1, 10, 10, 0, 0, time.UTC).UnixNano()) // reads everything up to 10:08
	reg := prometheus.NewRegistry()
	var spans atomic.Int64
	pos := &memPositions{}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- src.Follow(fctx, chsource.FollowConfig{Lag: 2 * time.Minute, Poll: 10 * time.Millisecond, Registerer: reg,
			Start: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), Now: func() time.Time { return time.Unix(0, now.Load()) }},
			pos, func(_ context.Context, s []graph.Span) error { spans.Add(int64(len(s))); return nil })
	}()
	counter := func(name string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: late %v, spans %d, position %s", what, counter("stormradius_source_late_rows_total"), spans.Load(),
					time.Unix(0, pos.v.Load()).UTC())
			}
		}
	}
	waitFor("the first read", func() bool { return pos.v.Load() >= time.Date(2026, 3, 1, 10, 8, 0, 0, time.UTC).UnixNano() })
	for _, td := range late {
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, td); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter("stormradius_source_late_rows_total"); got != 0 {
		t.Fatalf("%v rows counted late before they came", got)
	}
	now.Store(time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC).UnixNano()) // every step read is two lags old
	waitFor("the late rows counted", func() bool { return counter("stormradius_source_late_rows_total") == float64(lateRows) })
	total := 0
	for _, td := range tds {
		total += td.SpanCount()
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := spans.Load(); got != int64(total-lateRows) {
		t.Errorf("%d spans read, want the %d that came in time", got, total-lateRows)
	}
}
