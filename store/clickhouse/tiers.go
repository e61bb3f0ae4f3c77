package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store/internal/tiers"
)

// Tiers kept in memory (store/internal/tiers): the reports of the rollup
// bucket ranges Report and APISeries read lately, so that after a write
// they read from the server only the ranges the write changed: a week is
// its closed days from memory and the open minute from the rollups.
//
// What a write changed is known from the minute markers (dirty_by_part),
// which every writer of the database inserts before it changes a minute's
// rollups (dirty) and after they are durable (clean, with its next Apply
// or Close):
//
//   - this process's writes (Apply of any partition view) drop the ranges
//     of the minutes they touched as they return (the tracker's OnMove);
//     their markers are known by their versions (own) and skipped;
//   - another process's markers are read when the database's fingerprint
//     moves (readPosition, at most every position.DefaultEvery, and after
//     each write of this process, before its position moves): the rows of
//     the parts of dirty_by_part not read before, each key's newer
//     versions only (merges bring old rows back in new parts). Each
//     minute they name is dropped; a minute another process marked dirty
//     and not yet clean is held: ranges holding it are read each time,
//     since its rollups may change at any moment with nothing to tell
//     (its clean marker drops it once more);
//   - retention (DeleteBefore) drops everything; another process's moves
//     the floor, which keys the ranges (Report reads from it on).
//
// A marker is inserted before the rollups it covers, so a reader that
// sees another process's rollup change sees its marker in the same read or
// before. A read that fails drops everything and reads the markers anew.
// On a cluster the tiers are off (parts are the shards'): every report
// reads the server, as before.

// Bounds of the kept reports' memory (estimated) and of one report's.
const (
	defaultTierBytes = 32 << 20
	maxTierEntry     = 1 << 20
)

// markKey is a minute marker's key: the minute, the partition.
type markKey struct {
	minute int64
	part   string
}

// marks is what readMarks knows of the markers (under the tracker's
// lock, but held and own, see their locks).
type marksSeen struct {
	known  bool // the markers were read since the last failure
	fp     uint64
	parts  map[string]bool    // the active parts read
	latest map[markKey]uint64 // each key's newest version read

	heldMu sync.Mutex
	held   map[markKey]struct{} // another process's minutes dirty
	heldN  map[int64]int        // minutes of held, with how many partitions

	ownMu sync.Mutex
	own   map[uint64]struct{} // versions of this process's markers not read back yet
}

// newTiers returns the tier cache of a store on one server.
func (c *core) newTiers() {
	c.marks = &marksSeen{parts: map[string]bool{}, latest: map[markKey]uint64{}, held: map[markKey]struct{}{},
		heldN: map[int64]int{}, own: map[uint64]struct{}{}}
	c.tiers = tiers.New(tiers.Config[*analysis.Report]{Max: defaultTierBytes, MaxEntry: maxTierEntry, Size: reportSize,
		Minutes: func(tier int) int64 { return minutesPer[tier] }, Held: c.marks.isHeld})
}

// isHeld reports whether minutes [lo, hi) hold a minute another process
// marked dirty (the cache's Held).
func (m *marksSeen) isHeld(lo, hi int64) bool {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	if hi-lo > int64(len(m.heldN)) {
		for x := range m.heldN {
			if lo <= x && x < hi {
				return true
			}
		}
		return false
	}
	for x := lo; x < hi; x++ {
		if m.heldN[x] > 0 {
			return true
		}
	}
	return false
}

// heldMinutes returns the held minutes.
func (m *marksSeen) heldMinutes() []int64 {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	return slices.Collect(maps.Keys(m.heldN))
}

func (m *marksSeen) setHeld(k markKey, held bool) {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	_, was := m.held[k]
	switch {
	case held && !was:
		m.held[k] = struct{}{}
		m.heldN[k.minute]++
	case !held && was:
		delete(m.held, k)
		if m.heldN[k.minute]--; m.heldN[k.minute] <= 0 {
			delete(m.heldN, k.minute)
		}
	}
}

// ownVersion records v as the version of markers this process inserts
// (before they are inserted).
func (m *marksSeen) ownVersion(v uint64) {
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	m.own[v] = struct{}{}
}

// ownAge is how long an own version waits to be read back (an insert
// that failed is never read).
const ownAge = 10 * time.Minute

