// Package sqlite is the embedded store: two SQLite databases under one
// directory, through the pure-Go modernc.org/sqlite (no cgo, nothing to
// install). spans.db holds the spans as received; results.db holds the
// per-trace records, the rollups, window states and summaries, and the
// pipeline's checkpoint. Two files, two write locks: span writes (on the
// acknowledgement path) never wait for result writes.
//
// The analysis can be split into partitions (store.Partitioned, see
// Partition): span writes, records, window states, checkpoints and leases
// carry their partition's name ("" for the store itself, which is all
// there is unless partitions are used); rollups, summaries and their stale
// marks are shared, kept exact by the same transactions.
//
// Both run in WAL mode with synchronous=FULL by default: a write that
// returned survives a crash of the process and of the machine. Every batch
// of records (with its rollup deltas, window states and checkpoint) is one
// transaction, so rollups are always exactly the sum of the stored records
// and window states the sum of their facts.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/fence"
	"github.com/stormradius/stormradius/store/internal/position"
	"github.com/stormradius/stormradius/store/internal/summarycache"
	tiercache "github.com/stormradius/stormradius/store/internal/tiers"
)

// Options configures a Store.
type Options struct {
	// Dir holds spans.db and results.db; created if missing.
	Dir string
	// Window is the length of the analysis windows. The first open of a
	// directory records it; later opens must give the same or zero (zero
	// adopts the recorded one; analysis.DefaultWindow for a new directory).
	Window time.Duration
	// Synchronous is SQLite's synchronous setting for span writes: "full"
	// (default: an acknowledged span survives power loss) or "normal" (it
	// survives a crash of the process; a power loss may lose the last
	// writes). Results are always "normal": they are derived from the
	// spans, and their checkpoint rolls back with them.
	Synchronous string
	// Logger receives the store's log lines (slog.Default() when nil).
	Logger *slog.Logger
	// Existing refuses to create a new store: readers (report) open data
	// that must be there.
	Existing bool
	// ReadOnly opens an existing, migrated store for reading only: it
	// creates no file and migrates nothing (an older schema is refused
	// with store.ErrNotMigrated), its connections are read-only
	// (mode=ro, query_only) and its write methods return
	// store.ErrReadOnly. It reads alongside a process that writes.
	ReadOnly bool
	// LeaseClock is the clock of the analysis lease (time.Now when nil;
	// tests move it).
	LeaseClock func() time.Time
}

// Store is the embedded store. It is safe for concurrent use.
//
// A Store is also the handle of one analysis partition (store.Partitioned):
// the one Open returns is the default partition, "", and Partition returns
// views of the others (or of "" again) that share its databases. What
// depends on the partition — its span writes, records of a window, part of
// each window state, checkpoint, lease and write fence — is the handle's;
// the rest is the store's.
type Store struct {
	*shared
	part         string
	leaseName    string      // the row of the partition's lease
	watermarkKey string      // the meta key of its checkpoint
	lease        fence.Fence // see lease.go
	view         bool        // a view from Partition: Close releases its lease only
	viewClosed   atomic.Bool // a view closed: it refuses writes
}

// shared is what a store and its partition views share.
type shared struct {
	spansW, spansR *sql.DB // one writer connection, a pool of readers
	resW, resR     *sql.DB
	window         time.Duration
	log            *slog.Logger
	dir            string
	readOnly       bool
	leaseClock     func() time.Time

	spanMu  sync.Mutex // orders span writes: sequence numbers follow commits
	seq     uint64
	spanSQL spanStatements

	sums summarycache.Cache

	pos     position.Tracker                   // the write position (position.go)
	posConn positionConn                       // under pos's lock
	tiers   *tiercache.Cache[*analysis.Report] // reports of bucket ranges (tiers.go)

	viewsMu sync.Mutex
	views   map[*Store]struct{} // the open views, whose leases Close releases
	closed  bool

	closeOnce sync.Once
	stopCkpt  chan struct{}
	ckptDone  chan struct{}
}

// handle returns the handle of partition p over sh.
func handle(sh *shared, p string, view bool) *Store {
	s := &Store{shared: sh, part: p, leaseName: leaseName, watermarkKey: "watermark", view: view}
	if p != "" {
		s.leaseName += "/" + p
		s.watermarkKey += "/" + p
	}
	s.lease.Now = sh.leaseClock
	return s
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.Partitioned    = (*Store)(nil)
	_ store.PartitionStore = (*Store)(nil)
)

