package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
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
	// A store of before the tier holds traffic received whole: sampled
	// traffic's figures (migration 10) came after it.
	c := storetest.NewUnsampledCorpus(t, 400, start, 17*time.Second) // 9:00–10:53
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

// A store written when records were keyed by trace id (WITHOUT ROWID)
// gets them moved to the rowid table, every record as it was, found by id
// and by window.
func TestRecordsMoveToRowidTable(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := storetest.NewCorpus(t, 50, time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC), time.Minute)
	var batch []store.Change
	ids := make([]graph.TraceID, len(c.Traces))
	for i, tr := range c.Traces {
		batch = append(batch, store.Change{New: c.Record(i, uint64(i+1))})
		ids[i] = tr.ID
	}
	if err := s.Apply(ctx, store.Batch{Changes: batch}); err != nil {
		t.Fatal(err)
	}
	records := func(s *Store) string {
		got, err := s.Records(ctx, ids)
		if err != nil || len(got) != len(ids) {
			t.Fatalf("%d records of %d: %v", len(got), len(ids), err)
		}
		var all []*store.Record
		for _, id := range ids {
			all = append(all, got[id])
		}
		for _, w := range []int64{c.Results[0].Window, c.Results[len(ids)-1].Window} {
			var in []*store.Record // in no particular order
			s.WindowRecords(ctx, w, nil, func(r *store.Record) error { in = append(in, r); return nil })
			slices.SortFunc(in, func(a, b *store.Record) int { return bytes.Compare(a.TraceID[:], b.TraceID[:]) })
			all = append(all, in...)
		}
		b, _ := json.Marshal(all)
		return string(b)
	}
	want := records(s)
	s.Close()

	// Back to the layout of migration 1 and 3, at version 6.
	db, err := sql.Open("sqlite", filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE old_records (trace_id BLOB PRIMARY KEY, start INTEGER NOT NULL, win INTEGER NOT NULL, api TEXT NOT NULL,
			seq INTEGER NOT NULL, edges BLOB NOT NULL, result BLOB NOT NULL, facts BLOB NOT NULL) WITHOUT ROWID`,
		`INSERT INTO old_records SELECT trace_id, start, win, api, seq, edges, result, facts FROM records`,
		`DROP TABLE records`,
		`ALTER TABLE old_records RENAME TO records`,
		`CREATE INDEX records_by_window ON records (win)`,
		`CREATE INDEX records_by_start ON records (start)`,
		`CREATE INDEX records_ids ON records (trace_id)`,
		`PRAGMA user_version = 6`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err = Open(ctx, Options{Dir: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := records(s); got != want {
		t.Fatalf("records after the move differ (%d bytes of JSON, want %d)", len(got), len(want))
	}
	var ddl, idx string
	s.resR.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'records'`).Scan(&ddl)
	s.resR.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'records_ids'`).Scan(&idx)
	if strings.Contains(ddl, "WITHOUT ROWID") || !strings.Contains(idx, "UNIQUE") {
		t.Fatalf("records still keyed by trace id:\n%s\n%s", ddl, idx)
	}
	// Replacing a record keeps one row per trace.
	if err := s.Apply(ctx, store.Batch{Changes: []store.Change{{Old: c.Record(0, 1), New: c.Record(0, 99)}}}); err != nil {
		t.Fatal(err)
	}
	var n int
	s.resR.QueryRow(`SELECT count(*) FROM records`).Scan(&n)
	if n != len(ids) {
		t.Fatalf("%d rows for %d traces after a replace", n, len(ids))
	}
}
