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

// State returns the partition's stored state of window w, and whether it
// is exact (the sum of the facts of the partition's records of w): not
// when the window's latest dirty mark (Apply, a record moved away,
// retention cutting it) is newer than its latest state. A dirty window
// without a state is returned empty: the caller rebuilds it (WindowRecords).
func (s *Store) State(ctx context.Context, w int64) (*analysis.State, bool, error) {
	if err := s.checkOpen("read state"); err != nil {
		return nil, false, err
	}
	if w < s.floorWindow(ctx) {
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

// putSummaries inserts the summaries, then clears their stale marks.
func (s *Store) putSummaries(ctx context.Context, sums []*analysis.WindowSummary) error {
	v := s.versions(len(sums) + 1)
	days, wins, vers, encs := make([]time.Time, len(sums)), make([]int64, len(sums)), make([]uint64, len(sums)), make([]string, len(sums))
	for i, w := range sums {
		// The binary form (analysis.DecodeSummary): a String holds any bytes.
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
	return queryColumn[int64](ctx, s, "read stale summaries", `SELECT id FROM (SELECT id, dirty FROM dirty_by_part FINAL `+
		`WHERE kind = 'summary' AND id >= `+itoa(s.floorWindow(ctx))+` AND part = '') WHERE dirty = 1 ORDER BY id`)
}

// Summaries returns the summaries of windows lo..hi, oldest first.
func (s *Store) Summaries(ctx context.Context, lo, hi int64) ([]*analysis.WindowSummary, error) {
	if err := s.checkOpen("read summaries"); err != nil {
		return nil, err
	}
	lo, hi = clamp(max(lo, s.floorWindow(ctx)), minBound, maxBound), clamp(hi, minBound, maxBound)
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

// floorWindow returns the first window the retention floor keeps
// (minBound without a floor).
func (s *Store) floorWindow(ctx context.Context) int64 {
	if f := s.retentionFloor(ctx); f != 0 {
		return analysis.WindowOf(f, s.window)
	}
	return minBound
}

// dayTables are partitioned by day (record_index by month), windowTables
// by their window's first day.
var (
	dayTables    = ttlTables
	windowTables = []string{"states_by_part", "summaries", "dirty_by_part"}
)

// DeleteBefore deletes what started (spans: was written) before the UTC
// day holding t, of every partition: it records the retention floor,
// which reads honour, then drops the day partitions before it (no scan,
// no mutation).
func (s *Store) DeleteBefore(ctx context.Context, t int64) error {
	if err := s.checkWrite("delete"); err != nil {
		return err
	}
	defer s.pos.Wrote(position.AllLo, position.AllHi)
	defer s.sumGen.Add(1)
	defer s.watch.moveAll()
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
		// The floor cuts window fw: its states count records that are gone.
		if err := s.markCut(ctx, fw); err != nil {
			return err
		}
	}
	day := dayOf(floor)
	winDay := min(day, dayOf(fw*int64(s.window))) // a window across the floor keeps its day
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
			// A month partition goes once the whole month is before the floor.
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

// markCut marks window w dirty in the store's partition and every other
// that stored a state of it.
func (s *Store) markCut(ctx context.Context, w int64) error {
	parts, err := queryColumn[string](ctx, s, "list window partitions", `SELECT DISTINCT part FROM states_by_part WHERE win = `+itoa(w))
	if err != nil {
		return err
	}
	m := marks{windows: []int64{w}}
	for _, p := range parts {
		if p != s.name {
			m.others = append(m.others, partWindow{p, w})
		}
	}
	return s.mark(ctx, s.versions(1), m)
}
