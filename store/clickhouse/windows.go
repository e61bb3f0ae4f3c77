package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/position"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

// State returns the store's partition's stored state of window w, and
// whether it is exact: known to be the sum of the facts of the window's
// records the partition stored.
//
// Records and states are written by separate inserts, so a crash, or an
// Apply that fails half way, can leave a window's records changed and its
// state not. A clean-shutdown flag cannot tell which windows that hit (nor
// survive a reader process opening and closing the database meanwhile),
// so exactness is tracked per window, in the database: Apply marks every
// window whose records it changes dirty before it writes anything, and
// writes the states it is given after the records, with a higher version.
// A window is exact unless its latest dirty mark is newer than its latest
// state: whatever process applied, crashed, reopened or read in between.
// Marks and states are each partition's (another partition that takes
// one of its records marks its window dirty: its state counts it).
// Retention that cuts a window in two (a window that does not divide a
// day) marks it dirty as well. A dirty window without a stored state is
// returned empty and not exact (its records may exist), so the caller
// rebuilds it from WindowRecords.
func (s *Store) State(ctx context.Context, w int64) (*analysis.State, bool, error) {
	if err := s.checkOpen("read state"); err != nil {
		return nil, false, err
	}
	if f := s.retentionFloor(ctx); f != 0 && w < analysis.WindowOf(f, s.window) {
		return nil, true, fmt.Errorf("clickhouse: state of window %d: %w", w, store.ErrNotFound)
	}
	var (
		found   bool
		version uint64
		deleted uint8
		enc     string
	)
	err := s.query(ctx, "read state", `SELECT version, deleted, state FROM states_by_part WHERE win = `+itoa(w)+
		` AND part = `+quote(s.name), func(r driver.Rows) error {
		var v uint64
		var d uint8
		var e string
		if err := r.Scan(&v, &d, &e); err != nil {
			return err
		}
		if !found || v > version {
			found, version, deleted, enc = true, v, d, e
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	var dirty uint8
	var marked uint64
	if err := s.queryRow(ctx, "read state", `SELECT argMax(dirty, version), max(version) FROM dirty_by_part WHERE kind = 'window' AND id = `+
		itoa(w)+` AND part = `+quote(s.name), &dirty, &marked); err != nil {
		return nil, false, err
	}
	exact := dirty == 0 || marked < version
	if !found || deleted != 0 {
		if !exact {
			return analysis.NewState(), false, nil
		}
		return nil, true, fmt.Errorf("clickhouse: state of window %d: %w", w, store.ErrNotFound)
	}
	st := analysis.NewState()
	if err := json.Unmarshal([]byte(enc), st); err != nil {
		return nil, false, fmt.Errorf("clickhouse: state of window %d: %w: %w", w, store.ErrCorrupt, err)
	}
	return st, exact, nil
}

// PutSummaries stores window summaries, replacing those of the same
// windows.
func (s *Store) PutSummaries(ctx context.Context, sums []*analysis.WindowSummary) error {
	if err := s.checkWrite("put summaries"); err != nil {
		return err
	}
	defer s.pos.Wrote(0, 0) // no rollup changes
	defer s.sumGen.Add(1)   // first: the summaries kept are read again
	if len(sums) == 0 {
		return nil
	}
	c := change{wlo: sums[0].Window, whi: sums[0].Window + 1}
	for _, w := range sums {
		c.wlo, c.whi = min(c.wlo, w.Window), max(c.whi, w.Window+1)
	}
	return s.announced(ctx, c, func() error { return s.putSummaries(ctx, sums) })
}

// putSummaries is PutSummaries' inserts: the summaries, then their
// windows' stale marks cleared.
func (s *Store) putSummaries(ctx context.Context, sums []*analysis.WindowSummary) error {
	v := s.versions(len(sums) + 1)
	days, wins, vers, encs := make([]time.Time, len(sums)), make([]int64, len(sums)), make([]uint64, len(sums)), make([]string, len(sums))
	for i, w := range sums {
		// The binary form (analysis.DecodeSummary reads it back): a String
		// column holds any bytes.
		days[i], wins[i], vers[i], encs[i] = dayDate(dayOf(w.Window*int64(s.window))), w.Window, v+uint64(i), string(w.AppendBinary(nil))
	}
	if err := s.insert(ctx, "put summaries", "summaries", []string{"day", "win", "version", "summary"}, days, wins, vers, encs); err != nil {
		return err
	}
	return s.mark(ctx, v+uint64(len(sums)), marks{fresh: wins})
}

// StaleSummaries returns the windows whose state an Apply changed since
// their summary was last put (marked by Apply before it writes the states,
// cleared by PutSummaries after it writes the summaries).
func (s *Store) StaleSummaries(ctx context.Context) ([]int64, error) {
	if err := s.checkOpen("read stale summaries"); err != nil {
		return nil, err
	}
	lo := int64(minBound)
	if f := s.retentionFloor(ctx); f != 0 {
		lo = analysis.WindowOf(f, s.window)
	}
	var out []int64
	err := s.query(ctx, "read stale summaries", `SELECT id FROM (SELECT id, dirty FROM dirty_by_part FINAL WHERE kind = 'summary' AND id >= `+
		itoa(lo)+` AND part = '') WHERE dirty = 1 ORDER BY id`, func(r driver.Rows) error {
		var w int64
		if err := r.Scan(&w); err != nil {
			return err
		}
		out = append(out, w)
		return nil
	})
	return out, err
}

// Summaries returns the summaries of windows lo..hi, oldest first.
func (s *Store) Summaries(ctx context.Context, lo, hi int64) ([]*analysis.WindowSummary, error) {
	if err := s.checkOpen("read summaries"); err != nil {
		return nil, err
	}
	if f := s.retentionFloor(ctx); f != 0 {
		lo = max(lo, analysis.WindowOf(f, s.window))
	}
	lo, hi = clamp(lo, minBound, maxBound), clamp(hi, minBound, maxBound)
	// Kept while no summary may have changed.
	keep := s.cachesOn(ctx)
	gen := s.sumGen.Load()
	if keep {
		if out, ok := s.sumsKept.get(lo, hi, gen); ok {
			return out, nil
		}
	}
	var out []*analysis.WindowSummary
	err := s.query(ctx, "read summaries", `SELECT win, summary FROM summaries FINAL WHERE win >= `+itoa(lo)+` AND win <= `+itoa(hi)+
		` ORDER BY win`, func(r driver.Rows) error {
		var win int64
		var b []byte
		if err := r.Scan(&win, &b); err != nil {
			return err
		}
		w, err := s.sums.Decode(win, b)
		if err != nil {
			return fmt.Errorf("clickhouse: summary: %w: %w", store.ErrCorrupt, err)
		}
		out = append(out, w)
		return nil
	})
	if err == nil && keep {
		s.sumsKept.put(lo, hi, gen, out)
	}
	return out, err
}

// dayTables are the tables partitioned by day (record_index by month);
// windowTables those whose day is a window's first.
var (
	dayTables    = ttlTables
	windowTables = []string{"states_by_part", "summaries", "dirty_by_part"}
)

// DeleteBefore deletes what started before the UTC day holding t (spans:
// what was written before it), of every analysis partition. The retention floor is recorded first, and
// every read ignores what lies before it from then on; then the day
// partitions before it are dropped (ALTER TABLE … DROP PARTITION: no
// scan, no mutation; the record index's month partitions once the whole
// month is before it). Window states and summaries are partitioned by the
// day their window starts: a window that straddles the floor keeps its
// day's partition (the floor hides the rest of that day's windows).
func (s *Store) DeleteBefore(ctx context.Context, t int64) error {
	if err := s.checkWrite("delete"); err != nil {
		return err
	}
	defer s.pos.Wrote(position.AllLo, position.AllHi)
	defer s.sumGen.Add(1)
	defer s.watch.moveAll() // every trace's view: spans and records go
	defer s.gensKept.drop()
	return s.announced(ctx, change{everything: true}, func() error { return s.deleteBefore(ctx, t) })
}

// deleteBefore is DeleteBefore's writes: the floor, then the partitions.
func (s *Store) deleteBefore(ctx context.Context, t int64) error {
	cutoff := rollup.FloorDiv(t, nsPerDay) * nsPerDay
	s.floorMu.Lock()
	floor := max(s.floor, cutoff)
	s.floorMu.Unlock()
	if err := s.putMeta(ctx, map[string]int64{metaFloor: floor}); err != nil {
		return err
	}
	s.floorMu.Lock()
	s.floor = max(s.floor, floor)
	s.floorMu.Unlock()
	fw := analysis.WindowOf(floor, s.window)
	if fw*int64(s.window) < floor {
		// The floor cuts window fw (a window that does not divide a day):
		// its state counts records that are gone, in every partition.
		if err := s.markCut(ctx, fw); err != nil {
			return err
		}
	}
	day := dayOf(floor)
	winDay := min(day, dayOf(fw*int64(s.window)))
	type part struct{ table, id string }
	var drop []part
	seen := map[part]bool{} // a cluster's shards list a partition each
	err := s.query(ctx, "list partitions", `SELECT DISTINCT table, partition_id FROM `+s.partsSource()+` WHERE database = `+quote(s.db)+
		` AND active`, func(r driver.Rows) error {
		var p part
		if err := r.Scan(&p.table, &p.id); err != nil {
			return err
		}
		ok := true
		if s.cluster != "" {
			p.table, ok = strings.CutSuffix(p.table, localSuffix)
		}
		if !ok || !slices.Contains(dayTables, p.table) || seen[p] {
			return nil
		}
		seen[p] = true
		d, err := time.Parse("20060102", p.id)
		if err != nil {
			// A month partition goes once the whole month is before the
			// floor; what it keeps from before is ignored by readers.
			m, err := time.Parse("200601", p.id)
			if err == nil && dayOf(m.AddDate(0, 1, 0).UnixNano()) <= day {
				drop = append(drop, p)
			}
			return nil
		}
		limit := day
		if slices.Contains(windowTables, p.table) {
			limit = winDay
		}
		if dayOf(d.UnixNano()) < limit {
			drop = append(drop, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range drop {
		if err := s.exec(ctx, "drop partition", `ALTER TABLE `+s.dataTable(p.table)+` DROP PARTITION ID `+quote(p.id)); err != nil {
			return err
		}
	}
	return nil
}

// markCut marks window w dirty in every partition that stored a state of
// it, and in the store's.
func (s *Store) markCut(ctx context.Context, w int64) error {
	m := marks{windows: []int64{w}}
	err := s.query(ctx, "list window partitions", `SELECT DISTINCT part FROM states_by_part WHERE win = `+itoa(w),
		func(r driver.Rows) error {
			var p string
			if err := r.Scan(&p); err != nil {
				return err
			}
			if p != s.name {
				m.others = append(m.others, partWindow{p, w})
			}
			return nil
		})
	if err != nil {
		return err
	}
	return s.mark(ctx, s.versions(1), m)
}
