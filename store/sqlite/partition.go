package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// Partitions (store.Partitioned). A partition's span writes (writes.part),
// records (records.part) and part of each window state (a row of states
// per window and partition) are tagged with its name; its checkpoint is
// the meta key "watermark/<p>" and its lease the row "analysis/<p>" (the
// store itself, partition "", keeps "watermark" and "analysis"). Span
// sequences stay global: they increase within each partition as well.
// Rollups, summaries and their stale marks stay the store's: each batch
// changes them in the transaction that changes its records, so they are
// the exact sum of every partition's.

// Partition returns the view of partition p: a handle sharing the store's
// databases, with its own lease and write fence, so that a view whose
// lease is lost refuses its writes and no other's. Its Close releases its
// lease (and makes it refuse writes); the store's Close closes every view.
// On a read-only store the views read, and refuse writes with
// store.ErrReadOnly.
func (s *Store) Partition(p string) (store.PartitionStore, error) {
	if err := store.CheckPartition(p); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	v := handle(s.shared, p, true)
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("sqlite: partition %q: %w", p, store.ErrClosed)
	}
	s.views[v] = struct{}{}
	return v, nil
}

// closeView releases a view's lease; the store stays open.
func (s *Store) closeView() error {
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	if s.viewClosed.Swap(true) || s.closed { // the store's Close released it
		return nil
	}
	delete(s.views, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.ReleaseLease(ctx)
}

// closeViews closes the open views of the store, before it closes the
// databases: their leases are released, so that the processes that take
// them over need not wait for them to expire.
func (s *Store) closeViews(ctx context.Context) error {
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	s.closed = true
	var errs []error
	for v := range s.views {
		v.viewClosed.Store(true)
		errs = append(errs, v.ReleaseLease(ctx))
	}
	clear(s.views)
	return errors.Join(errs...)
}

// PeerState returns the sum of the states of window w that the other
// partitions stored.
func (s *Store) PeerState(ctx context.Context, w int64) (*analysis.State, error) {
	rows, err := s.resR.QueryContext(ctx, `SELECT part, state FROM states WHERE win = ? AND part <> ? AND state IS NOT NULL`, w, s.part)
	if err != nil {
		return nil, unavailable(ctx, "read peer states", err)
	}
	defer rows.Close()
	sum := analysis.NewState()
	for rows.Next() {
		var p string
		var b []byte
		if err := rows.Scan(&p, &b); err != nil {
			return nil, unavailable(ctx, "read peer states", err)
		}
		st := analysis.NewState()
		if err := json.Unmarshal(b, st); err != nil {
			return nil, fmt.Errorf("sqlite: state of window %d, partition %q: %w: %w", w, p, store.ErrCorrupt, err)
		}
		sum.Merge(st, 1)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(ctx, "read peer states", err)
	}
	return sum, nil
}

// PeerWindows returns the windows whose state another partition stored
// (or emptied) at or after since, in order.
func (s *Store) PeerWindows(ctx context.Context, since int64) ([]int64, error) {
	rows, err := s.resR.QueryContext(ctx, `SELECT DISTINCT win FROM states INDEXED BY states_by_written WHERE written >= ? AND part <> ? ORDER BY win`, since, s.part)
	if err != nil {
		return nil, unavailable(ctx, "read peer windows", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var w int64
		if err := rows.Scan(&w); err != nil {
			return nil, unavailable(ctx, "read peer windows", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(ctx, "read peer windows", err)
	}
	return out, nil
}

// SharedTraces returns, of ids, those whose spans another partition also
// wrote (store.Routing), each with one such partition's name: a span row
// is its write's (spans.seq), the write its partition's.
func (s *Store) SharedTraces(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]string, error) {
	out := map[graph.TraceID]string{}
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, 0, len(chunk)+1)
		args = append(args, s.part)
		for _, id := range chunk {
			args = append(args, id[:])
		}
		q := `SELECT s.trace_id, MIN(w.part) FROM spans s JOIN writes w ON w.seq = s.seq WHERE w.part <> ? AND s.trace_id IN (?` +
			strings.Repeat(",?", len(chunk)-1) + `) GROUP BY s.trace_id`
		rows, err := s.spansR.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, unavailable(ctx, "read shared traces", err)
		}
		for rows.Next() {
			var b []byte
			var part string
			if err := rows.Scan(&b, &part); err != nil {
				rows.Close()
				return nil, unavailable(ctx, "read shared traces", err)
			}
			var id graph.TraceID
			copy(id[:], b)
			out[id] = part
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, unavailable(ctx, "read shared traces", err)
		}
	}
	return out, nil
}

// PartitionName is the view's partition (store.Routing).
func (s *Store) PartitionName() string { return s.part }

// positionKey is the meta key of the partition's source position.
func (s *Store) positionKey() string {
	if s.part == "" {
		return "source_position"
	}
	return "source_position/" + s.part
}

// SourcePosition returns the partition's source position (store.SourcePositions).
func (s *Store) SourcePosition(ctx context.Context) (int64, bool, error) {
	var v int64
	err := s.resR.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, s.positionKey()).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, unavailable(ctx, "read source position", err)
	}
	return v, true, nil
}

// SetSourcePosition stores the partition's source position (store.SourcePositions).
func (s *Store) SetSourcePosition(ctx context.Context, v int64) error {
	if err := s.fence("put source position"); err != nil {
		return err
	}
	if _, err := s.resW.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, s.positionKey(), v); err != nil {
		return unavailable(ctx, "put source position", err)
	}
	return nil
}
