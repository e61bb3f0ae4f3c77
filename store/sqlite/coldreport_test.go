package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// BenchmarkReportWeekCold is BenchmarkReportWeek's document as a fresh
// `stormradius report` reads it: each of b.N rounds opens the store anew
// (empty summary cache, new connections) and times its first document
// (cold-ms) and a second one (warm-ms: summaries decoded already). The
// figures are the medians. Run it with -benchtime 1x (or Nx): the week
// takes minutes to fill, and the testing package runs a benchmark once
// with b.N = 1 before the run it reports. With STORMRADIUS_WEEK_DIR set,
// the filled store is kept there and reused by later runs (it is filled
// by the code under test: remove it after changing how stores write).
func BenchmarkReportWeekCold(b *testing.B) {
	end := time.Date(2026, 3, 8, 12, 30, 0, 0, time.UTC)
	q := store.Query{From: end.Add(-7 * 24 * time.Hour).Truncate(time.Hour).UnixNano(), To: end.UnixNano()}
	dir := os.Getenv("STORMRADIUS_WEEK_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	filled := filepath.Join(dir, "week-filled")
	ctx := context.Background()
	if _, err := os.Stat(filled); err != nil {
		s, err := sqlite.Open(ctx, sqlite.Options{Dir: dir, Synchronous: "normal"})
		if err != nil {
			b.Fatal(err)
		}
		if got := storetest.FillWeek(b, s, 100, end); got != q {
			b.Fatalf("week query %+v, want %+v", got, q)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filled, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	minutes := (q.To - q.From) / int64(time.Minute)
	doc := func(s *sqlite.Store) time.Duration {
		t0 := time.Now()
		d, err := query.Document(ctx, s, q, analysis.Config{Window: s.Window()})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(t0)
		if len(d.APIs) != 100 || d.APIs[0].Traces != minutes {
			b.Fatalf("%d APIs, want 100 of %d traces", len(d.APIs), minutes)
		}
		return el
	}
	var cold, warm []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		s, err := sqlite.Open(ctx, sqlite.Options{Dir: dir, Existing: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cold = append(cold, doc(s))
		warm = append(warm, doc(s))
		b.StopTimer()
		s.Close()
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(median(cold), "cold-ms")
	b.ReportMetric(median(warm), "warm-ms")
}