// Open opens (creating if needed) the store in opts.Dir and applies the
// schema's migrations.
func Open(ctx context.Context, opts Options) (*Store, error) {
	syncMode, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	sh := &shared{log: opts.Logger, dir: opts.Dir, readOnly: opts.ReadOnly, leaseClock: opts.LeaseClock, views: map[*Store]struct{}{}}
	if sh.log == nil {
		sh.log = slog.Default()
	}
	sh.tiers = newTierCache(tiercache.DefaultMax)
	sh.pos.Read, sh.pos.OnMove = sh.readPosition, sh.tiers.Invalidate
	s := handle(sh, "", false)
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	open := func(name string, writer bool) (*sql.DB, error) { return openDB(opts, syncMode, name, writer) }
	migrateOrCheck := migrate
	if opts.ReadOnly {
		migrateOrCheck = checkMigrated
	}
	if s.spansW, err = open("spans.db", true); err != nil {
		return nil, err
	}
	if err = migrateOrCheck(ctx, s.spansW, "sqlite/spans"); err != nil {
		return nil, err
	}
	if s.spansR, err = open("spans.db", false); err != nil {
		return nil, err
	}
	if s.resW, err = open("results.db", true); err != nil {
		return nil, err
	}
	if err = migrateOrCheck(ctx, s.resW, "sqlite/results"); err != nil {
		return nil, err
	}
	if s.resR, err = open("results.db", false); err != nil {
		return nil, err
	}
	if err = s.readLastWrite(ctx); err != nil {
		return nil, err
	}
	if err = s.settleWindow(ctx, opts.Window); err != nil {
		return nil, err
	}
	if !opts.ReadOnly { // checkpoints are the writer's
		s.stopCkpt, s.ckptDone = make(chan struct{}), make(chan struct{})
		go s.checkpointer()
	}
	return s, nil
}

// prepare checks opts and the data directory before anything is opened
// (a writer creates the directory, private) and returns the synchronous
// mode of span writes.
func prepare(opts Options) (syncMode string, err error) {
	if opts.Dir == "" {
		return "", errors.New("sqlite: no data directory")
	}
	// A store that must exist has its results; a read-only one, which
	// creates nothing, its spans too.
	var must []string
	switch {
	case opts.ReadOnly:
		must = []string{"results.db", "spans.db"}
	case opts.Existing:
		must = []string{"results.db"}
	}
	for _, name := range must {
		if _, err := os.Stat(filepath.Join(opts.Dir, name)); err != nil {
			return "", fmt.Errorf("sqlite: no stormradius data in %s: %w", opts.Dir, store.ErrNotFound)
		}
	}
	if !opts.ReadOnly {
		if err := privateDir(opts.Dir); err != nil {
			return "", fmt.Errorf("sqlite: %w", err)
		}
	}
	syncMode = strings.ToUpper(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "FULL"
	case "FULL", "NORMAL":
	default:
		return "", fmt.Errorf("sqlite: synchronous %q: want full or normal", opts.Synchronous)
	}
	if opts.Window < 0 {
		return "", fmt.Errorf("sqlite: negative window %v", opts.Window)
	}
	return syncMode, nil
}

