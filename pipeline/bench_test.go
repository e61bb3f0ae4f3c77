package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// BenchmarkPipelineAnalyse measures the analyser from flushed traces to
// stored batches on a simulated corpus over ten 10-minute windows, in
// batches of 500 traces, over the embedded SQLite store: early batches
// flip edge classes, so later ones re-evaluate stored records; every
// tenth trace then gets its last span late, and re-opens. Metrics count
// the corpus's spans.
//
//   - pipelined: analyser.step as the service runs it, each batch
//     computed while the one before is applied. spans/s over the whole
//     run; B/op and allocs/op include the store's writes.
//   - compute: analyser.compute alone, each batch applied (synchronously)
//     before the next is computed, which still reads the records of the
//     one before from it as from a batch in flight. compute-spans/s,
//     compute-B/op and compute-allocs/op count compute alone (its store
//     reads included), which no other goroutine runs alongside.
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
	// setup opens a store holding the corpus's spans and returns an
	// analyser over it and the batches to analyse.
	setup := func(b *testing.B) (*analyser, *sqlite.Store, [][]*pendingTrace) {
		st, err := sqlite.Open(ctx, sqlite.Options{Dir: b.TempDir(), Window: window, Synchronous: "normal"})
		if err != nil {
			b.Fatal(err)
		}
		p := New(st, Config{Analysis: analysis.Config{Window: window}, Retention: -1})
		var parts [][]*pendingTrace
		for _, sp := range [][]graph.Span{early, late} {
			seq, err := st.WriteSpans(ctx, sp)
			if err != nil {
				b.Fatal(err)
			}
			var ps pendingSet
			ps.init()
			ps.add(sp, seq, time.Now())
			// In the order they started, as a stream flushes them (and
			// the same batches every run: all's order is the map's).
			g := ps.all(nil)
			slices.SortFunc(g, func(x, y *pendingTrace) int {
				return cmp.Or(cmp.Compare(minStart(x.spans), minStart(y.spans)), bytes.Compare(x.id[:], y.id[:]))
			})
			for lo := 0; lo < len(g); lo += 500 {
				parts = append(parts, g[lo:min(lo+500, len(g))])
			}
		}
		return p.an, st, parts
	}
	// check checks that the paths the benchmark is meant to cover were
	// taken, and closes the store.
	check := func(b *testing.B, a *analyser, st *sqlite.Store) {
		m := a.p.m
		if a.fromFlight == 0 || testutil.ToFloat64(m.reopened) == 0 || testutil.ToFloat64(m.reevaluated) == 0 {
			b.Fatalf("read from the batch in flight %d, re-opened %v, re-evaluated %v: a path is not exercised",
				a.fromFlight, testutil.ToFloat64(m.reopened), testutil.ToFloat64(m.reevaluated))
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("pipelined", func(b *testing.B) {
		var elapsed time.Duration
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			a, st, parts := setup(b)
			b.StartTimer()
			t0 := time.Now()
			for _, part := range parts {
				if err := a.step(ctx, part, 0); err != nil {
					b.Fatal(err)
				}
			}
			if err := a.finish(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(t0)
			b.StopTimer()
			check(b, a, st)
			b.StartTimer()
		}
		b.ReportMetric(float64(spans)*float64(b.N)/elapsed.Seconds(), "spans/s")
	})

	b.Run("compute", func(b *testing.B) {
		var elapsed time.Duration
		var allocated, allocs uint64
		var m0, m1 runtime.MemStats
		for i := 0; i < b.N; i++ {
			a, st, parts := setup(b)
			for _, part := range parts {
				runtime.ReadMemStats(&m0)
				t0 := time.Now()
				j, err := a.compute(ctx, part, 0)
				elapsed += time.Since(t0)
				runtime.ReadMemStats(&m1)
				if err != nil {
					b.Fatal(err)
				}
				allocated += m1.TotalAlloc - m0.TotalAlloc
				allocs += m1.Mallocs - m0.Mallocs
				if err := a.finish(ctx); err != nil {
					b.Fatal(err)
				}
				j.err, j.ended = st.Apply(ctx, j.batch), true
				a.prev = j
			}
			if err := a.finish(ctx); err != nil {
				b.Fatal(err)
			}
			check(b, a, st)
		}
		n := float64(b.N)
		b.ReportMetric(float64(spans)*n/elapsed.Seconds(), "compute-spans/s")
		b.ReportMetric(float64(allocated)/n, "compute-B/op")
		b.ReportMetric(float64(allocs)/n, "compute-allocs/op")
	})
}
