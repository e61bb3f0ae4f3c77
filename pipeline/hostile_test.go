package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := 0.0
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A trace of a million spans: a root
// calling 1,000 services, each calling redis 999 times (50,000 spans under
// the race detector, which slows the store tenfold). It is stored,
// assembled and analysed in bounded time, nothing crashes, and the report
// counts every span once.
func TestHugeTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("a million spans")
	}
	fan, leaves := 1000, 999
	if raceEnabled {
		fan, leaves = 50, 999
	}
	ms := int64(time.Millisecond)
	b := New(1)
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	root := b.Root("front", "GET /all", base, base+10_000*ms)
	for i := 0; i < fan; i++ {
		s := b.Call(root, "front", "svc", "GET /x", base+int64(i)*ms, base+int64(i+1)*ms, nil)
		for j := 0; j < leaves; j++ {
			b.Span(s, graph.KindClient, "svc", "GET", base+int64(i)*ms+int64(j), base+int64(i)*ms+int64(j)+1, Peer("redis"))
		}
	}
	want := len(b.Spans)
	c := cfg()
	c.MaxInflightSpans = 2 * want
	st := openStore(t, t.TempDir())
	defer st.Close()
	p, stop := start(t, st, c)
	defer stop()
	ctx := context.Background()
	start := time.Now()
	for lo := 0; lo < len(b.Spans); lo += 10_000 {
		if err := p.Consume(ctx, b.Spans[lo:min(lo+10_000, len(b.Spans))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := query.Document(ctx, st, store.Query{}, c.Analysis)
	if err != nil {
		t.Fatal(err)
	}
	if d.Spans != int64(want) || d.Traces != 1 || len(d.APIs) != 1 || d.APIs[0].Requests != int64(1+fan+fan*leaves) {
		t.Fatalf("spans %d traces %d apis %+v, want %d spans", d.Spans, d.Traces, d.APIs, want)
	}
	t.Logf("%d spans stored and analysed in %v", want, time.Since(start))
}

// Hostile shapes are analysed and counted, never a crash: span ids that
// collide within a trace, a trace id reused hours later, clocks far off.
func TestHostileShapes(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := cfg()
	c.Registerer = reg
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c.Now = func() time.Time { return now }
	st := openStore(t, t.TempDir())
	defer st.Close()
	p, stop := start(t, st, c)
	defer stop()
	ctx := context.Background()
	ms := int64(time.Millisecond)
	at := now.UnixNano()

	// Two different spans with one span id in one trace: one is kept.
	b := New(1)
	root := b.Root("a", "GET /", at, at+10*ms)
	b.Call(root, "a", "b", "op", at+1*ms, at+2*ms, nil)
	dup := b.Spans[1]
	dup.Name, dup.Start = "other", at+3*ms
	b.Spans = append(b.Spans, dup)
	if err := p.Consume(ctx, b.Spans); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, reg, "stormradius_spans_duplicate_total"); got != 1 {
		t.Errorf("duplicates %v, want 1", got)
	}

	// The same trace id three hours later: merged into the trace,
	// counted as a reuse.
	later := New(1)
	later.Span(graph.SpanID{}, graph.KindServer, "c", "GET /late", at+3*int64(time.Hour), at+3*int64(time.Hour)+ms, ID(SpanID(500)))
	if err := p.Consume(ctx, later.Spans); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, reg, "stormradius_trace_id_reused_total"); got != 1 {
		t.Errorf("trace id reuse %v, want 1", got)
	}

	// Clocks off by decades: analysed in the windows of their timestamps,
	// counted.
	for i, when := range []time.Time{time.Unix(1, 0), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)} {
		sk := New(byte(10 + i))
		sk.Root("d", "GET /skew", when.UnixNano(), when.UnixNano()+ms)
		if err := p.Consume(ctx, sk.Spans); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, reg, "stormradius_spans_clock_skew_total"); got != 3 { // the late span too
		t.Errorf("skewed spans %v, want 3", got)
	}
	d, err := query.Document(ctx, st, store.Query{}, c.Analysis)
	if err != nil {
		t.Fatal(err)
	}
	// Traces: the merged one and the two skewed ones; spans 3 + 1 + 2.
	if d.Traces != 3 || d.Spans != 6 {
		t.Fatalf("traces %d spans %d, want 3 and 6", d.Traces, d.Spans)
	}
	// Everything is analysed: nothing is pending (the gauges followed the
	// flushes, not only the writes).
	for _, g := range []string{"stormradius_traces_pending", "stormradius_spans_pending"} {
		if got := metric(t, reg, g); got != 0 {
			t.Errorf("%s = %v after every trace was analysed", g, got)
		}
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Fatalf("metrics do not gather: %d %v", n, err)
	}
}
