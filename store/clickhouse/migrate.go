package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
)

// Migrations live in schema/clickhouse. A statement after a line
// "-- requires: X.Y" runs only on servers of release X.Y or later: the
// extras current releases get (docs/SPEC.md §6). A line "-- shard by:
// EXPR" before a CREATE TABLE gives its sharding key on a cluster
// (cluster.go). Applied migrations are recorded in schema_migrations with
// the server release that applied them.

const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    UInt32,
    name       String,
    applied_at DateTime,
    server     String,
    skipped    UInt32
) ENGINE = MergeTree ORDER BY version`

// statement is one statement of a migration, with the release it needs
// and, for a table, its sharding key on a cluster.
type statement struct {
	sql      string
	requires serverVersion // zero: any
	shardBy  string        // empty: the default (cluster.go)
}

// statements splits a migration at semicolons that end a line, noting
// the "-- requires: X.Y" and "-- shard by: EXPR" lines before a
// statement.
func statements(m schema.Migration) ([]statement, error) {
	var out []statement
	var cur strings.Builder
	var next statement
	for _, line := range strings.Split(m.SQL, "\n") {
		t := strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(t, "-- requires:"); ok {
			r, err := parseVersion(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("clickhouse: migration %d (%s): %q: %w", m.Version, m.Name, t, err)
			}
			next.requires = r
			continue
		}
		if v, ok := strings.CutPrefix(t, "-- shard by:"); ok {
			if next.shardBy = strings.TrimSpace(v); next.shardBy == "" {
				return nil, fmt.Errorf("clickhouse: migration %d (%s): %q: want an expression", m.Version, m.Name, t)
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			next.sql = strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			out = append(out, next)
			cur.Reset()
			next = statement{}
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		next.sql = s
		out = append(out, next)
	}
	return out, nil
}

// forServer returns the statements of m that run on release v, and how
// many it skips; on a cluster (c not nil), rewritten for it.
func forServer(m schema.Migration, v serverVersion, c *clusterSchema) (run []string, skipped int, err error) {
	sts, err := statements(m)
	if err != nil {
		return nil, 0, err
	}
	for _, st := range sts {
		switch {
		case !v.atLeast(st.requires):
			skipped++
		case c == nil:
			run = append(run, st.sql)
		default:
			qs, err := c.rewrite(st)
			if err != nil {
				return nil, 0, fmt.Errorf("clickhouse: migration %d (%s) on cluster %s: %w", m.Version, m.Name, c.cluster, err)
			}
			run = append(run, qs...)
		}
	}
	return run, skipped, nil
}

// clusterSchema returns the rewriter of the migrations for the store's
// cluster (nil on one server).
func (s *Store) clusterSchema() *clusterSchema {
	if s.cluster == "" {
		return nil
	}
	return newClusterSchema(s.db, s.cluster)
}

// createMigrationsTable creates schema_migrations (on a cluster, like
// every table: a migrator's records are seen by all).
func (s *Store) createMigrationsTable(ctx context.Context, c *clusterSchema) error {
	qs := []string{migrationsTable}
	if c != nil {
		var err error
		if qs, err = c.rewrite(statement{sql: migrationsTable}); err != nil {
			return fmt.Errorf("clickhouse: schema_migrations on cluster %s: %w", c.cluster, err)
		}
	}
	for _, q := range qs {
		if err := s.exec(ctx, "create migrations table", q); err != nil {
			return err
		}
	}
	return nil
}

// migrate applies the migrations the database has not seen. Statements
// are idempotent, so two processes migrating at once, or a migration cut
// short, do no harm.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := schema.Load("clickhouse")
	if err != nil {
		return err
	}
	c := s.clusterSchema()
	// Only where Open found none: on a cluster, DDL costs a round of
	// every server.
	if !s.hasSchema {
		if err := s.createMigrationsTable(ctx, c); err != nil {
			return err
		}
	}
	have, err := s.appliedMigrations(ctx, "schema_migrations")
	if err != nil {
		return err
	}
	for _, m := range ms {
		// Applied or not, a migration's statements are rewritten: the
		// cluster rewrite learns the tables from them.
		run, skipped, err := forServer(m, s.server, c)
		if err != nil {
			return err
		}
		if have[m.Version] {
			continue
		}
		for _, q := range run {
			if err := s.exec(ctx, fmt.Sprintf("migration %d (%s)", m.Version, m.Name), q); err != nil && !dropped(q, err) && !added(q, err) {
				return err
			}
		}
		if err := s.insert(ctx, "record migration", "schema_migrations",
			[]string{"version", "name", "applied_at", "server", "skipped"},
			[]uint32{uint32(m.Version)}, []string{m.Name}, []time.Time{time.Now().Truncate(time.Second)},
			[]string{s.server.String()}, []uint32{uint32(skipped)}); err != nil {
			return err
		}
		s.migrated = true
		s.log.Info("clickhouse: migration applied", "database", s.db, "version", m.Version, "name", m.Name,
			"server", s.server.String(), "skipped_statements", skipped)
	}
	return nil
}

// checkMigrated returns store.ErrNotMigrated, saying what to run, unless
// every migration of this release was applied: a read-only store
// migrates nothing, and reading an older schema would fail query by query.
func (s *Store) checkMigrated(ctx context.Context) error {
	ms, err := schema.Load("clickhouse")
	if err != nil {
		return err
	}
	have, err := s.appliedMigrations(ctx, "schema_migrations")
	if err != nil {
		return err
	}
	var missing []string
	for _, m := range ms {
		if !have[m.Version] {
			missing = append(missing, fmt.Sprintf("%d (%s)", m.Version, m.Name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("clickhouse: database %s lacks migrations %s: %w; a read-only store migrates nothing: "+
			"run `stormradius migrate --store clickhouse://…/%s` or start cmd/ingest, which migrates",
			s.db, strings.Join(missing, ", "), store.ErrNotMigrated, s.db)
	}
	return nil
}

