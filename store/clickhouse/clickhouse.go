// Package clickhouse is the store on ClickHouse, over the native protocol
// or ClickHouse's HTTP interface (clickhouse-go), for the scaled-out
// service (`--store clickhouse://host:9000/db`, `--store
// https://host:8443/db`). It runs on the ClickHouse Debian packages
// (18.16) and on current releases; current releases get extras (TTL,
// codecs, LowCardinality, a bloom-filter index), see schema/clickhouse.
// Over HTTP it needs 22.11 or later (http.go).
//
// Every table is partitioned by day (retention drops partitions). Records,
// states, summaries, markers and the trace index are ReplacingMergeTrees:
// a row is replaced by inserting its key again with a higher version, and
// readers take the latest version per key (FINAL, with only key columns in
// the FINAL query's own conditions). A deleted record leaves a row with
// deleted = 1. Spans are one row per trace per write (trace_spans), read
// back each span once.
//
// Every insert costs the server a part, so each operation makes few:
// WriteSpans one (its log row for recovery is a row of the same insert),
// Apply at most five (markers, records, rollups, states, checkpoint; two
// more when it takes records another analysis partition stored).
//
// ClickHouse has no multi-table transactions, so Apply is a sequence of
// inserts made safe by markers: it first marks the minutes and windows it
// touches dirty, then writes the records, the rollup deltas of the
// minutes (and of their hours and days: rollups have three tiers, all kept
// by deltas, so reports are exact as soon as Apply returns), the window
// states and the checkpoint. A window's state is exact when it was written
// after the window's latest dirty marker. A minute an Apply did not finish
// (or that a crash left dirty: they are read at Open) is recomputed from
// the records by the next Apply, with its hour and day, under a new
// generation: readers sum only each bucket's current generation, so the
// deltas of an interrupted Apply, even one that lands late, are dropped.
// Minutes are marked clean again lazily, by the next Apply's markers (or
// Close): a crash only costs recomputing the last batch's minutes.
//
// The analysis can be split into partitions (store.Partitioned,
// partition.go), each written by the one process that holds its lease
// (lease.go): several processes write at once, any number read. A
// partition's span log and sequences, records (as WindowRecords reads
// them), window states, markers, rollup generations and checkpoint are
// its own: an Apply that fails in one partition is repaired from that
// partition's records under that partition's generation, while the others
// go on writing theirs, and readers sum every partition's current
// generation. Reports, summaries, retention and compaction are the
// store's. The store Open returns is the default partition, "", which is
// everything a database held before partitions.
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
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/fence"
	"github.com/stormradius/stormradius/store/internal/position"
	"github.com/stormradius/stormradius/store/internal/summarycache"
	"github.com/stormradius/stormradius/store/internal/tiers"
)

// Options configures a Store.
type Options struct {
	// DSN names the server and database:
	// clickhouse://[user[:password]@]host:9000[,host2:9000]/database[?param=value&...]
	// over the native protocol, or http://…:8123/database and
	// https://…:8443/database over ClickHouse's HTTP interface, which
	// managed services often offer alone (https implies secure=true; the
	// server must be 22.11 or later, see http.go). The database is created
	// when missing ("default" when the path is empty). Parameters are
	// clickhouse-go's (dial_timeout=5s, read_timeout=30s, secure=true,
	// compress=lz4, max_open_conns=10, ...; others are passed to the
	// server as settings), ttl and cluster (below).
	DSN string
	// Cluster shards the store over the servers of the named cluster (the
	// servers' remote_servers), replicated by ZooKeeper (see cluster.go;
	// docs/ARCHITECTURE.md, "ClickHouse cluster"): a new database is
	// created for it on every server. The DSN parameter cluster=NAME sets
	// it too. An existing database keeps what it was created as: a store
	// opened without a cluster on a cluster's database uses that cluster,
	// and a database created on one server cannot be opened as a
	// cluster's.
	Cluster string
	// Window is the length of the analysis windows. The first open of a
	// database records it; later opens must give the same or zero (zero
	// adopts the recorded one; analysis.DefaultWindow for a new database).
	Window time.Duration
	// TTL, on servers that support it (21.8 and later), makes ClickHouse
	// drop day partitions older than TTL by itself, behind retention
	// (DeleteBefore). Zero leaves the tables' TTL as it is. The DSN
	// parameter ttl=168h sets it too.
	TTL time.Duration
	// Existing refuses to create a new store: readers (report) open data
	// that must be there.
	Existing bool
	// ReadOnly opens an existing, migrated store for reading only (cmd/api):
	// it creates nothing and migrates nothing (an older schema is refused
	// with store.ErrNotMigrated), its connections are read-only on the
	// server (readonly=2), and its write methods return store.ErrReadOnly.
	ReadOnly bool
	// Logger receives the store's log lines (slog.Default() when nil).
	Logger *slog.Logger
	// LeaseSettle is how long taking the analysis lease waits to see who
	// else claims it (DefaultLeaseSettle when zero; see lease.go). Every
	// insert of a claim must be acknowledged within half of it.
	LeaseSettle time.Duration
	// LeaseClock, when set, replaces the server's clock for the lease's
	// expiry and the monotonic clock for its holder's deadline (tests move
	// it).
	LeaseClock func() time.Time

	// dial opens a connection pool (tests replace it).
	dial func(*ch.Options) (driver.Conn, error)
}

