package clickhouse

import (
	"context"
	"encoding/binary"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// BenchmarkWriteSpans measures durable span writes (the pipeline's group
// commits), each of new traces, against the server in
// STORMRADIUS_CLICKHOUSE.
func BenchmarkWriteSpans(b *testing.B) {
	u := server(b)
	c := storetest.NewCorpus(b, 2000, time.Now().Add(-time.Hour), 10*time.Millisecond)
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchWriteSpans(b, u, c, n) })
	}
}

func benchWriteSpans(b *testing.B, u *url.URL, c *storetest.Corpus, n int) {
	s := open(b, freshDatabase(b, u), time.Hour)
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
	size := len(enc.AppendSpans(nil, spans))
	ctx := context.Background()
	b.SetBytes(int64(size))
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
}

// BenchmarkApply measures batches of new records (with the rollup
// recomputation of the minutes they touch: a batch spans about a minute)
// against the server in STORMRADIUS_CLICKHOUSE.
func BenchmarkApply(b *testing.B) {
	u := server(b)
	for _, n := range []int{500, 2000} {
		c := storetest.NewCorpus(b, n, time.Now().Add(-2*time.Hour), time.Minute/time.Duration(n))
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchApply(b, u, c, n) })
	}
}

func benchApply(b *testing.B, u *url.URL, c *storetest.Corpus, n int) {
	s := open(b, freshDatabase(b, u), time.Hour)
	defer s.Close()
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
		if err := s.Apply(ctx, store.Batch{Changes: changes, Watermark: uint64(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkReportWeek measures the document of a week of traffic for 100
// root APIs (one failed trace per API per minute, storetest.FillWeek: a
// million records) from the rollups: whole days from the day tier, the
// hours and minutes at either end from theirs; incidents from the days
// Compact settled and the last day's minutes as inserted.
func BenchmarkReportWeek(b *testing.B) {
	const apis = 100
	s := open(b, freshDatabase(b, server(b)), time.Hour)
	defer s.Close()
	t0 := time.Now()
	end := time.Date(2026, 3, 8, 12, 30, 0, 0, time.UTC)
	q := storetest.FillWeek(b, s, apis, end)
	b.Logf("a week for %d APIs stored in %v", apis, time.Since(t0).Round(time.Millisecond))
	// As a serving pipeline leaves the days before the last (Compact,
	// hourly with retention); the last day is read as inserts left it.
	t0 = time.Now()
	if err := s.Compact(context.Background(), end.UnixNano()); err != nil {
		b.Fatal(err)
	}
	b.Logf("compacted in %v", time.Since(t0).Round(time.Millisecond))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := query.Document(context.Background(), s, q, analysis.Config{Window: s.Window()})
		if err != nil {
			b.Fatal(err)
		}
		if minutes := (q.To - q.From) / int64(time.Minute); len(d.APIs) != apis || d.APIs[0].Traces != minutes {
			b.Fatalf("%d APIs, %d traces in the first", len(d.APIs), d.APIs[0].Traces)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/report")
}
