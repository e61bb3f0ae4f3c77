package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, fresh bool) store.Store {
		// One directory per subtest: t.TempDir's parent is the subtest's.
		dir := filepath.Join(filepath.Dir(t.TempDir()), "data")
		if fresh {
			os.RemoveAll(dir)
		}
		s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Optional{IncidentReader: true, SeriesReader: true, Partitioned: true}) // no Compactor: nothing to settle
}

func TestLeaseConformance(t *testing.T) {
	storetest.Lease(t, func(t *testing.T, clock func() time.Time) store.Store {
		dir := filepath.Join(filepath.Dir(t.TempDir()), "data")
		s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir, Window: time.Hour, LeaseClock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A directory remembers its window: reopening with another is refused,
// with none adopts it.
func TestWindowRecorded(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Options{Dir: dir, Window: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := sqlite.Open(ctx, sqlite.Options{Dir: dir, Window: time.Hour}); err == nil {
		t.Fatal("reopened with another window")
	}
	s, err = sqlite.Open(ctx, sqlite.Options{Dir: dir})
	if err != nil || s.Window() != 10*time.Minute {
		t.Fatalf("window %v, %v; want 10m", s.Window(), err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, sqlite.Options{Dir: t.TempDir()})
	if err != nil || s.Window() != time.Hour {
		t.Fatalf("new directory: window %v, %v; want 1h", s.Window(), err)
	}
	s.Close()
}

// The dry run lists what a new directory needs, nothing for a current one.
func TestMigrationsDryRun(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	spans, _ := schema.Load("sqlite/spans")
	results, _ := schema.Load("sqlite/results")
	ms, err := sqlite.Migrations(ctx, dir)
	if err != nil || len(ms) != len(spans)+len(results) || len(spans) == 0 || len(results) == 0 {
		t.Fatalf("new directory: %d migrations %v, want %d", len(ms), err, len(spans)+len(results))
	}
	s, err := sqlite.Open(ctx, sqlite.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if ms, err := sqlite.Migrations(ctx, dir); err != nil || len(ms) != 0 {
		t.Fatalf("current directory: %d migrations %v", len(ms), err)
	}
}

// BenchmarkReportWeek: the docs/SPEC.md §5.2 document over 7 days of rollups for
// 100 APIs (target < 200 ms).
func BenchmarkReportWeek(b *testing.B) {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: b.TempDir(), Synchronous: "normal"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	q := storetest.FillWeek(b, s, 100, time.Date(2026, 3, 8, 12, 30, 0, 0, time.UTC))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := query.Document(context.Background(), s, q, analysis.Config{Window: s.Window()})
		if err != nil {
			b.Fatal(err)
		}
		if minutes := (q.To - q.From) / int64(time.Minute); len(d.APIs) != 100 || d.APIs[0].Traces != minutes {
			b.Fatalf("%d APIs, %d traces in the first", len(d.APIs), d.APIs[0].Traces)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/report")
}