// Store is the ClickHouse store: the default analysis partition's view of
// the database (Open), or another partition's (Partition). It is safe for
// concurrent use.
type Store struct {
	conn driver.Conn
	db   string
	*core
	// part is the partition this value writes as: its span log, records,
	// states, rollup generations, markers, checkpoint and lease.
	*part
	// view: returned by Partition; its Close releases its partition's
	// lease, not the connections.
	view   bool
	closed atomic.Bool
}

// core is what a store and its partitions' views share.
type core struct {
	server serverVersion
	window time.Duration
	log    *slog.Logger
	sums   summarycache.Cache
	// pos is the write position: it reads the change log (changes.go).
	pos position.Tracker
	// changes is this store's side of the change log as a writer, feed
	// as a reader; spanCh groups span writes' rows (changes.go).
	changes changeLog
	feed    changeFeed
	spanCh  spanChanges
	// tiers keeps reports of rollup ranges (tiers.go).
	tiers *tiers.Cache[*analysis.Report]
	hot   *tiers.Cache[analysis.MinuteNodes]
	last  *tiers.Cache[lastMinute]
	hints lastHints
	// watch moves the trace stamps (stamps.go).
	watch *traceWatch
	// sumGen moves whenever summaries may have changed; sumsKept holds
	// those read (tiers.go).
	sumGen   atomic.Uint64
	sumsKept sumsKept
	// gensKept are the rollup generations readers send (rollups.go).
	gensKept gensKept
	// flights are the ranges being read for the tiers (cachedReport).
	flightMu sync.Mutex
	flights  map[flightKey]*flight
	// cluster is the cluster the store is sharded over ("" on one
	// server); hasSchema: the database had a schema at Open.
	cluster   string
	hasSchema bool
	// edgeReadMax: see windowEdgeRecords.
	edgeReadMax int
	// sentIDs, when set, is called with the ids withIDs sends (tests).
	sentIDs func([]graph.TraceID)
	// http: the connections speak ClickHouse's HTTP interface (http.go);
	// types are the column types its inserts send.
	http  bool
	types columnTypes

	leaseSettle time.Duration // see lease.go
	leaseClock  func() time.Time
	// readOnly: opened with Options.ReadOnly.
	readOnly bool
	// migrated: this Open applied a migration (its new tables need the TTL).
	migrated bool

	verMu   sync.Mutex
	lastVer uint64

	floorMu   sync.Mutex
	floor     int64 // retention floor, unix nanoseconds (0: none)
	floorRead time.Time

	// down: the store (not a view) was closed, the connections with it.
	down atomic.Bool

	partsMu sync.Mutex
	parts   map[string]*part // the partitions with open views, by name; "" always
}

// part is an analysis partition's own state in this process, shared by
// its views (partition.go).
type part struct {
	name string
	// base is the partition's base rollup generation (baseGen).
	base uint64
	// views counts the open views of a partition other than "" (under
	// core.partsMu): the last one's Close forgets the partition.
	views int
	lease fence.Fence // see lease.go
	// progress: what the partition continues from was read (readProgress).
	progress atomic.Bool

	spanMu  sync.Mutex // orders span writes: sequence numbers follow StartSpans calls
	seq     uint64
	spanW   spanWriter     // under spanMu
	inserts sync.WaitGroup // span inserts started and not yet committed

	applyMu sync.Mutex // one Apply at a time
	// repair holds minutes whose rollups must be recomputed by the next
	// Apply: dirty at Open (a crash), or touched by a failed Apply.
	repair map[int64]struct{}
	// clean holds the minutes the last Apply finished: its markers say
	// dirty until the next Apply's markers (or Close) say otherwise.
	clean map[int64]struct{}
	// gens is the current generation of every rollup bucket of the
	// partition that has one (loaded by the first Apply; nil before).
	gens map[bucketKey]uint64
	enc  analysis.ResultEncoder // under applyMu
	// watermark is the last checkpoint this store wrote (under applyMu).
	watermark uint64
}