// readMarks reads the minute markers of the parts of dirty_by_part not
// read before (readPosition, under the tracker's lock): drops the
// ranges of the minutes another process changed, holds those it left
// dirty.
func (s *Store) readMarks(ctx context.Context) error {
	m := s.marks
	active := map[string]bool{}
	var fresh []string
	err := s.query(ctx, "read marker parts", `SELECT name FROM system.parts WHERE database = `+quote(s.db)+
		` AND table = 'dirty_by_part' AND active`, func(r driver.Rows) error {
		var name string
		if err := r.Scan(&name); err != nil {
			return err
		}
		active[name] = true
		if !m.parts[name] {
			fresh = append(fresh, quote(name))
		}
		return nil
	})
	if err != nil {
		return err
	}
	type row struct {
		k       markKey
		dirty   bool
		version uint64
	}
	var rows []row
	if len(fresh) > 0 {
		slices.Sort(fresh)
		err := s.query(ctx, "read markers", `SELECT id, part, dirty, version FROM dirty_by_part WHERE kind = 'minute' AND _part IN (`+
			strings.Join(fresh, ", ")+`)`, func(r driver.Rows) error {
			var x row
			var d uint8
			if err := r.Scan(&x.k.minute, &x.k.part, &d, &x.version); err != nil {
				return err
			}
			x.dirty = d != 0
			rows = append(rows, x)
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmpU(a.version, b.version) })
	m.ownMu.Lock()
	own := maps.Clone(m.own)
	m.ownMu.Unlock()
	var changed []int64
	for _, x := range rows {
		if x.version <= m.latest[x.k] {
			continue // read before, in a part merged since
		}
		m.latest[x.k] = x.version
		if _, ok := own[x.version]; ok {
			m.setHeld(x.k, false)
			continue
		}
		m.setHeld(x.k, x.dirty)
		changed = append(changed, x.k.minute)
	}
	m.parts = active
	m.ownMu.Lock()
	old := uint64(time.Now().Add(-ownAge).UnixNano())
	for _, x := range rows {
		delete(m.own, x.version)
	}
	for v := range m.own {
		if v < old {
			delete(m.own, v)
		}
	}
	m.ownMu.Unlock()
	if !m.known {
		s.tiers.Clear() // kept before the markers were known
		m.known = true
		return nil
	}
	if len(changed) == 0 && len(fresh) > 0 {
		// A change with no marker (another process's retention moved the
		// floor, a summary, a state): the floor is read again at once.
		s.floorMu.Lock()
		s.floorRead = time.Time{}
		s.floorMu.Unlock()
	}
	slices.Sort(changed)
	for i := 0; i < len(changed); {
		j := i + 1
		for j < len(changed) && changed[j] <= changed[j-1]+1 {
			j++
		}
		s.tiers.Invalidate(changed[i], changed[j-1]+1)
		i = j
	}
	return nil
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// forgetMarks drops everything kept: the markers could not be read.
func (s *Store) forgetMarks() {
	s.marks.known = false
	s.marks.parts = map[string]bool{}
	s.tiers.Clear()
}

// reportSize estimates the memory a report holds.
func reportSize(r *analysis.Report) int64 {
	n := int64(512 + 160*(len(r.Services)+len(r.Nodes)+len(r.Versions)))
	for _, a := range r.APIs {
		n += 384 + int64(48*(len(a.Radius)+len(a.Amplification))+160*len(a.Owners))
	}
	return n
}

// hotEdges returns the minutes at which minute ranges are cut: the edges
// of the latest writes of a few minutes and of the held minutes, so that
// the minutes written lately are ranges of their own, read again alone
// after each write, and the rest of a range stays kept.
func (s *Store) hotEdges() []int64 {
	var out []int64
	n := 0
	s.tiers.Recent(func(lo, hi int64) bool {
		if hi > lo && hi-lo <= 10 {
			out = append(out, lo, hi)
		}
		n++
		return n < 16
	})
	for _, x := range s.marks.heldMinutes() {
		out = append(out, x, x+1)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// cut splits the minute ranges of rs at the edges.
func cut(rs []bucketRange, edges []int64) []bucketRange {
	if len(edges) == 0 {
		return rs
	}
	out := make([]bucketRange, 0, len(rs)+2)
	for _, r := range rs {
		if r.tier != tierMinute {
			out = append(out, r)
			continue
		}
		lo := r.lo
		for _, e := range edges {
			if e > lo && e < r.hi {
				out = append(out, bucketRange{tierMinute, lo, e})
				lo = e
			}
		}
		out = append(out, bucketRange{tierMinute, lo, r.hi})
	}
	return out
}

// tierKey is the cache's key of a range read for name (an API, "" for
// all; series prefix theirs).
func tierKey(r bucketRange, name string) tiers.Key {
	return tiers.Key{Tier: int(r.tier), Lo: r.lo, Hi: r.hi, Name: name}
}

// cachedReport is Report through the tier cache: each range kept or read,
// the ranges missing in one query grouped by range.
func (s *Store) cachedReport(ctx context.Context, rs []bucketRange, api string) (*analysis.Report, error) {
	rs = cut(rs, s.hotEdges())
	rep := analysis.NewReport()
	type miss struct {
		r   bucketRange
		gen uint64
		rep *analysis.Report
	}
	var misses []miss
	for _, r := range rs {
		v, ok, gen := s.tiers.Lookup(tierKey(r, api))
		if ok {
			rep.Merge(v, 1)
			continue
		}
		misses = append(misses, miss{r, gen, analysis.NewReport()})
	}
	if len(misses) == 0 {
		return rep, nil
	}
	s.tiers.Reads.Add(int64(len(misses)))
	conds := make([]string, len(misses))
	for i, m := range misses {
		conds[i] = where([]bucketRange{m.r})
	}
	// The range of each row: multiIf(c0, 0, c1, 1, …, n-1).
	index := "0"
	if len(conds) > 1 {
		var b strings.Builder
		b.WriteString("multiIf(")
		for i, c := range conds[:len(conds)-1] {
			fmt.Fprintf(&b, "%s, %d, ", c, i)
		}
		fmt.Fprintf(&b, "%d)", len(conds)-1)
		index = b.String()
	}
	cond := "(" + strings.Join(conds, " OR ") + ")"
	sel := cond + " AND " + s.current(cond)
	if api != "" {
		// Totals, services and nodes are not per API.
		sel += " AND (api = " + quote(api) + " OR toInt8(stat) IN (" + notPerAPI + "))"
	}
	err := s.query(ctx, "read rollups", `SELECT toUInt32(`+index+`) AS r, toInt8(stat), api, service, operation, value, sum(n) FROM rollups WHERE `+
		sel+` GROUP BY r, stat, api, service, operation, value`, func(r driver.Rows) error {
		var i uint32
		var k rowKey
		var n int64
		if err := r.Scan(&i, &k.stat, &k.api, &k.svc, &k.op, &k.value, &n); err != nil {
			return err
		}
		if int(i) < len(misses) {
			addRow(misses[i].rep, k, n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, m := range misses {
		s.tiers.Put(tierKey(m.r, api), m.rep, m.gen)
		rep.Merge(m.rep, 1)
	}
	return rep, nil
}
