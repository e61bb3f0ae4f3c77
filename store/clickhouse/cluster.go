package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Cluster mode (Options.Cluster): every table T of the schema becomes T_local, created ON CLUSTER with
// the Replicated variant of T's engine (one shard's rows), and T, a Distributed table over every shard's
// T_local, so that every query keeps its table names. clusterSchema rewrites the migrations for it.
// Correctness rests on every row of a key, and every row one shard's query reads together, lying on one
// shard (the sharding keys); on clusterSettings; on GLOBAL IN; on a shard's reads and writes going to
// one replica; and on maintenance ON CLUSTER: docs/ARCHITECTURE.md ("ClickHouse cluster").

// clusterSettings are the settings of every query of a cluster store (only numbers: clickhouse-go sends
// no other settings to 18.16).
var clusterSettings = map[string]any{
	// An insert returns once every shard it touches stored its rows: what a write acknowledged is
	// visible to the next read (the lease, Apply, read-after-write).
	"insert_distributed_sync": 1,
	// Replicated tables drop a block identical to a recent one; the store inserts identical blocks on
	// purpose (equal rollup deltas of two batches).
	"insert_deduplicate": 0,
}

// localSuffix names a table's data on one shard.
const localSuffix = "_local"

// clusterSchema rewrites migration statements for the cluster, knowing the tables and views the
// statements before created.
type clusterSchema struct {
	db, cluster string
	tables      map[string]*clusterTable
}

type clusterTable struct {
	shardKey string // the Distributed table's sharding key
	view     bool   // a materialized view: one per server, no local table
}

// newClusterSchema returns the rewriter of the migrations for cluster (nil on one server: cluster "").
func newClusterSchema(db, cluster string) *clusterSchema {
	if cluster == "" {
		return nil
	}
	return &clusterSchema{db: db, cluster: cluster, tables: map[string]*clusterTable{}}
}