var _ store.Store = (*Store)(nil)

// floorRefresh is how long a reader trusts the retention floor it read:
// another process's retention becomes visible within it.
const floorRefresh = 30 * time.Second

// Open connects to the server, creates the database if needed, applies the
// schema's migrations and reads what the store needs to continue: the
// window length, the last write sequence, the work an earlier process left
// unfinished.
func Open(ctx context.Context, opts Options) (*Store, error) {
	chOpts, p, err := parseDSN(opts.DSN)
	if err != nil {
		return nil, err
	}
	if opts.TTL == 0 {
		opts.TTL = p.ttl
	}
	cluster, err := p.clusterOf(opts.Cluster)
	if err != nil {
		return nil, err
	}
	if opts.Window < 0 || opts.TTL < 0 || opts.LeaseSettle < 0 {
		return nil, fmt.Errorf("clickhouse: negative window %v, ttl %v or lease settle %v", opts.Window, opts.TTL, opts.LeaseSettle)
	}
	if opts.LeaseSettle == 0 {
		opts.LeaseSettle = DefaultLeaseSettle
	}
	dial := opts.dial
	if dial == nil {
		dial = ch.Open
	}
	s := &Store{db: chOpts.Auth.Database, core: &core{log: opts.Logger, edgeReadMax: edgeReadMax, leaseSettle: opts.LeaseSettle,
		leaseClock: opts.LeaseClock, readOnly: opts.ReadOnly, cluster: cluster, http: chOpts.Protocol == ch.HTTP}, part: newPart("", opts.LeaseClock)}
	s.parts = map[string]*part{"": s.part}
	// This process's writes drop what they changed as they return;
	// another's, as the change log tells (poll).
	s.changes.writer = newWriterID()
	s.newTiers()
	s.watch = &traceWatch{}
	s.pos.Read, s.pos.OnMove, s.pos.Precise = s.poll, s.invalidate, true
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.ReadOnly {
		// The server refuses every write and DDL of these connections
		// (settings may still be set per query: 2, not 1).
		if chOpts.Settings == nil {
			chOpts.Settings = ch.Settings{}
		}
		chOpts.Settings["readonly"] = 2
	}
	if err := s.createDatabase(ctx, dial, chOpts, opts.Existing || opts.ReadOnly); err != nil {
		return nil, err
	}
	if s.cluster != "" {
		if chOpts.Settings == nil {
			chOpts.Settings = ch.Settings{}
		}
		for k, v := range clusterSettings {
			chOpts.Settings[k] = v
		}
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
	if s.readOnly {
		if err := s.checkMigrated(ctx); err != nil {
			return err
		}
	} else if err := s.migrate(ctx); err != nil {
		return err
	}
	meta, err := s.readMeta(ctx)
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

// readProgress reads what the store's partition continues from: its last
// write, the highest row versions, the minutes an earlier process left
// dirty; and forgets the rollup generations and checkpoint it knew. Open
// reads it, a view before its first write, and AcquireLease again: a
// previous holder may have written since.
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
	// Versions order the rows of one key; they come from the clock, kept
	// above every version already stored in the small tables.
	for _, table := range []string{"dirty_by_part", "meta", "states_by_part", "summaries", "rollup_gens_by_part"} {
		var v uint64
		if err := s.queryRow(ctx, "read versions", `SELECT max(version) FROM `+table, &v); err != nil {
			return err
		}
		s.verMu.Lock()
		s.lastVer = max(s.lastVer, v)
		s.verMu.Unlock()
	}
	if err := s.readDirty(ctx); err != nil {
		return err
	}
	s.gens, s.watermark = nil, 0
	s.progress.Store(true)
	return nil
}

// ensureProgress reads what the partition continues from unless it was
// read: before a view's first write.
func (s *Store) ensureProgress(ctx context.Context) error {
	if s.readOnly || s.progress.Load() {
		return nil
	}
	return s.readProgress(ctx)
}

// dsnParams are the store's own parameters of a DSN.
type dsnParams struct {
	ttl     time.Duration
	cluster string
}

// clusterOf returns the cluster of a store given cluster in its options
// and p in its DSN: either, or both when they agree.
func (p dsnParams) clusterOf(cluster string) (string, error) {
	if cluster != "" && p.cluster != "" && cluster != p.cluster {
		return "", fmt.Errorf("clickhouse: cluster %q, but the DSN says cluster=%q", cluster, p.cluster)
	}
	return cmp.Or(cluster, p.cluster), nil
}

// parseDSN splits the store's own parameters (ttl, cluster) from
// clickhouse-go's.
func parseDSN(dsn string) (*ch.Options, dsnParams, error) {
	var p dsnParams
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, p, fmt.Errorf("clickhouse: DSN: %w", errors.New(redact(err.Error(), dsn)))
	}
	q := u.Query()
	if v := q.Get("ttl"); v != "" {
		if p.ttl, err = time.ParseDuration(v); err != nil || p.ttl < 0 {
			return nil, p, fmt.Errorf("clickhouse: DSN: ttl=%q: want a duration such as 168h", v)
		}
	}
	if q.Has("cluster") && q.Get("cluster") == "" {
		return nil, p, errors.New("clickhouse: DSN: cluster=: want the name of a cluster of the servers' remote_servers")
	}
	p.cluster = q.Get("cluster")
	q.Del("ttl")
	q.Del("cluster")
	if u.Scheme == "https" && !q.Has("secure") {
		q.Set("secure", "true") // clickhouse-go wants both
	}
	u.RawQuery = q.Encode()
	o, err := ch.ParseDSN(u.String())
	if err != nil {
		return nil, p, fmt.Errorf("clickhouse: DSN: %w", err)
	}
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
func redact(msg, dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// createDatabase connects without a database (a missing one fails the
// handshake), reads the server version and creates the database.
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
		if msg := err.Error(); s.http && (strings.Contains(msg, "client_protocol_version") || strings.Contains(msg, "displayName")) {
			return fmt.Errorf("%w; over HTTP the server must be ClickHouse 22.11 or later (clickhouse-go's HTTP handshake "+
				"sends client_protocol_version and asks displayName()): use the native protocol, clickhouse://host:9000/%s", err, s.db)
		}
		return err
	}
	if err := s.settleCluster(ctx, bs); err != nil {
		return err
	}
	if existing {
		if !s.hasSchema && s.readOnly {
			return fmt.Errorf("clickhouse: no stormradius schema in database %s: %w: %w; a read-only store creates nothing: "+
				"run `stormradius migrate --store clickhouse://…/%s` or start cmd/ingest, which migrates", s.db, store.ErrNotFound, store.ErrNotMigrated, s.db)
		}
		if !s.hasSchema {
			return fmt.Errorf("clickhouse: no stormradius data in database %s: %w", s.db, store.ErrNotFound)
		}
		return nil
	}
	return bs.exec(ctx, "create database", "CREATE DATABASE IF NOT EXISTS "+s.db+s.onCluster())
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
	metaWindow    = "window_ns"
	metaWatermark = "watermark"
	metaFloor     = "retention_floor"
	metaTTL       = "ttl_ns"
)

