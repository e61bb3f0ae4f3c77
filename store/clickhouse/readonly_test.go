package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// inserts returns, per table of s's database, the highest block number of
// its parts: every insert raises it, merges do not.
func inserts(t *testing.T, s *Store) string {
	t.Helper()
	var out []string
	err := s.query(context.Background(), "list blocks", `SELECT table, max(max_block_number) FROM system.parts
		WHERE database = `+quote(s.db)+` GROUP BY table ORDER BY table`, func(r driver.Rows) error {
		var table string
		var n int64
		if err := r.Scan(&table, &n); err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s:%d", table, n))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

func openRO(dsn string) (*Store, error) {
	return Open(context.Background(), Options{DSN: dsn, ReadOnly: true, Logger: quiet})
}

// A read-only store needs a migrated database: a missing one is not
// created, a partly migrated one not migrated; both refused, saying what
// to run.
func TestReadOnlyNeedsMigratedSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := server(t)
	dsn := freshDatabase(t, u)
	_, err := openRO(dsn)
	if !errors.Is(err, store.ErrNotMigrated) || !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "stormradius migrate") {
		t.Fatalf("missing database: %v, want ErrNotMigrated naming stormradius migrate", err)
	}
	name := strings.TrimPrefix(mustURL(t, dsn).Path, "/")
	o, err := ch.ParseDSN(u.String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.databases WHERE name = `+quote(name)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s exists after a read-only open (%d, %v)", name, n, err)
	}
	// A database whose migrations stop at the first.
	for _, q := range []string{"CREATE DATABASE " + name, strings.Replace(migrationsTable, "schema_migrations", name+".schema_migrations", 1)} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	boot := &Store{conn: conn, db: name}
	if err := boot.insert(ctx, "record migration", name+".schema_migrations", []string{"version", "name", "applied_at", "server", "skipped"},
		[]uint32{1}, []string{"spans"}, []time.Time{time.Now().Truncate(time.Second)}, []string{"18.16"}, []uint32{0}); err != nil {
		t.Fatal(err)
	}
	_, err = openRO(dsn)
	if !errors.Is(err, store.ErrNotMigrated) || !strings.Contains(err.Error(), "lacks migrations 2 (") {
		t.Fatalf("partly migrated database: %v, want ErrNotMigrated listing migration 2 on", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.tables WHERE database = `+quote(name)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d tables in %s after a read-only open (%v): it migrated", n, name, err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A read-only store reads a migrated database and refuses every write,
// its own methods with ErrReadOnly and the server any statement that
// gets past them; nothing is inserted.
func TestReadOnlyRefusesWrites(t *testing.T) {
	ctx := context.Background()
	dsn := freshDatabase(t, server(t))
	c := storetest.NewCorpus(t, 30, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), 10*time.Second)
	w := open(t, dsn, time.Hour)
	defer w.Close()
	storetest.Fill(t, w, c, 20)
	w.flushSpanChanges(ctx) // the writer's rows sent behind its span writes
	before := inserts(t, w)

	s, err := openRO(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.ReadOnly(t, s, c, 20)
	// Past the store's own refusal, the server refuses (READONLY, 164).
	probe, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	probes := map[string]error{
		"insert":   s.insert(probe, "probe", "meta", []string{"key", "value", "version"}, []string{"ro_probe"}, []int64{1}, []uint64{1}),
		"optimize": s.exec(probe, "probe", `OPTIMIZE TABLE node_minutes FINAL`),
		"create":   s.exec(probe, "probe", `CREATE TABLE ro_probe (x UInt8) ENGINE = Memory`),
	}
	for what, err := range probes {
		var ex *ch.Exception
		if !errors.As(err, &ex) || ex.Code != 164 {
			t.Errorf("%s on a read-only connection: %v, want the server's READONLY refusal", what, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := inserts(t, w); after != before {
		t.Fatalf("inserts under a read-only store:\nbefore %s\n after %s", before, after)
	}
	if wm, _ := w.Watermark(ctx); wm != 20 {
		t.Fatalf("watermark %d, want 20", wm)
	}
	if got, _ := w.Records(ctx, []graph.TraceID{c.Traces[25].ID}); len(got) != 0 {
		t.Fatal("the refused Apply stored a record")
	}
}
