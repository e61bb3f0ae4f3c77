package clickhouse

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
)

// Migrations live in schema/clickhouse; schema_migrations records those applied, with the server release.

const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    UInt32,
    name       String,
    applied_at DateTime,
    server     String,
    skipped    UInt32
) ENGINE = MergeTree ORDER BY version`

// statement is one statement of a migration, with the release it needs and, for a table, its sharding
// key on a cluster.
type statement struct {
	sql      string
	requires serverVersion // zero: any
	shardBy  string        // empty: the default (cluster.go)
}

// statements splits a migration at semicolons that end a line, noting the lines before a statement
// "-- requires: X.Y" (it runs on release X.Y or later: the extras, docs/SPEC.md §6) and "-- shard by: EXPR"
// (a CREATE TABLE's sharding key on a cluster, cluster.go).
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

// forServer returns the statements of m that run on release v, and how many it skips; on a cluster
// (c not nil), rewritten for it.
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

// migrate applies the migrations the database has not seen. Statements are idempotent: two processes
// migrating at once, or a migration cut short, do no harm.
func (s *Store) migrate(ctx context.Context) error {
	c := newClusterSchema(s.db, s.cluster)
	// schema_migrations, only where Open found none (on a cluster, DDL costs a round of every server);
	// on a cluster like every table: a migrator's records are seen by all.
	if !s.hasSchema {
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
	}
	have, err := s.appliedMigrations(ctx, "schema_migrations")
	if err != nil {
		return err
	}
	return eachPending(s.server, c, have, func(m schema.Migration, run []string, skipped int) error {
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
		return nil
	})
}

// eachPending calls fn with every migration not in have, its statements that run on release v and
// how many it skips. Every migration is rewritten, applied or not: the cluster rewrite learns the tables.
func eachPending(v serverVersion, c *clusterSchema, have map[int]bool, fn func(m schema.Migration, run []string, skipped int) error) error {
	ms, err := schema.Load("clickhouse")
	if err != nil {
		return err
	}
	for _, m := range ms {
		run, skipped, err := forServer(m, v, c)
		if err != nil {
			return err
		}
		if !have[m.Version] {
			if err := fn(m, run, skipped); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMigrated returns store.ErrNotMigrated, saying what to run, unless every migration of this release
// was applied: a read-only store migrates nothing, and reading an older schema would fail query by query.
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

// dropped reports whether err is statement q failing because the columns it drops are gone: a migration
// cut short after it runs again.
func dropped(q string, err error) bool {
	var ex *ch.Exception
	return strings.Contains(q, "DROP COLUMN") && errors.As(err, &ex) &&
		(ex.Code == 44 || ex.Code == 10 || ex.Code == 16) // ILLEGAL_COLUMN (18.16), NOT_FOUND_COLUMN_IN_BLOCK, NO_SUCH_COLUMN_IN_TABLE
}

// added reports whether err is statement q failing because the column it adds is there: a migration cut
// short after it runs again (18.16 has no ADD COLUMN IF NOT EXISTS).
func added(q string, err error) bool {
	var ex *ch.Exception
	return strings.Contains(q, "ADD COLUMN") && errors.As(err, &ex) &&
		(ex.Code == 44 || ex.Code == 15) // ILLEGAL_COLUMN (18.16), DUPLICATE_COLUMN
}

func (s *Store) appliedMigrations(ctx context.Context, table string) (map[int]bool, error) {
	have := map[int]bool{}
	err := queryEach(ctx, s, "read migrations", `SELECT DISTINCT version FROM `+table, func(v uint32) { have[int(v)] = true })
	return have, err
}

// Migrations returns the migrations a store at opts.DSN (and opts.Cluster) would apply, without applying
// them (`stormradius migrate --dry-run`): SQL holds the statements that would run on that server (as
// rewritten for a cluster), Name notes those its release skips.
func Migrations(ctx context.Context, opts Options) ([]schema.Migration, error) {
	o, p, err := parseDSN(opts.DSN)
	if err != nil {
		return nil, err
	}
	o.Auth.Password = cmp.Or(opts.Password, o.Auth.Password)
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
	c := &core{cluster: cluster, log: cmp.Or(opts.Logger, slog.Default()), connCfg: newConnInfo(o, p.tls, p.dsnPassword, opts)}
	return migrations(ctx, &Store{conn: conn, db: o.Auth.Database, core: c, part: newPart("", nil)})
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
	c := newClusterSchema(s.db, s.cluster)
	var out []schema.Migration
	if err := eachPending(v, c, have, func(m schema.Migration, run []string, skipped int) error {
		m.Name = fmt.Sprintf("%s: %s", s.db, m.Name)
		if c != nil {
			m.Name += fmt.Sprintf(" (on cluster %s)", c.cluster)
		}
		if skipped > 0 {
			m.Name += fmt.Sprintf(" (%d statements for later releases than %s skipped)", skipped, v)
		}
		m.SQL = strings.Join(run, ";\n\n") + ";\n"
		out = append(out, m)
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// ttlTables are the tables a TTL applies to, all partitioned by day.
var ttlTables = []string{"trace_spans", "records", "record_index", "states_by_part", "summaries", "dirty_by_part",
	"rollups", "rollup_gens_by_part", "node_minutes", "trace_buckets", "record_moves", "changes"}

// ttlRelease is the first release the extras, TTL included, are used on.
var ttlRelease = serverVersion{21, 8}

// applyTTL sets the tables' TTL to ttl (whole days, at least one) when the server supports it and it
// changed, or a migration (maybe of new tables) ran. Parts written are not rewritten for it
// (materialize_ttl_after_modify = 0): with ttl_only_drop_parts they expire whole as their day passes.
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
