package sqlite_test

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// BenchmarkWriteSpans measures span writes (the pipeline's group
// commits), each of new traces, with synchronous=normal: the cost of the
// store's own work rather than of the disk's fsync.
func BenchmarkWriteSpans(b *testing.B) {
	c := storetest.NewCorpus(b, 2000, time.Now().Add(-time.Hour), 10*time.Millisecond)
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: b.TempDir(), Synchronous: "normal"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var spans []graph.Span
			for _, sp := range c.Spans {
				spans = append(spans, sp...)
				if len(spans) >= n {
					break
				}
			}
			spans = spans[:n]
			var enc graph.TraceEncoder
			b.SetBytes(int64(len(enc.AppendSpans(nil, spans))))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range spans {
					binary.BigEndian.PutUint64(spans[j].TraceID[8:], uint64(i)) // new traces each write
				}
				if _, err := s.WriteSpans(ctx, spans); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(spans))/b.Elapsed().Seconds(), "spans/s")
		})
	}
}

// BenchmarkApply measures batches of new records with their rollup
// deltas, the state of their window and the checkpoint: what the
// analyser stores per batch.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{500, 2000} {
		c := storetest.NewCorpus(b, n, time.Now().Add(-2*time.Hour), time.Minute/time.Duration(n))
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: b.TempDir(), Window: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			states := map[int64]*analysis.State{}
			for _, w := range c.Windows.Indexes() {
				states[w] = c.Windows.State(w)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				changes := make([]store.Change, n)
				for j := range changes {
					r := c.Record(j, uint64(i+1))
					binary.BigEndian.PutUint64(r.TraceID[8:], uint64(i))
					changes[j] = store.Change{New: r}
				}
				if err := s.Apply(ctx, store.Batch{Changes: changes, States: states, Watermark: uint64(i + 1)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
