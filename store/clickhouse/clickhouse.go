// Package clickhouse is the store on ClickHouse (18.16, and current releases with extras: TTL, codecs,
// LowCardinality, a bloom-filter index), over the native protocol or the HTTP interface (22.11 or
// later, http.go). Tables are partitioned by day; ReplacingMergeTrees are read at each key's latest
// version (FINAL, with only key columns in the FINAL query's own conditions). Every insert costs a
// part: WriteSpans makes one, Apply at most five (seven when it takes another partition's records).
// With no multi-table transactions, Apply marks what it touches dirty before writing; a minute left
// dirty is recomputed by the next Apply under a new rollup generation, the only one readers sum, so an
// interrupted Apply's late deltas count for nothing. Each analysis partition (partition.go, lease.go)
// writes its own; Open returns partition "". docs/ARCHITECTURE.md ("ClickHouse") has the design.
package clickhouse

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/chdsn"
	"github.com/stormradius/stormradius/internal/secret"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/fence"
	"github.com/stormradius/stormradius/store/internal/position"
	"github.com/stormradius/stormradius/store/internal/summarycache"
	"github.com/stormradius/stormradius/store/internal/tiers"
)

// Options configures a Store.
type Options struct {
	// DSN names the server and database: clickhouse://[user[:password]@]host:9000[,host2:9000]/database[?param=value&...]
	// over the native protocol, http://…:8123/database or https://…:8443/database (secure=true) over HTTP.
	// A missing database is created ("default" for an empty path). Parameters are clickhouse-go's
	// (dial_timeout=5s, secure=true, compress=lz4, ...; others go to the server as settings), ttl and cluster,
	// and the store's TLS and password parameters (tlsParams): tls_ca, tls_cert, tls_key, tls_server_name
	// (any of them turns TLS on) and password_file (the password, so that it never sits in the URL).
	DSN string
	// Password, when set, is the password of the DSN's user (instead of the DSN's).
	Password string
	// PasswordSetting names where Password comes from, for the messages of a refused password
	// (storeurl: STORMRADIUS_CLICKHOUSE_PASSWORD).
	PasswordSetting string
	// ConnProblem, when set, hears of the connection while the store is open: a *ConnError as a query
	// fails for a reason a setting fixes (credentials, TLS, the address), nil once a query works again.
	// It may be called from several goroutines at once.
	ConnProblem func(*ConnError)
	// Cluster shards a new database over the servers of the named cluster (their remote_servers),
	// replicated by ZooKeeper (cluster.go); the DSN's cluster=NAME sets it too. An existing database
	// keeps what it was created as (opened without a cluster, a cluster's database uses its cluster).
	Cluster string
	// Window is the analysis windows' length. The first open records it; later opens give the same
	// or zero (the recorded one; analysis.DefaultWindow for a new database).
	Window time.Duration
	// TTL makes servers 21.8 and later drop day partitions older than it, behind retention
	// (DeleteBefore). Zero leaves the tables' TTL as it is. The DSN's ttl=168h sets it too.
	TTL time.Duration
	// Existing refuses to create a new store: readers open data that must be there.
	Existing bool
	// ReadOnly opens an existing, migrated store for reading only: it creates and migrates nothing
	// (store.ErrNotMigrated), its connections are readonly=2, its writes return store.ErrReadOnly.
	ReadOnly bool
	// Logger receives the store's log lines (slog.Default() when nil).
	Logger *slog.Logger
	// LeaseSettle is how long taking the analysis lease waits to see who else claims it
	// (DefaultLeaseSettle when zero; lease.go). Every insert of a claim must be acknowledged within half of it.
	LeaseSettle time.Duration
	// LeaseClock, when set, replaces the server's clock for the lease's expiry and the monotonic
	// clock for its holder's deadline (tests move it).
	LeaseClock func() time.Time

	dial func(*ch.Options) (driver.Conn, error) // opens a connection pool (tests replace it)
}