// readMeta returns the latest value of every meta key.
func (s *Store) readMeta(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.query(ctx, "read meta", `SELECT key, argMax(value, version) FROM meta GROUP BY key`, func(r driver.Rows) error {
		var k string
		var v int64
		if err := r.Scan(&k, &v); err != nil {
			return err
		}
		out[k] = v
		return nil
	})
	return out, err
}

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

// settleWindow records the window length in a new database and checks it
// against the recorded one in an existing database: data analysed with
// one window cannot be read with another.
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
	if want == 0 {
		want = analysis.DefaultWindow
	}
	s.window = want
	if s.readOnly {
		return nil // no data analysed yet: the first writer records its window
	}
	return s.putMeta(ctx, map[string]int64{metaWindow: int64(want)})
}

// Window returns the window length of the stored data.
func (s *Store) Window() time.Duration { return s.window }

// versions reserves n consecutive row versions and returns the first:
// the clock in nanoseconds, kept increasing.
func (s *Store) versions(n int) uint64 {
	s.verMu.Lock()
	defer s.verMu.Unlock()
	v := max(uint64(time.Now().UnixNano()), s.lastVer+1)
	s.lastVer = v + uint64(n) - 1
	return v
}

// retentionFloor returns the retention floor (unix nanoseconds, 0 for
// none): what started before it is deleted, whether or not its partition
// has been dropped yet.
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