// openDB opens the pool of one database file: the writer's (one
// connection) or the readers'.
func openDB(opts Options, syncMode, name string, writer bool) (*sql.DB, error) {
	mode := syncMode
	if name == "results.db" {
		// Results are derived from the spans: a power loss that rolls
		// back their last transactions rolls back the checkpoint with
		// them, and recovery analyses those spans again. Only span
		// writes (the acknowledgement) need an fsync of their own.
		mode = "NORMAL"
	}
	access := "_pragma=journal_mode(WAL)&_pragma=synchronous(" + mode + ")"
	if opts.ReadOnly {
		// The file opened read-only, and SQLite refusing writes on the
		// connection as well. The database is in WAL mode already (its
		// writer set it): nothing to set.
		access, writer = "mode=ro&_pragma=query_only(1)", false
	}
	// busy_timeout first: setting WAL waits for other connections.
	dsn := "file:" + filepath.Join(opts.Dir, name) + "?_pragma=busy_timeout(10000)&" + access +
		"&_pragma=cache_size(-65536)&_pragma=temp_store(MEMORY)&_pragma=mmap_size(1073741824)"
	if writer {
		// Checkpoints run in the background (checkpointer), not in the
		// commit that happens to cross the WAL's size: a commit on the
		// acknowledgement path or in an analysis batch stays short.
		dsn += "&_txlock=immediate&_pragma=wal_autocheckpoint(0)"
	}
	if !opts.ReadOnly {
		if err := privateFile(filepath.Join(opts.Dir, name)); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", name, err)
	}
	if writer {
		db.SetMaxOpenConns(1)
	} else {
		db.SetMaxOpenConns(8)
	}
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// Spans are user data: the store keeps what it creates private to its
// user, whatever the umask. A data directory it creates is 0700, and its
// database files 0600; SQLite creates each database's -wal and -shm files
// with the database file's own mode (os_unix.c findCreateFileMode), so
// creating the database file first, empty (an empty file is an empty
// database), makes them 0600 too. What already exists keeps its mode: a
// directory the user made (a shared volume, a group's directory) is theirs
// to set, and files are never widened nor silently narrowed.

// privateDir creates dir, 0700, unless it exists.
func privateDir(dir string) error {
	if _, err := os.Stat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700) // beyond the umask
}

// privateFile creates the empty file path, 0600, unless it exists.
func privateFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil { // beyond the umask
		f.Close()
		return err
	}
	return f.Close()
}

// readLastWrite reads the sequence of the last span write, which the next
// one follows.
func (s *Store) readLastWrite(ctx context.Context) error {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	var seq sql.NullInt64
	if err := s.spansW.QueryRowContext(ctx, `SELECT max(seq) FROM writes`).Scan(&seq); err != nil {
		return fmt.Errorf("sqlite: read last write: %w", err)
	}
	s.seq = max(s.seq, uint64(seq.Int64))
	return nil
}

// checkpointInterval is how often the WALs are copied into the databases.
const checkpointInterval = time.Second

// checkpointer copies the write-ahead logs into the database files every
// second, without waiting for readers or writers (PASSIVE), and resets a
// log grown past 64 MiB once nothing uses it (TRUNCATE).
func (s *Store) checkpointer() {
	defer close(s.ckptDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopCkpt:
			return
		case <-t.C:
		}
		for _, db := range []*sql.DB{s.spansR, s.resR} {
			var busy, logPages, done int
			if err := db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logPages, &done); err != nil {
				s.log.Debug("sqlite: checkpoint", "err", err)
				continue
			}
			if logPages > 16384 && done == logPages {
				_, _ = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			}
		}
	}
}

// settleWindow records the window length in a new directory and checks it
// against the recorded one in an existing directory: data analysed with
// one window cannot be read with another.
func (s *Store) settleWindow(ctx context.Context, want time.Duration) error {
	var have sql.NullInt64
	err := s.resW.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'window_ns'`).Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: read window: %w", err)
	}
	switch {
	case have.Valid && want != 0 && time.Duration(have.Int64) != want:
		return fmt.Errorf("sqlite: the data was analysed with --window %v, not %v: use the same window, or another --data directory",
			time.Duration(have.Int64), want)
	case have.Valid:
		s.window = time.Duration(have.Int64)
		return nil
	}
	if want == 0 {
		want = analysis.DefaultWindow
	}
	s.window = want
	if s.readOnly {
		return nil // no data analysed yet: the first writer records its window
	}
	if _, err := s.resW.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('window_ns', ?)`, int64(want)); err != nil {
		return fmt.Errorf("sqlite: record window: %w", err)
	}
	return nil
}

// Window returns the window length of the stored data.
func (s *Store) Window() time.Duration { return s.window }

// schemaVersion returns the migrations of dir and the last one the
// database has applied (PRAGMA user_version).
func schemaVersion(ctx context.Context, db *sql.DB, dir string) (ms []schema.Migration, have int, err error) {
	if ms, err = schema.Load(dir); err != nil {
		return nil, 0, err
	}
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&have); err != nil {
		return nil, 0, fmt.Errorf("sqlite: %s: read schema version: %w", dir, err)
	}
	return ms, have, nil
}