var (
	createTableRe  = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	engineRe       = regexp.MustCompile(`(?is)^\s*ENGINE\s*=\s*([A-Za-z_][A-Za-z0-9_]*)`)
	orderByRe      = regexp.MustCompile(`(?is)\bORDER\s+BY\s+(.*?)(?:\s+(?:SETTINGS|PRIMARY\s+KEY|SAMPLE\s+BY|TTL)\b|$)`)
	createViewRe   = regexp.MustCompile(`(?is)^CREATE\s+MATERIALIZED\s+VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\s+TO\s+([A-Za-z_][A-Za-z0-9_]*)\s+AS\s+(SELECT\b.*)$`)
	fromRe         = regexp.MustCompile(`(?i)\bFROM\s+([A-Za-z_][A-Za-z0-9_.]*)`)
	alterRe        = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+([A-Za-z_][A-Za-z0-9_]*)\s+(.*)$`)
	columnActionRe = regexp.MustCompile(`(?i)\b(?:ADD|DROP|MODIFY|RENAME)\s+COLUMN\b`)
	dropRe         = regexp.MustCompile(`(?is)^DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)$`)
	insertRe       = regexp.MustCompile(`(?is)^INSERT\s+INTO\s+([A-Za-z_][A-Za-z0-9_]*)[\s(]`)
)

// errClusterStatement is a migration statement the cluster rewrite does not know.
var errClusterStatement = errors.New("not a statement cluster mode rewrites")

// rewrite returns the statements that make st's change on the cluster.
func (c *clusterSchema) rewrite(st statement) ([]string, error) {
	q := strings.TrimSpace(st.sql)
	switch {
	case createTableRe.MatchString(q):
		return c.createTable(q, st.shardBy)
	case st.shardBy != "":
		return nil, fmt.Errorf("-- shard by: %s before a statement that creates no table", st.shardBy)
	case createViewRe.MatchString(q):
		return c.createView(q)
	case alterRe.MatchString(q):
		m := alterRe.FindStringSubmatch(q)
		t := c.tables[m[1]]
		if t == nil || t.view {
			return nil, fmt.Errorf("ALTER TABLE %s: not a table the migrations created", m[1])
		}
		out := []string{"ALTER TABLE " + c.local(m[1]) + c.on() + " " + m[2]}
		if columnActionRe.MatchString(m[2]) {
			// A Distributed table cannot be altered ON CLUSTER under internal_replication (which Replicated
			// tables need): holding no data, it is made again after the local table, with its columns.
			out = append(out, c.dropDistributed(m[1]), c.distributed(m[1], t.shardKey))
		}
		return out, nil
	case dropRe.MatchString(q):
		name := dropRe.FindStringSubmatch(q)[1]
		out := []string{c.dropDistributed(name)}
		if t := c.tables[name]; t == nil || !t.view {
			out = append(out, "DROP TABLE IF EXISTS "+c.local(name)+c.on())
		}
		delete(c.tables, name)
		return out, nil
	case insertRe.MatchString(q):
		// Through the Distributed tables: rows go to their shards, reads see every shard.
		if name := insertRe.FindStringSubmatch(q)[1]; c.tables[name] == nil || c.tables[name].view {
			return nil, fmt.Errorf("INSERT INTO %s: not a table the migrations created", name)
		}
		return []string{q}, nil
	}
	head, _, _ := strings.Cut(q, "\n")
	return nil, fmt.Errorf("%w: %q (docs/ARCHITECTURE.md, ClickHouse cluster)", errClusterStatement, head)
}

// createTable rewrites CREATE TABLE name (columns) ENGINE = E(args) rest into the local Replicated
// table and the Distributed table over it.
func (c *clusterSchema) createTable(q, shardBy string) ([]string, error) {
	m := createTableRe.FindStringSubmatchIndex(q)
	name := q[m[2]:m[3]]
	open := m[1] - 1
	end, err := closing(q, open)
	if err != nil {
		return nil, fmt.Errorf("CREATE TABLE %s: columns: %w", name, err)
	}
	columns, rest := q[open:end+1], q[end+1:]
	e := engineRe.FindStringSubmatchIndex(rest)
	if e == nil {
		return nil, fmt.Errorf("CREATE TABLE %s: no ENGINE = after the columns", name)
	}
	engine, rest := rest[e[2]:e[3]], rest[e[1]:]
	if !strings.HasSuffix(engine, "MergeTree") || strings.HasPrefix(engine, "Replicated") {
		return nil, fmt.Errorf("CREATE TABLE %s: engine %s: cluster mode replicates the MergeTree family only", name, engine)
	}
	repl := quote("/clickhouse/tables/{shard}/"+c.db+"/"+name) + ", '{replica}'"
	if r := strings.TrimLeft(rest, " \t\n"); strings.HasPrefix(r, "(") {
		end, err := closing(r, 0)
		if err != nil {
			return nil, fmt.Errorf("CREATE TABLE %s: engine arguments: %w", name, err)
		}
		if args := strings.TrimSpace(r[1:end]); args != "" {
			repl += ", " + args
		}
		rest = r[end+1:]
	}
	key := strings.TrimSpace(shardBy)
	if key == "" {
		if key, err = defaultShardKey(rest); err != nil {
			return nil, fmt.Errorf("CREATE TABLE %s: %w", name, err)
		}
	}
	c.tables[name] = &clusterTable{shardKey: key}
	return []string{
		"CREATE TABLE IF NOT EXISTS " + c.local(name) + c.on() + " " + columns +
			" ENGINE = Replicated" + engine + "(" + repl + ")" + rest,
		c.distributed(name, key),
	}, nil
}

// defaultShardKey returns the sharding key of a table whose engine clause (after the engine's
// arguments) is rest: its trace id when its sorting key has one, else its whole sorting key.
func defaultShardKey(rest string) (string, error) {
	m := orderByRe.FindStringSubmatch(rest)
	if m == nil {
		return "", errors.New("no ORDER BY to shard by: say how with a line -- shard by: EXPR before it")
	}
	key := strings.TrimSpace(m[1])
	if strings.HasPrefix(key, "(") {
		if end, err := closing(key, 0); err == nil && end == len(key)-1 {
			key = key[1:end]
		}
	}
	cols := splitTopLevel(key)
	if len(cols) == 0 || (len(cols) == 1 && cols[0] == "tuple()") {
		return "", errors.New("an empty ORDER BY to shard by: say how with a line -- shard by: EXPR before it")
	}
	for _, col := range cols {
		if col == "trace_id" {
			return "cityHash64(trace_id)", nil
		}
	}
	return "cityHash64(" + strings.Join(cols, ", ") + ")", nil
}

// createView rewrites CREATE MATERIALIZED VIEW name TO target AS SELECT … FROM source …: one view per
// server, from the local source into the local target, so that every shard's inserts fill its own rows.
func (c *clusterSchema) createView(q string) ([]string, error) {
	m := createViewRe.FindStringSubmatch(q)
	name, target, sel := m[1], m[2], m[3]
	if t := c.tables[target]; t == nil || t.view {
		return nil, fmt.Errorf("materialized view %s: its target %s is not a table the migrations created", name, target)
	}
	from := fromRe.FindAllStringSubmatchIndex(sel, -1)
	if len(from) != 1 {
		return nil, fmt.Errorf("materialized view %s: want one FROM table in its SELECT, not %d", name, len(from))
	}
	src := sel[from[0][2]:from[0][3]]
	if t := c.tables[src]; t == nil || t.view {
		return nil, fmt.Errorf("materialized view %s: its source %s is not a table the migrations created", name, src)
	}
	c.tables[name] = &clusterTable{view: true}
	return []string{"CREATE MATERIALIZED VIEW IF NOT EXISTS " + c.db + "." + name + c.on() + " TO " + c.local(target) +
		" AS " + sel[:from[0][2]] + c.local(src) + sel[from[0][3]:]}, nil
}

// distributed returns the statement creating table name's Distributed table, with its local table's columns.
func (c *clusterSchema) distributed(name, key string) string {
	return "CREATE TABLE IF NOT EXISTS " + c.db + "." + name + c.on() + " AS " + c.local(name) +
		" ENGINE = Distributed(" + quote(c.cluster) + ", " + quote(c.db) + ", " + quote(name+localSuffix) + ", " + key + ")"
}

func (c *clusterSchema) dropDistributed(name string) string {
	return "DROP TABLE IF EXISTS " + c.db + "." + name + c.on()
}

func (c *clusterSchema) local(name string) string { return c.db + "." + name + localSuffix }

func (c *clusterSchema) on() string { return " ON CLUSTER " + quote(c.cluster) }

// closing returns the index of the parenthesis closing the one at s[open], skipping string literals
// and quoted names.
func closing(s string, open int) (int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i, nil
			}
		case '\'', '`', '"':
			q := s[i]
			for i++; i < len(s) && s[i] != q; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, errors.New("unbalanced parentheses")
}