// Close marks the minutes the last Apply finished clean, releases the
// lease the store holds and closes the connections; the views of other
// partitions still open are closed with it (their leases released). Every
// write is acknowledged by the server before the method that made it
// returns; the markers only spare the next store recomputing those
// minutes (a store that lost its lease writes none: the minutes may be
// another's now).
//
// A view's Close does the same for its partition, and leaves the store
// open.
func (s *Store) Close() error {
	if s.closed.Swap(true) || s.down.Load() {
		return nil
	}
	if s.view {
		s.partsMu.Lock()
		if s.name != "" {
			if s.views--; s.views == 0 {
				delete(s.parts, s.name)
			}
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

// finish marks the minutes p's last Apply finished clean, once the writes
// in flight are done, and releases p's lease.
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

// exec runs a statement. Statements are DDL, mostly: the column types
// known for inserts over HTTP are read again after one.
func (s *Store) exec(ctx context.Context, what, q string) error {
	if s.core != nil {
		defer s.types.forget()
	}
	if err := s.conn.Exec(ctx, q); err != nil {
		return s.fail(ctx, what, err)
	}
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
	return nil
}

// errStop ends a query early without an error.
var errStop = errors.New("stop")

// queryRow runs a query returning one row.
func (s *Store) queryRow(ctx context.Context, what, q string, dest ...any) error {
	if err := s.conn.QueryRow(ctx, q).Scan(dest...); err != nil {
		return s.fail(ctx, what, err)
	}
	return nil
}

// insert inserts columns (one slice per column, equal lengths) into table
// in one block. Columns are named: ClickHouse 18.16 needs it.
func (s *Store) insert(ctx context.Context, what, table string, cols []string, columns ...any) error {
	ctx, err := s.insertTypes(ctx, table, cols)
	if err != nil {
		return err
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+")")
	if err != nil {
		return s.fail(ctx, what, err)
	}
	for i, c := range columns {
		if err := b.Column(i).Append(c); err != nil {
			b.Abort()
			return fmt.Errorf("clickhouse: %s: column %s: %w", what, cols[i], err)
		}
	}
	if err := b.Send(); err != nil {
		return s.fail(ctx, what, err)
	}
	return nil
}

// fail wraps a database error with what was being done: as
// store.ErrUnavailable when the server could not be reached or refused
// for a reason that passes (receivers answer 503, the pipeline retries),
// as the caller's context error when that ended it.
func (s *Store) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("clickhouse: %s: %w", what, ctx.Err())
	}
	if transient(err) {
		return fmt.Errorf("clickhouse: %s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("clickhouse: %s: %w", what, err)
}

// transient reports whether err is the server being unreachable, slow,
// overloaded or short of a resource: worth retrying later. Over HTTP, so
// is a proxy's answer that the server is (429, 502, 503, 504, with no
// ClickHouse exception), and a request that failed on its way (a
// connection refused, cut, or closed as it was reused), unless TLS
// refused the server (its certificate, or no TLS at an https URL): that
// does not pass by itself.
func transient(err error) bool {
	var ex *ch.Exception
	if errors.As(err, &ex) {
		return transientCodes[ex.Code]
	}
	var he *ch.HTTPError
	if errors.As(err, &he) {
		switch he.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return !tlsRefused(ue.Err)
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, ch.ErrAcquireConnTimeout) || errors.Is(err, ch.ErrConnectionClosed) ||
		errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// tlsRefused reports whether err is TLS refusing the server: a
// certificate that does not verify, or a server that does not speak TLS.
func tlsRefused(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &rh)
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
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return serverVersion{}, errors.New("want major.minor")
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return serverVersion{}, errors.New("want major.minor")
	}
	return serverVersion{maj, mnr}, nil
}

func (v serverVersion) atLeast(o serverVersion) bool {
	return v.major > o.major || (v.major == o.major && v.minor >= o.minor)
}

func (v serverVersion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }
