package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/position"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

const recordColumns = `trace_id, start, win, api, seq, edges, result, facts`

// scanRecord reads one row of recordColumns.
func scanRecord(rows *sql.Rows) (*store.Record, error) {
	var (
		id                 []byte
		start, win, seq    int64
		result, facts, eds []byte
		r                  store.Record
	)
	if err := rows.Scan(&id, &start, &win, &r.API, &seq, &eds, &result, &facts); err != nil {
		return nil, err
	}
	if len(id) != len(r.TraceID) || len(eds)%8 != 0 {
		return nil, fmt.Errorf("%w: malformed record row", store.ErrCorrupt)
	}
	copy(r.TraceID[:], id)
	r.Start, r.Window, r.Seq, r.Facts = start, win, uint64(seq), facts
	res, err := analysis.DecodeResult(result, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: record %s: %w", store.ErrCorrupt, r.TraceID, err)
	}
	r.Result = res
	r.Edges = make([]uint64, len(eds)/8)
	for i := range r.Edges {
		r.Edges[i] = binary.BigEndian.Uint64(eds[8*i:])
	}
	return &r, nil
}

// Records returns the stored records of ids, whichever partition stored
// them.
func (s *Store) Records(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]*store.Record, error) {
	out := make(map[graph.TraceID]*store.Record, len(ids))
	const chunk = 256
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		args := make([]any, len(part))
		for i := range part {
			args[i] = part[i][:]
		}
		in := `(` + strings.TrimSuffix(strings.Repeat("?,", len(part)), ",") + `)`
		// Most traces asked about have no record yet: find the ones that
		// do in the narrow index first, then read those rows.
		var hits []any
		if err := s.scanIDs(ctx, `SELECT trace_id FROM records INDEXED BY records_ids WHERE trace_id IN `+in, args, func(id []byte) {
			hits = append(hits, id)
		}); err != nil {
			return nil, err
		}
		if len(hits) == 0 {
			continue
		}
		q := `SELECT ` + recordColumns + ` FROM records WHERE trace_id IN (` + strings.TrimSuffix(strings.Repeat("?,", len(hits)), ",") + `)`
		if err := s.queryRecords(ctx, q, hits, func(r *store.Record) error { out[r.TraceID] = r; return nil }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanIDs runs a query returning trace ids.
func (s *Store) scanIDs(ctx context.Context, q string, args []any, fn func([]byte)) error {
	rows, err := s.resR.QueryContext(ctx, q, args...)
	if err != nil {
		return unavailable(ctx, "read record ids", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			return unavailable(ctx, "read record ids", err)
		}
		fn(id)
	}
	if err := rows.Err(); err != nil {
		return unavailable(ctx, "read record ids", err)
	}
	return nil
}

func (s *Store) queryRecords(ctx context.Context, q string, args []any, fn func(*store.Record) error) error {
	rows, err := s.resR.QueryContext(ctx, q, args...)
	if err != nil {
		return unavailable(ctx, "read records", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			if errors.Is(err, store.ErrCorrupt) {
				return fmt.Errorf("sqlite: %w", err)
			}
			return unavailable(ctx, "read records", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return unavailable(ctx, "read records", err)
	}
	return nil
}

// WindowRecords calls fn with the records of window w that the handle's
// partition stored and that use one of edges (all of them when edges is
// empty). With edges, the window is scanned for the edges column alone (it
// precedes the large columns, so their overflow pages are not read; the
// partition is matched in the index, records_by_window) and only the
// matching records are read whole.
func (s *Store) WindowRecords(ctx context.Context, w int64, edges []uint64, fn func(*store.Record) error) error {
	if len(edges) == 0 {
		return s.queryRecords(ctx, `SELECT `+recordColumns+` FROM records WHERE win = ? AND part = ?`, []any{w, s.part}, fn)
	}
	want := slices.Clone(edges)
	slices.Sort(want)
	rows, err := s.resR.QueryContext(ctx, windowEdgesQuery, w, s.part)
	if err != nil {
		return unavailable(ctx, "scan window", err)
	}
	var ids []graph.TraceID
	var have []uint64
	for rows.Next() {
		var id, eds []byte
		if err := rows.Scan(&id, &eds); err != nil {
			rows.Close()
			return unavailable(ctx, "scan window", err)
		}
		have = have[:0]
		for i := 0; i+8 <= len(eds); i += 8 {
			have = append(have, binary.BigEndian.Uint64(eds[i:]))
		}
		if len(id) == len(graph.TraceID{}) && store.SharesEdge(have, want) {
			ids = append(ids, graph.TraceID(id))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return unavailable(ctx, "scan window", err)
	}
	recs, err := s.Records(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if r := recs[id]; r != nil {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// windowEdgesQuery scans a partition's records of a window for their
// edges.
const windowEdgesQuery = `SELECT trace_id, edges FROM records WHERE win = ? AND part = ?`

// Watermark returns the checkpoint of the handle's partition.
func (s *Store) Watermark(ctx context.Context) (uint64, error) {
	var v sql.NullInt64
	err := s.resR.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, s.watermarkKey).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, unavailable(ctx, "read watermark", err)
	}
	return uint64(v.Int64), nil
}

// Apply stores a batch in one transaction: its records as the handle's
// partition's, its states as the partition's parts of their windows, its
// watermark as the partition's checkpoint.
func (s *Store) Apply(ctx context.Context, b store.Batch) error {
	if s.resW == nil {
		return fmt.Errorf("sqlite: apply: %w", store.ErrClosed)
	}
	if err := s.fence("apply"); err != nil {
		return err
	}
	mlo, mhi := changedMinutes(b.Changes)
	defer s.pos.Wrote(mlo, mhi)
	tx, err := s.resW.BeginTx(ctx, nil)
	if err != nil {
		return unavailable(ctx, "apply", err)
	}
	defer tx.Rollback()
	if err := putRecords(ctx, tx, s.part, b.Changes); err != nil {
		return err
	}
	// Rollup deltas per minute, merged over the batch so that a bucket
	// costs one upsert per key whatever the batch holds.
	if err := putRollups(ctx, tx, rollup.Deltas(b.Changes, nil)); err != nil {
		return err
	}
	if err := putStates(ctx, tx, s.part, b.States); err != nil {
		return err
	}
	if b.Watermark > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, s.watermarkKey, int64(b.Watermark)); err != nil {
			return unavailable(ctx, "put watermark", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return unavailable(ctx, "commit", err)
	}
	return nil
}

// changedMinutes returns the minutes [lo, hi) holding the records a batch
// replaces (lo = hi when none): its rollup changes.
func changedMinutes(changes []store.Change) (lo, hi int64) {
	lo, hi = math.MaxInt64, math.MinInt64
	for _, c := range changes {
		for _, r := range []*store.Record{c.Old, c.New} {
			if r != nil {
				m := r.Minute()
				lo, hi = min(lo, m), max(hi, m+1)
			}
		}
	}
	if lo >= hi {
		return 0, 0
	}
	return lo, hi
}

// putRecords replaces the records of a batch, as partition part's (a
// trace's record stored by another partition is replaced too: the unique
// trace id index).
func putRecords(ctx context.Context, tx *sql.Tx, part string, changes []store.Change) error {
	put, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO records (`+recordColumns+`, part) VALUES (?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return unavailable(ctx, "apply", err)
	}
	defer put.Close()
	var enc analysis.ResultEncoder
	var result []byte
	for _, c := range changes {
		if c.New == nil {
			if c.Old != nil {
				if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE trace_id = ?`, c.Old.TraceID[:]); err != nil {
					return unavailable(ctx, "delete record", err)
				}
			}
			continue
		}
		r := c.New
		result = enc.Append(result[:0], r.Result)
		eds := make([]byte, 8*len(r.Edges))
		for i, e := range r.Edges {
			binary.BigEndian.PutUint64(eds[8*i:], e)
		}
		if _, err := put.ExecContext(ctx, r.TraceID[:], r.Start, r.Window, r.API, int64(r.Seq), eds, result, r.Facts, part); err != nil {
			return unavailable(ctx, "put record", err)
		}
	}
	return nil
}

// putRollups adds the per-minute deltas to the rollups of every tier:
// summed per ten minutes, hour and day for the coarser ones.
func putRollups(ctx context.Context, tx *sql.Tx, minutes map[int64]*analysis.Report) error {
	stmts := &txStatements{tx: tx}
	defer stmts.close()
	for _, t := range tiers {
		buckets := minutes
		if t.minutes > 1 {
			buckets = map[int64]*analysis.Report{}
			for m, d := range minutes {
				k := rollup.FloorDiv(m, t.minutes)
				if buckets[k] == nil {
					buckets[k] = analysis.NewReport()
				}
				buckets[k].Merge(d, 1)
			}
		}
		for bucket, d := range buckets {
			if err := upsertReport(ctx, stmts, t.id, bucket, d); err != nil {
				return unavailable(ctx, "update rollups", err)
			}
		}
	}
	return nil
}

// putStates stores partition part's states of the windows a batch touched
// and marks their summaries stale. An empty state is dropped: its row
// keeps a NULL state, so that the other partitions' PeerWindows see the
// window change.
func putStates(ctx context.Context, tx *sql.Tx, part string, states map[int64]*analysis.State) error {
	written := time.Now().UnixNano()
	for w, st := range states {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO stale_summaries (win) VALUES (?)`, w); err != nil {
			return unavailable(ctx, "mark summary stale", err)
		}
		var enc any // NULL: dropped
		if st != nil && st.Traces != 0 {
			b, err := json.Marshal(st)
			if err != nil {
				return fmt.Errorf("sqlite: encode state of window %d: %w", w, err)
			}
			enc = b
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO states (win, part, written, state) VALUES (?, ?, ?, ?)`,
			w, part, written, enc); err != nil {
			return unavailable(ctx, "put state", err)
		}
	}
	return nil
}

// txStatements prepares each statement of a transaction once: SQLite
// parses a statement text on every Exec otherwise, which dominated rollup
// upserts.
type txStatements struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (c *txStatements) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st := c.stmts[query]
	if st == nil {
		var err error
		if st, err = c.tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		if c.stmts == nil {
			c.stmts = map[string]*sql.Stmt{}
		}
		c.stmts[query] = st
	}
	return st.ExecContext(ctx, args...)
}

func (c *txStatements) close() {
	for _, st := range c.stmts {
		st.Close()
	}
}

// State returns the handle's partition's stored state of window w; SQLite
// applies batches atomically, so it is always exact.
func (s *Store) State(ctx context.Context, w int64) (*analysis.State, bool, error) {
	var b []byte
	err := s.resR.QueryRowContext(ctx, `SELECT state FROM states WHERE win = ? AND part = ?`, w, s.part).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) || err == nil && b == nil {
		return nil, true, fmt.Errorf("sqlite: state of window %d: %w", w, store.ErrNotFound)
	}
	if err != nil {
		return nil, false, unavailable(ctx, "read state", err)
	}
	st := analysis.NewState()
	if err := json.Unmarshal(b, st); err != nil {
		return nil, false, fmt.Errorf("sqlite: state of window %d: %w: %w", w, store.ErrCorrupt, err)
	}
	return st, true, nil
}

// PutSummaries stores window summaries.
func (s *Store) PutSummaries(ctx context.Context, sums []*analysis.WindowSummary) error {
	if err := s.fence("put summaries"); err != nil {
		return err
	}
	defer s.pos.Wrote(0, 0) // no rollup changes
	tx, err := s.resW.BeginTx(ctx, nil)
	if err != nil {
		return unavailable(ctx, "put summaries", err)
	}
	defer tx.Rollback()
	var b []byte
	for _, w := range sums {
		// The binary form (analysis.DecodeSummary reads it back), as a
		// BLOB.
		b = w.AppendBinary(b[:0])
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO summaries (win, summary) VALUES (?, ?)`, w.Window, b); err != nil {
			return unavailable(ctx, "put summaries", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM stale_summaries WHERE win = ?`, w.Window); err != nil {
			return unavailable(ctx, "put summaries", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return unavailable(ctx, "put summaries", err)
	}
	return nil
}

// StaleSummaries returns the windows whose summary is older than their
// state.
func (s *Store) StaleSummaries(ctx context.Context) ([]int64, error) {
	rows, err := s.resR.QueryContext(ctx, `SELECT win FROM stale_summaries ORDER BY win`)
	if err != nil {
		return nil, unavailable(ctx, "read stale summaries", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var w int64
		if err := rows.Scan(&w); err != nil {
			return nil, unavailable(ctx, "read stale summaries", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(ctx, "read stale summaries", err)
	}
	return out, nil
}

// Summaries returns the summaries of windows lo..hi.
func (s *Store) Summaries(ctx context.Context, lo, hi int64) ([]*analysis.WindowSummary, error) {
	rows, err := s.resR.QueryContext(ctx, `SELECT win, summary FROM summaries WHERE win BETWEEN ? AND ? ORDER BY win`, lo, hi)
	if err != nil {
		return nil, unavailable(ctx, "read summaries", err)
	}
	defer rows.Close()
	var out []*analysis.WindowSummary
	for rows.Next() {
		var win int64
		var b []byte
		if err := rows.Scan(&win, &b); err != nil {
			return nil, unavailable(ctx, "read summaries", err)
		}
		w, err := s.sums.Decode(win, b)
		if err != nil {
			return nil, fmt.Errorf("sqlite: %w: %w", store.ErrCorrupt, err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(ctx, "read summaries", err)
	}
	return out, nil
}

// DeleteBefore drops what started before the day (UTC) holding t: spans
// by write time (whole writes, by rowid range), records by start, rollups
// of every tier, states and summaries by bucket and window, each through an
// index; every partition's. Whole days go, so that no rollup bucket keeps deleted data.
func (s *Store) DeleteBefore(ctx context.Context, t int64) error {
	if err := s.fence("delete"); err != nil {
		return err
	}
	defer s.pos.Wrote(position.AllLo, position.AllHi)
	day := int64(24 * time.Hour)
	cutoff := rollup.FloorDiv(t, day) * day
	minute := rollup.FloorDiv(cutoff, int64(time.Minute))
	win := analysis.WindowOf(cutoff, s.window) // windows wholly before the cutoff
	if err := s.deleteWrites(ctx, cutoff); err != nil {
		return err
	}
	for {
		res, err := s.resW.ExecContext(ctx, `DELETE FROM records WHERE trace_id IN
			(SELECT trace_id FROM records WHERE start < ? LIMIT 5000)`, cutoff)
		if err != nil {
			return unavailable(ctx, "delete records", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			break
		}
	}
	tx, err := s.resW.BeginTx(ctx, nil)
	if err != nil {
		return unavailable(ctx, "delete rollups", err)
	}
	defer tx.Rollback()
	for _, table := range rollupTables {
		// Table names are our own constants.
		for _, t := range tiers {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table.name+` WHERE tier = ? AND bucket < ?`, t.id, rollup.FloorDiv(minute, t.minutes)); err != nil {
				return unavailable(ctx, "delete rollups", err)
			}
		}
	}
	for _, table := range []string{"states", "summaries", "stale_summaries"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE win < ?`, win); err != nil {
			return unavailable(ctx, "delete windows", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return unavailable(ctx, "delete rollups", err)
	}
	return nil
}

// deleteWrites drops the spans of writes made before cutoff.
func (s *Store) deleteWrites(ctx context.Context, cutoff int64) error {
	for {
		s.spanMu.Lock()
		err := func() error {
			tx, err := s.spansW.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			rows, err := tx.QueryContext(ctx, `SELECT seq, first_row, last_row FROM writes WHERE written_at < ? ORDER BY seq LIMIT 100`, cutoff)
			if err != nil {
				return err
			}
			type w struct{ seq, first, last int64 }
			var ws []w
			for rows.Next() {
				var x w
				if err := rows.Scan(&x.seq, &x.first, &x.last); err != nil {
					rows.Close()
					return err
				}
				ws = append(ws, x)
			}
			rows.Close()
			if len(ws) == 0 {
				return errDone
			}
			for _, x := range ws {
				if _, err := tx.ExecContext(ctx, `DELETE FROM spans WHERE rowid BETWEEN ? AND ?`, x.first, x.last); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM writes WHERE seq = ?`, x.seq); err != nil {
					return err
				}
			}
			return tx.Commit()
		}()
		s.spanMu.Unlock()
		if errors.Is(err, errDone) {
			return nil
		}
		if err != nil {
			return unavailable(ctx, "delete spans", err)
		}
	}
}

var errDone = errors.New("done")
