package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// dbHashes hashes the two database files of dir.
func dbHashes(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	for _, name := range []string{"spans.db", "results.db"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		out = append(out, string(h[:]))
	}
	return strings.Join(out, "")
}

// A read-only store opens what exists and is migrated, reads it (also
// while a writer writes), refuses every write without touching the files,
// and neither creates nor migrates anything.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	c := storetest.NewCorpus(t, 30, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), 10*time.Second)
	ro := func(dir string) (*Store, error) {
		return Open(ctx, Options{Dir: dir, ReadOnly: true})
	}

	// Nothing there: refused, nothing created.
	missing := filepath.Join(t.TempDir(), "data")
	if _, err := ro(missing); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing directory: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a read-only open created %s: %v", missing, err)
	}

	// Written by a writer, closed.
	dir := filepath.Join(t.TempDir(), "data")
	w, err := Open(ctx, Options{Dir: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Fill(t, w, c, 20)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	before := dbHashes(t, dir)
	s, err := ro(dir)
	if err != nil {
		t.Fatal(err)
	}
	storetest.ReadOnly(t, s, c, 20)
	// Past the store's own refusal, SQLite refuses too.
	for _, db := range []*sql.DB{s.resW, s.resR, s.spansW} {
		if _, err := db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('ro_probe', 1)`); err == nil {
			t.Error("a read-only connection inserted a row")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if dbHashes(t, dir) != before {
		t.Fatal("the database files changed under a read-only store")
	}

	// Read-only beside a writer: it reads what the writer commits.
	w, err = Open(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if wm, _ := w.Watermark(ctx); wm != 20 {
		t.Fatalf("watermark %d after the read-only store, want 20", wm)
	}
	if got, _ := w.Records(ctx, []graph.TraceID{c.Traces[25].ID}); len(got) != 0 {
		t.Fatal("the refused Apply stored a record")
	}
	s, err = ro(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	more := store.Batch{Changes: []store.Change{{New: c.Record(25, 30)}}, Watermark: 30}
	if err := w.Apply(ctx, more); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Report(ctx, store.Query{}); err != nil || rep.Traces-rep.TracesExcess != 21 {
		t.Fatalf("read-only store beside a writer: %v traces received, %v; want 21", rep.Traces-rep.TracesExcess, err)
	}
}

// A read-only store refuses a schema older than the release's, and leaves
// it as it is.
func TestReadOnlyNotMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := Open(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v < 2 {
		t.Fatalf("schema version %d %v", v, err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Options{Dir: dir, ReadOnly: true})
	if !errors.Is(err, store.ErrNotMigrated) || !strings.Contains(err.Error(), "stormradius migrate") {
		t.Fatalf("older schema: %v, want ErrNotMigrated naming stormradius migrate", err)
	}
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("schema version %d after a read-only open (%v), want 1: it migrated", v, err)
	}
}
