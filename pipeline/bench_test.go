package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// BenchmarkPipelineAnalyse measures the analyser from flushed traces to
// stored batches (analyser.step: each batch computed while the one before
// is applied by the embedded SQLite store) on a simulated corpus over ten
// 10-minute windows, in batches of 500 traces: early batches flip edge
// classes, so later ones re-evaluate stored records; every tenth trace
// then gets its last span late, and re-opens. spans/s counts the corpus's
// spans over the whole run; compute-spans/s over the time spent computing
// batches alone (job.computed), which is the analyser's own cost. B/op
// and allocs/op include the store's.
func BenchmarkPipelineAnalyse(b *testing.B) {
	const window = 10 * time.Minute
	c := storetest.NewCorpus(b, 6000, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	var early, late []graph.Span
	spans := 0
	for i, s := range c.Spans {
		spans += len(s)
		if i%10 == 0 && len(s) > 1 {
			early, late = append(early, s[:len(s)-1]...), append(late, s[len(s)-1])
		} else {
			early = append(early, s...)
		}
	}
	ctx := context.Background()
	var elapsed, computed time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, err := sqlite.Open(ctx, sqlite.Options{Dir: b.TempDir(), Window: window, Synchronous: "normal"})
		if err != nil {
			b.Fatal(err)
		}
		p := New(st, Config{Analysis: analysis.Config{Window: window}, Retention: -1})
		var groups [][]*pendingTrace
		for _, sp := range [][]graph.Span{early, late} {
			seq, err := st.WriteSpans(ctx, sp)
			if err != nil {
				b.Fatal(err)
			}
			var ps pendingSet
			ps.init()
			ps.add(sp, seq, time.Now())
			groups = append(groups, ps.all(nil))
		}
		a := p.an
		b.StartTimer()
		t0 := time.Now()
		for _, g := range groups {
			for lo := 0; lo < len(g); lo += 500 {
				if err := a.step(ctx, g[lo:min(lo+500, len(g))], 0); err != nil {
					b.Fatal(err)
				}
				computed += a.prev.computed
			}
		}
		if err := a.finish(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(t0)
		b.StopTimer()
		// The paths the benchmark is meant to cover are taken.
		if a.fromFlight == 0 || testutil.ToFloat64(p.m.reopened) == 0 || testutil.ToFloat64(p.m.reevaluated) == 0 {
			b.Fatalf("read from the batch in flight %d, re-opened %v, re-evaluated %v: a path is not exercised",
				a.fromFlight, testutil.ToFloat64(p.m.reopened), testutil.ToFloat64(p.m.reevaluated))
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(spans) * float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "spans/s")
	b.ReportMetric(n/computed.Seconds(), "compute-spans/s")
}