// migrate applies the migrations of dir that the database has not seen,
// tracked in PRAGMA user_version.
func migrate(ctx context.Context, db *sql.DB, dir string) error {
	ms, have, err := schemaVersion(ctx, db, dir)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Version <= have {
			continue
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlite: %s: migration %d: %w", dir, m.Version, err)
		}
		for _, st := range m.Statements() {
			if has, err := hasColumn(ctx, tx, st); err != nil || has {
				if err != nil {
					tx.Rollback()
					return fmt.Errorf("sqlite: %s: migration %d (%s): %w", dir, m.Version, m.Name, err)
				}
				continue
			}
			if _, err := tx.ExecContext(ctx, st); err != nil {
				tx.Rollback()
				return fmt.Errorf("sqlite: %s: migration %d (%s): %w", dir, m.Version, m.Name, err)
			}
		}
		// PRAGMA takes no parameters; the version is our own integer.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, m.Version)); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlite: %s: record migration %d: %w", dir, m.Version, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: %s: migration %d: %w", dir, m.Version, err)
		}
	}
	return nil
}

// addColumn matches a migration's statement that adds a column.
var addColumn = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)\b`)

// hasColumn reports whether st adds a column the table already has: a
// migration run again (after an interruption, or over a database an
// older release's migrations brought back) skips it, as SQLite has no
// ADD COLUMN IF NOT EXISTS.
func hasColumn(ctx context.Context, tx *sql.Tx, st string) (bool, error) {
	c := addColumn.FindStringSubmatch(st)
	if c == nil {
		return false, nil
	}
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, c[1], c[2]).Scan(&n)
	return n > 0, err
}

// checkMigrated returns store.ErrNotMigrated, saying what to run, unless
// every migration of dir was applied: a read-only store migrates nothing,
// and reading an older schema would fail query by query.
func checkMigrated(ctx context.Context, db *sql.DB, dir string) error {
	ms, have, err := schemaVersion(ctx, db, dir)
	if err != nil {
		return err
	}
	if len(ms) > 0 && have < ms[len(ms)-1].Version {
		return fmt.Errorf("sqlite: %s: schema version %d, this release needs %d: %w; a read-only store migrates nothing: "+
			"run `stormradius migrate` on the data directory, or `stormradius serve`, which migrates", dir, have, ms[len(ms)-1].Version, store.ErrNotMigrated)
	}
	return nil
}

// Migrations returns the migrations a store at dir would apply, without
// applying them: for `stormradius migrate --dry-run`.
func Migrations(ctx context.Context, dir string) ([]schema.Migration, error) {
	var out []schema.Migration
	for _, part := range []string{"spans", "results"} {
		ms, err := schema.Load("sqlite/" + part)
		if err != nil {
			return nil, err
		}
		have := 0
		path := filepath.Join(dir, part+".db")
		if _, err := os.Stat(path); err == nil {
			db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
			if err != nil {
				return nil, fmt.Errorf("sqlite: %w", err)
			}
			err = db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&have)
			db.Close()
			if err != nil {
				return nil, fmt.Errorf("sqlite: %s: %w", path, err)
			}
		}
		for _, m := range ms {
			if m.Version > have {
				m.Name = part + ".db: " + m.Name
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// Close closes the databases, checkpointing the WAL into the main files,
// and releases the leases the store and its open partition views hold.
// A view's Close releases the view's lease only (see Partition).
func (s *Store) Close() error {
	if s.view {
		return s.closeView()
	}
	var errs []error
	s.closeOnce.Do(func() {
		if s.stopCkpt != nil {
			close(s.stopCkpt)
			<-s.ckptDone
		}
		if s.resW != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			errs = append(errs, s.closeViews(ctx))
			if err := s.ReleaseLease(ctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		s.spanMu.Lock()
		defer s.spanMu.Unlock()
		s.spanSQL.close()
		s.closePosition()
		for _, db := range []*sql.DB{s.spansR, s.resR} {
			if db != nil {
				errs = append(errs, db.Close())
			}
		}
		for _, db := range []*sql.DB{s.spansW, s.resW} {
			if db != nil {
				if !s.readOnly {
					_, _ = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
				}
				errs = append(errs, db.Close())
			}
		}
	})
	return errors.Join(errs...)
}

// unavailable wraps a database error as store.ErrUnavailable, keeping
// context errors as they are.
func unavailable(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("sqlite: %s: %w", what, ctx.Err())
	}
	return fmt.Errorf("sqlite: %s: %w: %w", what, store.ErrUnavailable, err)
}