// Store is the ClickHouse store: the default analysis partition's view of the database (Open), or
// another partition's (Partition). It is safe for concurrent use.
type Store struct {
	conn driver.Conn
	db   string
	*core
	*part       // the partition this value writes as
	view   bool // returned by Partition: its Close releases its partition's lease, not the connections
	closed atomic.Bool
}

// core is what a store and its partitions' views share.
type core struct {
	server serverVersion
	window time.Duration
	log    *slog.Logger
	sums   summarycache.Cache
	pos    position.Tracker // the write position: it reads the change log (changes.go)
	// The change log (changes.go): this store as its writer (changes), as its reader (feed); spanCh groups span writes' rows.
	changes changeLog
	feed    changeFeed
	spanCh  spanChanges
	tiers   *tiers.Cache[*analysis.Report] // reports of rollup ranges (tiers.go)
	hot     *tiers.Cache[analysis.MinuteNodes]
	last    *tiers.Cache[lastMinute]
	hints   lastHints
	watch   *traceWatch // moves the trace stamps (stamps.go)
	// sumGen moves whenever summaries may have changed; sumsKept holds those read (tiers.go).
	sumGen   atomic.Uint64
	sumsKept sumsKept
	gensKept gensKept // the rollup generations readers send (rollups.go)
	flightMu sync.Mutex
	flights  map[flightKey]*flight // the ranges being read for the tiers (cachedReport)
	// cluster: the one the store is sharded over ("" on one server); hasSchema: the database had a schema at Open.
	cluster     string
	hasSchema   bool
	edgeReadMax int                   // see windowEdgeRecords
	sentIDs     func([]graph.TraceID) // when set, called with the ids withIDs sends (tests)
	// http: the connections speak the HTTP interface; types: the column types its inserts send, by table, by column (http.go).
	http        bool
	typesMu     sync.Mutex
	types       map[string]map[string]string
	leaseSettle time.Duration // see lease.go
	leaseClock  func() time.Time
	readOnly    bool
	migrated    bool // this Open applied a migration (its new tables need the TTL)
	// connCfg: the connection's settings, for the diagnoses of its failures (connerr.go); connBad: the last
	// failure was one; connProblem: Options.ConnProblem.
	connCfg     connInfo
	connBad     atomic.Bool
	connProblem func(*ConnError)

	verMu   sync.Mutex
	lastVer uint64

	floorMu   sync.Mutex
	floor     int64 // retention floor, unix nanoseconds (0: none)
	floorRead time.Time

	down atomic.Bool // the store (not a view) was closed, the connections with it

	partsMu sync.Mutex
	parts   map[string]*part // the partitions with open views, by name; "" always
}

// part is an analysis partition's own state in this process, shared by its views (partition.go).
type part struct {
	name     string
	base     uint64      // the partition's base rollup generation (baseGen)
	views    int         // open views (under core.partsMu): the last one's Close forgets a partition other than ""
	lease    fence.Fence // see lease.go
	progress atomic.Bool // what the partition continues from was read (readProgress)

	spanMu  sync.Mutex // orders span writes: sequence numbers follow StartSpans calls
	seq     uint64
	spanW   spanWriter     // under spanMu
	inserts sync.WaitGroup // span inserts started and not yet committed

	applyMu sync.Mutex // one Apply at a time
	// repair holds minutes whose rollups the next Apply recomputes: dirty at Open (a crash), or
	// touched by a failed Apply. clean holds the minutes the last Apply finished: its markers say
	// dirty until the next Apply's markers (or Close) say otherwise.
	repair map[int64]struct{}
	clean  map[int64]struct{}
	// gens is the current generation of every rollup bucket of the partition that has one (nil before the first Apply).
	gens      map[bucketKey]uint64
	enc       analysis.ResultEncoder // under applyMu
	recBufs   [2][]byte              // a record block's results and facts, reused from batch to batch (under applyMu)
	watermark uint64                 // the last checkpoint this store wrote (under applyMu)
}