// splitTopLevel splits s at the commas outside parentheses, trimmed.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

// onCluster returns the ON CLUSTER clause of the store's DDL ("" on one server).
func (s *Store) onCluster() string {
	if s.cluster == "" {
		return ""
	}
	return " ON CLUSTER " + quote(s.cluster)
}

// dataTable returns how DDL names the data of table t: t on one server, its local tables on every
// server of a cluster.
func (s *Store) dataTable(t string) string {
	if s.cluster == "" {
		return t
	}
	return s.db + "." + t + localSuffix + s.onCluster()
}

// partsSource returns the table listing the parts of the store's tables (of every shard on a cluster:
// one replica of each).
func (s *Store) partsSource() string {
	if s.cluster == "" {
		return "system.parts"
	}
	return "cluster(" + quote(s.cluster) + ", system, parts)"
}

// settleCluster decides whether the store is on a cluster: the one asked for, or the one an existing
// database was created on (a reader needs no flag). A database created on one server does not become a
// cluster's, nor one cluster's another's. The server must know the cluster.
func (s *Store) settleCluster(ctx context.Context, bs *Store) error {
	var engine, full string
	err := bs.query(ctx, "look for the schema", `SELECT engine, engine_full FROM system.tables WHERE database = `+
		quote(s.db)+` AND name = 'schema_migrations'`, func(r driver.Rows) error { return r.Scan(&engine, &full) })
	if err != nil {
		return err
	}
	s.hasSchema = engine != ""
	found := distributedCluster(engine, full)
	switch {
	case engine == "" || s.cluster == found:
	case s.cluster == "":
		s.cluster = found
		s.log.Debug("clickhouse: the database is sharded over a cluster", "database", s.db, "cluster", found)
	case found == "":
		return fmt.Errorf("clickhouse: database %s was created on one server, not sharded over cluster %s: "+
			"a cluster store needs a database created for it (another database name)", s.db, s.cluster)
	default:
		return fmt.Errorf("clickhouse: database %s is sharded over cluster %s, not %s", s.db, found, s.cluster)
	}
	if s.cluster == "" {
		return nil
	}
	var n uint64
	if err := bs.queryRow(ctx, "look for the cluster", `SELECT count() FROM system.clusters WHERE cluster = `+quote(s.cluster), &n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("clickhouse: the server knows no cluster %s (its remote_servers configuration)", s.cluster)
	}
	return nil
}

// distributedCluster returns the cluster of a Distributed engine's definition,
// Distributed('name', 'db', 'table', key) ("" for another engine).
func distributedCluster(engine, full string) string {
	_, args, ok := strings.Cut(full, "(")
	if !ok || engine != "Distributed" {
		return ""
	}
	name, _, _ := strings.Cut(args, ",")
	name = strings.TrimSpace(name)
	if len(name) >= 2 && (name[0] == '\'' || name[0] == '`' || name[0] == '"') {
		name = strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(name[1 : len(name)-1])
	}
	return name
}
