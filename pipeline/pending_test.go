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