// dropped reports whether err is statement q failing because the columns
// it drops are gone already: a migration that was cut short after it and
// runs again.
func dropped(q string, err error) bool {
	var ex *ch.Exception
	return strings.Contains(q, "DROP COLUMN") && errors.As(err, &ex) &&
		(ex.Code == 44 || ex.Code == 10 || ex.Code == 16) // ILLEGAL_COLUMN (18.16), NOT_FOUND_COLUMN_IN_BLOCK, NO_SUCH_COLUMN_IN_TABLE
}

// added reports whether err is statement q failing because the column it
// adds is there already: a migration that was cut short after it and runs
// again (18.16 has no ADD COLUMN IF NOT EXISTS).
func added(q string, err error) bool {
	var ex *ch.Exception
	return strings.Contains(q, "ADD COLUMN") && errors.As(err, &ex) &&
		(ex.Code == 44 || ex.Code == 15) // ILLEGAL_COLUMN (18.16), DUPLICATE_COLUMN
}

func (s *Store) appliedMigrations(ctx context.Context, table string) (map[int]bool, error) {
	have := map[int]bool{}
	err := s.query(ctx, "read migrations", `SELECT DISTINCT version FROM `+table, func(r driver.Rows) error {
		var v uint32
		if err := r.Scan(&v); err != nil {
			return err
		}
		have[int(v)] = true
		return nil
	})
	return have, err
}

// Migrations returns the migrations a store at dsn would apply, without
// applying them (for `stormradius migrate --dry-run`): each with the
// statements that would run on that server (SQL; on a cluster, as
// rewritten for it), and the statements the server's release skips noted
// in Name. opts gives the DSN and the cluster.
func Migrations(ctx context.Context, opts Options) ([]schema.Migration, error) {
	o, p, err := parseDSN(opts.DSN)
	if err != nil {
		return nil, err
	}
	cluster, err := p.clusterOf(opts.Cluster)
	if err != nil {
		return nil, err
	}
	boot := *o
	boot.Auth.Database = ""
	boot.MaxOpenConns, boot.MaxIdleConns = 1, 1
	conn, err := ch.Open(&boot)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	defer conn.Close()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return migrations(ctx, &Store{conn: conn, db: o.Auth.Database, core: &core{cluster: cluster, log: log}, part: newPart("", nil)})
}

