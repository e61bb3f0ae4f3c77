package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// A store written before the ten-minute tier gets it filled from its
// minutes: every report reads the same after the migration as the minute
// tier alone says.
func TestTenMinuteTierBackfill(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	c := storetest.NewCorpus(t, 400, start, 17*time.Second) // 9:00–10:53
	var batch []store.Change
	for i := range c.Traces {
		batch = append(batch, store.Change{New: c.Record(i, 1)})
	}
	if err := s.Apply(ctx, store.Batch{Changes: batch}); err != nil {
		t.Fatal(err)
	}
	queries := []store.Query{
		{From: start.Add(7 * time.Minute).UnixNano(), To: start.Add(93 * time.Minute).UnixNano()},
		{From: start.Add(25 * time.Minute).UnixNano(), To: start.Add(38 * time.Minute).UnixNano()},
		{},
	}
	before := reports(t, s, queries)
	s.Close()

	// Back to the schema before the tier: its rows gone, the version 5.
	db, err := sql.Open("sqlite", filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"rollup_totals", "rollup_api", "rollup_radius", "rollup_amp", "rollup_owner", "rollup_service",
		"rollup_node", "rollup_owner_radius", "rollup_owner_amp", "rollup_version", "rollup_version_radius", "rollup_version_amp"} {
		if _, err := db.Exec(`DELETE FROM ` + table + ` WHERE tier = 3`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 5`); err != nil {
		t.Fatal(err)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM rollup_api WHERE tier = 3`).Scan(&n)
	db.Close()
	if n != 0 {
		t.Fatal("tier 3 rows left")
	}
	s, err = Open(ctx, Options{Dir: dir, Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after := reports(t, s, queries)
	for i := range queries {
		if after[i] != before[i] {
			t.Errorf("query %d after the backfill:\n got %s\nwant %s", i, after[i], before[i])
		}
	}
}

func reports(t *testing.T, s *Store, qs []store.Query) []string {
	var out []string
	for _, q := range qs {
		rep, err := s.Report(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rep.Document(nil, analysisConfig()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func analysisConfig() analysis.Config { return analysis.Config{Window: time.Hour} }