var _ store.Store = (*Store)(nil)

// floorRefresh is how long a reader trusts the retention floor it read: another process's retention
// becomes visible within it.
const floorRefresh = 30 * time.Second

// Open connects to the server, creates the database if needed, applies the migrations and reads what
// the store continues from: the window length, the last write sequence, the work left unfinished.
func Open(ctx context.Context, opts Options) (*Store, error) {
	chOpts, p, err := parseDSN(opts.DSN)
	if err != nil {
		return nil, err
	}
	chOpts.Auth.Password = cmp.Or(opts.Password, chOpts.Auth.Password)
	opts.TTL = cmp.Or(opts.TTL, p.ttl)
	cluster, err := p.clusterOf(opts.Cluster)
	if err != nil {
		return nil, err
	}
	if opts.Window < 0 || opts.TTL < 0 || opts.LeaseSettle < 0 {
		return nil, fmt.Errorf("clickhouse: negative window %v, ttl %v or lease settle %v", opts.Window, opts.TTL, opts.LeaseSettle)
	}
	opts.LeaseSettle = cmp.Or(opts.LeaseSettle, DefaultLeaseSettle)
	dial := opts.dial
	if dial == nil {
		dial = ch.Open
	}
	s := &Store{db: chOpts.Auth.Database, core: &core{log: cmp.Or(opts.Logger, slog.Default()), edgeReadMax: edgeReadMax,
		leaseSettle: opts.LeaseSettle, leaseClock: opts.LeaseClock, readOnly: opts.ReadOnly, cluster: cluster,
		http: chOpts.Protocol == ch.HTTP, connCfg: newConnInfo(chOpts, p.tls, p.dsnPassword, opts), connProblem: opts.ConnProblem},
		part: newPart("", opts.LeaseClock)}
	s.parts = map[string]*part{"": s.part}
	// This process's writes drop what they changed as they return; another's, as the change log tells (poll).
	s.changes.writer = newWriterID()
	s.newTiers()
	s.watch = &traceWatch{}
	s.pos.Read, s.pos.OnMove, s.pos.Precise = s.poll, s.invalidate, true
	// chOpts.Settings is never nil: ParseDSN makes it.
	if opts.ReadOnly {
		// The server refuses every write and DDL of these connections (settings may still be set per query: 2, not 1).
		chOpts.Settings["readonly"] = 2
	}
	if err := s.createDatabase(ctx, dial, chOpts, opts.Existing || opts.ReadOnly); err != nil {
		return nil, err
	}
	if s.cluster != "" {
		maps.Copy(chOpts.Settings, clusterSettings)
	}
	if s.conn, err = dial(chOpts); err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	if err = s.init(ctx, opts); err != nil {
		s.conn.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) init(ctx context.Context, opts Options) error {
	migrate := s.migrate
	if s.readOnly {
		migrate = s.checkMigrated
	}
	if err := migrate(ctx); err != nil {
		return err
	}
	meta, err := queryMap[string, int64](ctx, s, "read meta", `SELECT key, argMax(value, version) FROM meta GROUP BY key`)
	if err != nil {
		return err
	}
	if err := s.settleWindow(ctx, meta, opts.Window); err != nil {
		return err
	}
	s.floor, s.floorRead = meta[metaFloor], time.Now()
	if s.readOnly {
		return nil // what a writer continues from, and the TTL, are the writer's
	}
	if err := s.readProgress(ctx); err != nil {
		return err
	}
	return s.applyTTL(ctx, meta, opts.TTL)
}

// readProgress reads what the partition continues from (its last write, the highest row versions, the
// minutes left dirty) and forgets the generations and checkpoint it knew. Open, a view before its first
// write, and AcquireLease (a previous holder may have written since) read it.
func (s *Store) readProgress(ctx context.Context) error {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	// The last write: the partition's latest log row (trace_spans).
	var logged uint64
	if err := s.queryRow(ctx, "read last write", `SELECT max(seq) FROM trace_spans WHERE trace_id = `+
		idList([]graph.TraceID{logID})+` AND part = `+quote(s.name), &logged); err != nil {
		return err
	}
	s.seq = max(s.seq, logged)
	// Versions order the rows of one key: the clock, kept above every version stored in the small tables.
	for _, table := range []string{"dirty_by_part", "meta", "states_by_part", "summaries", "rollup_gens_by_part"} {
		var v uint64
		if err := s.queryRow(ctx, "read versions", `SELECT max(version) FROM `+table, &v); err != nil {
			return err
		}
		s.verMu.Lock()
		s.lastVer = max(s.lastVer, v)
		s.verMu.Unlock()
	}
	// The minutes an earlier process left dirty: the next Apply recomputes their rollups (hours, days).
	if err := queryEach(ctx, s, "read dirty minutes", `SELECT id FROM (SELECT id, dirty FROM dirty_by_part FINAL WHERE kind = 'minute'
		AND part = `+quote(s.name)+`) WHERE dirty = 1`, func(m int64) { s.repair[m] = struct{}{} }); err != nil {
		return err
	}
	s.gens, s.watermark = nil, 0
	s.progress.Store(true)
	return nil
}

// ensureProgress reads what the partition continues from unless it was read: before a view's first write.
func (s *Store) ensureProgress(ctx context.Context) error {
	if s.readOnly || s.progress.Load() {
		return nil
	}
	return s.readProgress(ctx)
}

// dsnParams are the store's own parameters of a DSN.
type dsnParams struct {
	ttl         time.Duration
	cluster     string
	tls         tlsParams // the TLS and password parameters
	dsnPassword bool      // the DSN's userinfo holds a password
}

// clusterOf returns the cluster given in the options or the DSN (or both, when they agree).
func (p dsnParams) clusterOf(cluster string) (string, error) {
	if cluster != "" && p.cluster != "" && cluster != p.cluster {
		return "", fmt.Errorf("clickhouse: cluster %q, but the DSN says cluster=%q", cluster, p.cluster)
	}
	return cmp.Or(cluster, p.cluster), nil
}

// parseDSN splits the store's own parameters (ttl, cluster) from clickhouse-go's.
func parseDSN(dsn string) (*ch.Options, dsnParams, error) {
	var p dsnParams
	d, err := chdsn.Parse(dsn, "ttl", "cluster")
	if err != nil {
		return nil, p, fmt.Errorf("clickhouse: DSN: %w", err)
	}
	q := d.Own
	if v := q.Get("ttl"); v != "" {
		if p.ttl, err = time.ParseDuration(v); err != nil || p.ttl < 0 {
			return nil, p, fmt.Errorf("clickhouse: DSN: ttl=%q: want a duration such as 168h", v)
		}
	}
	if q.Has("cluster") && q.Get("cluster") == "" {
		return nil, p, errors.New("clickhouse: DSN: cluster=: want the name of a cluster of the servers' remote_servers")
	}
	p.cluster, p.tls, p.dsnPassword = q.Get("cluster"), d.TLS, d.UserPassword
	o := d.Options
	if o.Auth.Database == "" {
		o.Auth.Database = "default"
	}
	if !identifier.MatchString(o.Auth.Database) {
		return nil, p, fmt.Errorf("clickhouse: DSN: database %q: want letters, digits and underscores", o.Auth.Database)
	}
	return o, p, nil
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// redact hides a password in a message about dsn.
func redact(msg, dsn string) string { return secret.Scrub(msg, dsn) }

// createDatabase connects without a database (a missing one fails the handshake), reads the server
// version and creates the database.
func (s *Store) createDatabase(ctx context.Context, dial func(*ch.Options) (driver.Conn, error), o *ch.Options, existing bool) error {
	boot := *o
	boot.Auth.Database = ""
	boot.MaxOpenConns, boot.MaxIdleConns = 1, 1
	conn, err := dial(&boot)
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	defer conn.Close()
	bs := &Store{conn: conn, db: s.db}
	if s.server, err = bs.serverVersion(ctx); err != nil {
		if ce := s.connCfg.diagnose(ctx, err); ce != nil && ctx.Err() == nil {
			return ce // the first connection: what to fix, in one line
		}
		if msg := err.Error(); s.http && (strings.Contains(msg, "client_protocol_version") || strings.Contains(msg, "displayName")) {
			return fmt.Errorf("%w; over HTTP the server must be ClickHouse 22.11 or later (clickhouse-go's HTTP handshake "+
				"sends client_protocol_version and asks displayName()): use the native protocol, clickhouse://host:9000/%s", err, s.db)
		}
		return err
	}
	if err := s.settleCluster(ctx, bs); err != nil {
		return err
	}
	switch {
	case !existing:
		return bs.exec(ctx, "create database", "CREATE DATABASE IF NOT EXISTS "+s.db+s.onCluster())
	case !s.hasSchema && s.readOnly:
		return fmt.Errorf("clickhouse: no stormradius schema in database %s: %w: %w; a read-only store creates nothing: "+
			"run `stormradius migrate --store clickhouse://…/%s` or start cmd/ingest, which migrates", s.db, store.ErrNotFound, store.ErrNotMigrated, s.db)
	case !s.hasSchema:
		return fmt.Errorf("clickhouse: no stormradius data in database %s: %w", s.db, store.ErrNotFound)
	}
	return nil
}

// serverVersion reads the server's version.
func (s *Store) serverVersion(ctx context.Context) (serverVersion, error) {
	var v string
	if err := s.queryRow(ctx, "read server version", `SELECT version()`, &v); err != nil {
		return serverVersion{}, err
	}
	sv, err := parseVersion(v)
	if err != nil {
		return serverVersion{}, fmt.Errorf("clickhouse: server version %q: %w", v, err)
	}
	return sv, nil
}

// Meta keys.
const (
	metaWindow         = "window_ns"
	metaWatermark      = "watermark"
	metaSourcePosition = "source_position" // a source table read up to here (store.Positions)
	metaFloor          = "retention_floor"
	metaTTL            = "ttl_ns"
)

// putMeta sets meta keys.
func (s *Store) putMeta(ctx context.Context, kv map[string]int64) error {
	v := s.versions(1)
	var keys []string
	var vals []int64
	var vers []uint64
	for k, x := range kv {
		keys, vals, vers = append(keys, k), append(vals, x), append(vers, v)
	}
	return s.insert(ctx, "put meta", "meta", []string{"key", "value", "version"}, keys, vals, vers)
}

// settleWindow records the window length in a new database, or checks it against the recorded one:
// data analysed with one window cannot be read with another.
func (s *Store) settleWindow(ctx context.Context, meta map[string]int64, want time.Duration) error {
	have, ok := meta[metaWindow]
	switch {
	case ok && want != 0 && time.Duration(have) != want:
		return fmt.Errorf("clickhouse: the data in database %s was analysed with --window %v, not %v: use the same window, or another database",
			s.db, time.Duration(have), want)
	case ok:
		s.window = time.Duration(have)
		return nil
	}
	s.window = cmp.Or(want, analysis.DefaultWindow)
	if s.readOnly {
		return nil // no data analysed yet: the first writer records its window
	}
	return s.putMeta(ctx, map[string]int64{metaWindow: int64(s.window)})
}

// Window returns the window length of the stored data.
func (s *Store) Window() time.Duration { return s.window }

// versions reserves n consecutive row versions and returns the first: the clock in nanoseconds, kept increasing.
func (s *Store) versions(n int) uint64 {
	s.verMu.Lock()
	defer s.verMu.Unlock()
	v := max(uint64(time.Now().UnixNano()), s.lastVer+1)
	s.lastVer = v + uint64(n) - 1
	return v
}

// retentionFloor returns the retention floor (unix nanoseconds, 0 for none): what started before it is
// deleted, whether or not its partition has been dropped yet.
func (s *Store) retentionFloor(ctx context.Context) int64 {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	if time.Since(s.floorRead) > floorRefresh {
		var v int64
		if err := s.queryRow(ctx, "read retention floor",
			`SELECT argMax(value, version) FROM meta WHERE key = `+quote(metaFloor), &v); err == nil {
			s.floor, s.floorRead = max(s.floor, v), time.Now()
		}
	}
	return s.floor
}

// Close marks the minutes the last Apply finished clean (sparing the next store recomputing them; not
// after losing the lease), releases the lease and closes the connections, with the views still open.
// A view's Close does the same for its partition, and leaves the store open.
func (s *Store) Close() error {
	if s.closed.Swap(true) || s.down.Load() {
		return nil
	}
	if s.view {
		s.partsMu.Lock()
		if s.views--; s.views == 0 && s.name != "" {
			delete(s.parts, s.name)
		}
		s.partsMu.Unlock()
		s.finish(s.part)
		return nil
	}
	s.down.Store(true)
	s.partsMu.Lock()
	parts := slices.Collect(maps.Values(s.parts))
	s.partsMu.Unlock()
	for _, p := range parts {
		s.finish(p)
	}
	// The span writes' rows still queued (changes.go).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.flushSpanChanges(ctx)
	cancel()
	return s.conn.Close()
}

// finish marks the minutes p's last Apply finished clean, once the writes in flight are done, and
// releases p's lease.
func (s *Store) finish(p *part) {
	p.spanMu.Lock()
	p.inserts.Wait() // no write starts meanwhile: spanMu
	p.applyMu.Lock()
	defer p.spanMu.Unlock()
	defer p.applyMu.Unlock()
	w := &Store{conn: s.conn, db: s.db, core: s.core, part: p}
	if len(p.clean) > 0 && p.lease.Check() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := w.mark(ctx, s.versions(1), marks{clean: keys(p.clean)})
		cancel()
		if err != nil {
			s.log.Warn("clickhouse: marking the last batch's minutes clean; the next store recomputes them", "partition", p.name, "err", err)
		}
		clear(p.clean)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := w.ReleaseLease(ctx) // nothing when no lease was taken
	cancel()
	if err != nil {
		s.log.Warn("clickhouse: releasing the analysis lease; it expires by itself", "partition", p.name, "err", err)
	}
}

// checkWritable refuses a write (what) to a store opened read-only.
func (s *Store) checkWritable(what string) error {
	if s.readOnly {
		return fmt.Errorf("clickhouse: %s: %w", what, store.ErrReadOnly)
	}
	return nil
}

func (s *Store) checkOpen(what string) error {
	if s.closed.Load() || s.down.Load() {
		return fmt.Errorf("clickhouse: %s: %w", what, store.ErrClosed)
	}
	return nil
}

// exec runs a statement. Statements are DDL, mostly: the column types known for inserts over HTTP are
// read again after one.
func (s *Store) exec(ctx context.Context, what, q string) error {
	if s.core != nil {
		defer s.forgetTypes()
	}
	if err := s.conn.Exec(ctx, q); err != nil {
		return s.fail(ctx, what, err)
	}
	s.connOK()
	return nil
}

// query runs a query and calls fn for every row.
func (s *Store) query(ctx context.Context, what, q string, fn func(driver.Rows) error) error {
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return s.fail(ctx, what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			if errors.Is(err, store.ErrCorrupt) || errors.Is(err, errStop) {
				return err
			}
			return s.fail(ctx, what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return s.fail(ctx, what, err)
	}
	s.connOK()
	return nil
}

// queryMap returns the rows of a query of two columns as a map of the first to the second.
func queryMap[K comparable, V any](ctx context.Context, s *Store, what, q string) (map[K]V, error) {
	out := map[K]V{}
	err := s.query(ctx, what, q, func(r driver.Rows) error {
		var k K
		var v V
		if err := r.Scan(&k, &v); err != nil {
			return err
		}
		out[k] = v
		return nil
	})
	return out, err
}

// queryEach calls fn with every row of a query of one column.
func queryEach[T any](ctx context.Context, s *Store, what, q string, fn func(T)) error {
	return s.query(ctx, what, q, func(r driver.Rows) error {
		var v T
		if err := r.Scan(&v); err != nil {
			return err
		}
		fn(v)
		return nil
	})
}

// queryColumn returns the values of the one column q selects (nil on an error).
func queryColumn[T any](ctx context.Context, s *Store, what, q string) ([]T, error) {
	var out []T
	if err := queryEach(ctx, s, what, q, func(v T) { out = append(out, v) }); err != nil {
		return nil, err
	}
	return out, nil
}

// errStop ends a query early without an error.
var errStop = errors.New("stop")

// queryRow runs a query returning one row.
func (s *Store) queryRow(ctx context.Context, what, q string, dest ...any) error {
	if err := s.conn.QueryRow(ctx, q).Scan(dest...); err != nil {
		return s.fail(ctx, what, err)
	}
	s.connOK()
	return nil
}

// insert inserts columns (one slice per column, equal lengths) into table in one block. Columns are
// named: ClickHouse 18.16 needs it.
func (s *Store) insert(ctx context.Context, what, table string, cols []string, columns ...any) error {
	ctx, err := s.insertTypes(ctx, table, cols)
	if err != nil {
		return err
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+")")
	if err != nil {
		return s.fail(ctx, what, err)
	}
	rows, chunk := s.chunkRows(columns)
	for lo := 0; lo < rows || lo == 0; lo += chunk {
		hi := min(lo+chunk, rows)
		if lo > 0 {
			// The block so far goes; the server makes one part of the
			// insert's blocks (it squashes them), and the driver's
			// column buffers serve the next.
			if err := b.Flush(); err != nil {
				return s.fail(ctx, what, err)
			}
		}
		for i, c := range columns {
			if hi-lo < rows {
				c = reflect.ValueOf(c).Slice(lo, hi).Interface()
			}
			if err := b.Column(i).Append(c); err != nil {
				b.Abort()
				return fmt.Errorf("clickhouse: %s: column %s: %w", what, cols[i], err)
			}
		}
	}
	if err := b.Send(); err != nil {
		return s.fail(ctx, what, err)
	}
	s.connOK()
	return nil
}

// insertChunk is about how many bytes of strings a block of an insert
// holds: the driver copies a String column into a buffer grown as it
// goes (to ~5 × the block's size in all, allocated and copied), so an
// insert of more is sent as blocks of about this size, each reusing the
// last one's buffers. At 1 MB the driver still allocated ~450 MB per
// 100,000-trace benchmark iteration (span writes of ~1.8 MB, record
// batches of ~6.5 MB); at 256 KB, ~130 MB. The server makes one part of
// an insert's blocks whatever their number (TestChunkedInsertOnePart).
const insertChunk = 256 << 10

// chunkRows returns the rows of columns (an insert's, equal lengths) and
// how many to send in each block: all of them, but on one server over
// the native protocol when their String columns hold over insertChunk
// bytes (over HTTP the blocks would be one request anyway; on a cluster,
// each a separate insert into the shards).
func (s *Store) chunkRows(columns []any) (rows, chunk int) {
	if len(columns) == 0 {
		return 0, 1
	}
	rows = reflect.ValueOf(columns[0]).Len()
	size := 0
	for _, c := range columns {
		if ss, ok := c.([]string); ok {
			for _, x := range ss {
				size += len(x)
			}
		}
	}
	if s.core == nil || s.http || s.cluster != "" || size <= insertChunk || rows < 2 {
		return rows, max(rows, 1)
	}
	return rows, max(1, rows/(size/insertChunk+1))
}

// fail wraps a database error with what was being done: as store.ErrUnavailable when it passes
// (receivers answer 503, the pipeline retries) or a setting fixes it (a *ConnError, reported to
// Options.ConnProblem), as the caller's context error when that ended it.
func (s *Store) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("clickhouse: %s: %w", what, ctx.Err())
	}
	if ce := s.diagnoseConn(ctx, what, err); ce != nil {
		return ce
	}
	if transient(err) {
		return fmt.Errorf("clickhouse: %s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("clickhouse: %s: %w", what, err)
}

// transient reports whether err is the server unreachable, slow, overloaded or short of a resource:
// worth retrying. Over HTTP so is a proxy's 429, 502, 503 or 504 (no ClickHouse exception) and a
// request failed on its way, unless TLS refused the server: that does not pass by itself.
func transient(err error) bool {
	var ex *ch.Exception
	if errors.As(err, &ex) {
		return transientCodes[ex.Code]
	}
	var he *ch.HTTPError
	if errors.As(err, &he) {
		c := he.StatusCode
		return c == http.StatusTooManyRequests || c == http.StatusBadGateway ||
			c == http.StatusServiceUnavailable || c == http.StatusGatewayTimeout
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// Unless TLS refused the server: a certificate that does not verify, or a server without TLS.
		var cv *tls.CertificateVerificationError
		var ua x509.UnknownAuthorityError
		var hn x509.HostnameError
		var ci x509.CertificateInvalidError
		var rh tls.RecordHeaderError
		return !(errors.As(ue.Err, &cv) || errors.As(ue.Err, &ua) || errors.As(ue.Err, &hn) ||
			errors.As(ue.Err, &ci) || errors.As(ue.Err, &rh))
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, ch.ErrAcquireConnTimeout) || errors.Is(err, ch.ErrConnectionClosed) ||
		errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// transientCodes are the server's error codes for conditions that pass.
var transientCodes = map[int32]bool{
	3:    true, // UNEXPECTED_END_OF_FILE
	32:   true, // ATTEMPT_TO_READ_AFTER_EOF
	159:  true, // TIMEOUT_EXCEEDED
	160:  true, // TOO_SLOW
	173:  true, // CANNOT_ALLOCATE_MEMORY
	202:  true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203:  true, // NO_FREE_CONNECTION
	209:  true, // SOCKET_TIMEOUT
	210:  true, // NETWORK_ERROR
	225:  true, // NO_ZOOKEEPER
	236:  true, // ABORTED
	241:  true, // MEMORY_LIMIT_EXCEEDED
	242:  true, // TABLE_IS_READ_ONLY
	243:  true, // NOT_ENOUGH_SPACE
	252:  true, // TOO_MANY_PARTS
	279:  true, // ALL_CONNECTION_TRIES_FAILED
	285:  true, // TOO_FEW_LIVE_REPLICAS
	286:  true, // UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE
	319:  true, // UNKNOWN_STATUS_OF_INSERT
	394:  true, // QUERY_WAS_CANCELLED
	425:  true, // SYSTEM_ERROR
	439:  true, // CANNOT_SCHEDULE_TASK
	999:  true, // KEEPER_EXCEPTION
	1000: true, // POCO_EXCEPTION (network)
}

// serverVersion is a ClickHouse release, major.minor.
type serverVersion struct{ major, minor int }

func parseVersion(v string) (serverVersion, error) {
	if parts := strings.SplitN(v, ".", 3); len(parts) >= 2 {
		maj, err1 := strconv.Atoi(parts[0])
		mnr, err2 := strconv.Atoi(parts[1])
		if err1 == nil && err2 == nil {
			return serverVersion{maj, mnr}, nil
		}
	}
	return serverVersion{}, errors.New("want major.minor")
}

func (v serverVersion) atLeast(o serverVersion) bool {
	return v.major > o.major || (v.major == o.major && v.minor >= o.minor)
}

func (v serverVersion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// tlsParams are the DSN's TLS and password parameters (internal/chdsn).
type tlsParams = chdsn.Params