func migrations(ctx context.Context, s *Store) ([]schema.Migration, error) {
	v, err := s.serverVersion(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.settleCluster(ctx, s); err != nil {
		return nil, err
	}
	have := map[int]bool{}
	if s.hasSchema {
		if have, err = s.appliedMigrations(ctx, s.db+".schema_migrations"); err != nil {
			return nil, err
		}
	}
	ms, err := schema.Load("clickhouse")
	if err != nil {
		return nil, err
	}
	c := s.clusterSchema()
	var out []schema.Migration
	for _, m := range ms {
		run, skipped, err := forServer(m, v, c)
		if err != nil {
			return nil, err
		}
		if have[m.Version] {
			continue
		}
		m.Name = fmt.Sprintf("%s: %s", s.db, m.Name)
		if c != nil {
			m.Name += fmt.Sprintf(" (on cluster %s)", c.cluster)
		}
		if skipped > 0 {
			m.Name += fmt.Sprintf(" (%d statements for later releases than %s skipped)", skipped, v)
		}
		m.SQL = strings.Join(run, ";\n\n") + ";\n"
		out = append(out, m)
	}
	return out, nil
}

// ttlTables are the tables a TTL applies to, all partitioned by day.
var ttlTables = []string{"trace_spans", "records", "record_index", "states_by_part", "summaries", "dirty_by_part",
	"rollups", "rollup_gens_by_part", "node_minutes", "trace_buckets", "record_moves", "changes"}

// ttlRelease is the first release the extras, TTL included, are used on.
var ttlRelease = serverVersion{21, 8}

// applyTTL sets the tables' TTL to ttl (whole days, at least one) when
// the server supports it and it changed, or a migration (which may have
// made new tables) ran. Parts already written are not
// rewritten for it (materialize_ttl_after_modify = 0): with
// ttl_only_drop_parts they expire whole as their day passes.
func (s *Store) applyTTL(ctx context.Context, meta map[string]int64, ttl time.Duration) error {
	if ttl == 0 {
		return nil
	}
	if !s.server.atLeast(ttlRelease) {
		s.log.Info("clickhouse: ttl needs a newer server; retention alone deletes old data", "server", s.server.String(),
			"needs", ttlRelease.String())
		return nil
	}
	days := max(1, int64((ttl+24*time.Hour-1)/(24*time.Hour)))
	if meta[metaTTL] == days*nsPerDay && !s.migrated {
		return nil
	}
	x := ch.Context(ctx, ch.WithSettings(ch.Settings{"materialize_ttl_after_modify": 0}))
	for _, t := range ttlTables {
		if err := s.exec(x, "set ttl", fmt.Sprintf("ALTER TABLE %s MODIFY TTL day + toIntervalDay(%d)", s.dataTable(t), days)); err != nil {
			return err
		}
	}
	return s.putMeta(ctx, map[string]int64{metaTTL: days * nsPerDay})
}

// readDirty notes the minutes an earlier process left dirty in the
// store's partition: the next Apply recomputes their rollups (with their
// hours and days).
func (s *Store) readDirty(ctx context.Context) error {
	return s.query(ctx, "read dirty minutes", `SELECT id FROM (SELECT id, dirty FROM dirty_by_part FINAL WHERE kind = 'minute'
		AND part = `+quote(s.name)+`) WHERE dirty = 1`, func(r driver.Rows) error {
		var m int64
		if err := r.Scan(&m); err != nil {
			return err
		}
		s.repair[m] = struct{}{}
		return nil
	})
}
