package pipeline

import (
	"runtime"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store/storetest"
)

// BenchmarkPendingMemory measures what a span costs while it waits for its
// trace to be analysed (target ≤ 300 bytes): spans of a simulated corpus
// arrive in small exports, as the pending buffer receives them.
func BenchmarkPendingMemory(b *testing.B) {
	c := storetest.NewCorpus(b, 3000, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	// Names as a decoder hands them: shared (interned) strings.
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var p pendingSet
		p.init()
		now := time.Now()
		for rep := 0; rep < 20; rep++ { // 20 copies of the corpus under other trace ids
			for lo := 0; lo < len(all); lo += 7 {
				part := all[lo:min(lo+7, len(all))]
				cp := make([]graph.Span, len(part))
				copy(cp, part)
				for k := range cp {
					cp[k].TraceID[0] = byte(rep)
				}
				p.add(cp, 1, now)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(p.spans), "B/span")
		b.ReportMetric(float64(p.spans), "spans")
		runtime.KeepAlive(&p)
	}
}

// benchPending is the buffer the expiry benchmarks start from: n traces of
// 3 spans each, the i-th arriving at t0 + i·gap as write i+1, so that
// their idle deadlines are spread evenly over the idle time.
func benchPending(n int, gap time.Duration) (*pendingSet, time.Time) {
	var p pendingSet
	p.init()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	spans := make([]graph.Span, 3)
	for i := 0; i < n; i++ {
		p.add(benchSpans(spans, i), uint64(i+1), t0.Add(time.Duration(i)*gap))
	}
	return &p, t0
}

// benchSpans fills spans with spans of the i-th trace of benchPending.
func benchSpans(spans []graph.Span, i int) []graph.Span {
	for k := range spans {
		spans[k] = graph.Span{}
		spans[k].TraceID[0], spans[k].TraceID[1], spans[k].TraceID[2], spans[k].TraceID[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		spans[k].SpanID[0] = byte(k + 1)
	}
	return spans
}

// BenchmarkPendingExpire is one tick of a busy buffer in its steady state:
// 100,000 traces pending, 10 new ones arrive and 10 fall idle per tick
// (idle 5 s, so 10 traces per 500 µs).
func BenchmarkPendingExpire(b *testing.B) {
	const n, perTick = 100_000, 10
	idle := 5 * time.Second
	gap := idle / n
	p, t0 := benchPending(n, gap)
	var out []*pendingTrace
	var reasons []string
	spans := make([]graph.Span, 3)
	expired := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < perTick; k++ {
			j := n + i*perTick + k
			p.add(benchSpans(spans, j), uint64(j+1), t0.Add(time.Duration(j)*gap))
		}
		// The newest trace has just arrived; those n traces older are idle.
		now := t0.Add(time.Duration(n+(i+1)*perTick-1) * gap)
		out, reasons = p.take(now, idle, time.Hour, 1<<30, out[:0], reasons[:0])
		expired += len(out)
	}
	b.ReportMetric(float64(expired)/float64(b.N), "expired/op")
	b.ReportMetric(float64(p.traces()), "pending")
}

// BenchmarkPendingWatermark is the watermark query each analysis batch
// makes, with 100,000 traces pending.
func BenchmarkPendingWatermark(b *testing.B) {
	p, _ := benchPending(100_000, 50*time.Microsecond)
	var w uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w += p.watermark()
	}
	if w != 0 { // the first trace (write 1) is pending: the watermark is 0
		b.Fatalf("watermark %d, want 0", w)
	}
}

// BenchmarkPendingAdd is the cost of queuing a write of 10 spans of traces
// already pending (each moves to the end of the idle order), with 100,000
// traces pending.
func BenchmarkPendingAdd(b *testing.B) {
	const n = 100_000
	p, t0 := benchPending(n, 50*time.Microsecond)
	spans := make([]graph.Span, 10)
	one := make([]graph.Span, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range spans {
			j := (i*7919 + k*104729) % n // spread over the buffer
			spans[k] = benchSpans(one, j)[0]
		}
		p.add(spans, uint64(n+i+1), t0.Add(5*time.Second+time.Duration(i)*time.Microsecond))
		if p.spans > 8*n { // keep the span slices from growing without bound
			b.StopTimer()
			p, t0 = benchPending(n, 50*time.Microsecond)
			b.StartTimer()
		}
	}
}
