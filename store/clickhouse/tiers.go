package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store/internal/rollup"
	"github.com/stormradius/stormradius/store/internal/tiers"
)

// The tier caches (store/internal/tiers) keep what Report, APISeries,
// HotMinutes and LastMinute read of bucket ranges, so that after a write
// only the ranges it changed are read again: a week is its closed days
// from memory and the open minute from the server. This process's writes
// drop their minutes as they return (the tracker's OnMove), another's
// when the change log says so (changes.go); minutes being written
// elsewhere are held (read live); a failed read of the log drops all.

// newTiers makes the tier caches.
func (c *core) newTiers() {
	c.flights = map[flightKey]*flight{}
	held := c.feed.isHeld
	c.tiers = tiers.New(tiers.Config[*analysis.Report]{Max: tiers.DefaultMax, MaxEntry: tiers.DefaultMaxEntry, Size: tiers.ReportSize,
		Minutes: tierMinutes, Held: held})
	c.hot = tiers.New(tiers.Config[analysis.MinuteNodes]{Max: tiers.DefaultMax / 4, MaxEntry: tiers.DefaultMaxEntry, Size: hotSize,
		Minutes: tierMinutes, Held: held})
	c.last = tiers.New(tiers.Config[lastMinute]{Max: 1 << 20, MaxEntry: 1 << 10, Size: func(lastMinute) int64 { return 128 },
		Minutes: tierMinutes, Held: held})
}

// invalidate drops what the tiers keep of minutes [lo, hi).
func (c *core) invalidate(lo, hi int64) {
	c.tiers.Invalidate(lo, hi)
	c.hot.Invalidate(lo, hi)
	c.last.Invalidate(lo, hi)
}

// clearTiers drops everything the tiers keep.
func (c *core) clearTiers() {
	c.tiers.Clear()
	c.hot.Clear()
	c.last.Clear()
}

// lastMinute is a LastMinute answer.
type lastMinute struct {
	m  int64
	ok bool
}

// lastHints are the latest LastMinute answers by range, kept across
// writes: where to look first.
type lastHints struct {
	mu sync.Mutex
	m  map[tiers.Key]int64
}

// maxLastHints bounds the hints kept.
const maxLastHints = 256

func (s *Store) lastHint(k tiers.Key) (int64, bool) {
	s.hints.mu.Lock()
	defer s.hints.mu.Unlock()
	m, ok := s.hints.m[k]
	return m, ok
}

func (s *Store) setLastHint(k tiers.Key, m int64) {
	s.hints.mu.Lock()
	defer s.hints.mu.Unlock()
	if s.hints.m == nil || len(s.hints.m) >= maxLastHints {
		s.hints.m = map[tiers.Key]int64{}
	}
	s.hints.m[k] = m
}

// hotSize estimates the memory hot minutes hold.
func hotSize(m analysis.MinuteNodes) int64 {
	n := int64(64)
	for _, nodes := range m {
		n += 96 + 128*int64(len(nodes))
	}
	return n
}

// cachedHotMinutes is HotMinutes through the tier cache, an hour (cut
// at the minutes written lately) at a time.
func (s *Store) cachedHotMinutes(ctx context.Context, lo, hi int64, minOwned int64, minRate float64) (analysis.MinuteNodes, error) {
	name := fmt.Sprintf("\x00hot\x00%d/%g", minOwned, minRate)
	var rs []bucketRange
	for a := lo; a < hi; {
		b := min(hi, (rollup.FloorDiv(a, 60)+1)*60)
		rs = append(rs, bucketRange{tierMinute, a, b})
		a = b
	}
	out := analysis.MinuteNodes{}
	for _, r := range cut(rs, s.hotEdges()) {
		k := tierKey(r, name)
		v, ok, gen := s.hot.Lookup(k)
		if !ok {
			s.hot.Reads.Add(1)
			var err error
			if v, err = s.readHotMinutes(ctx, r.lo, r.hi, minOwned, minRate); err != nil {
				return nil, err
			}
			s.hot.Put(k, v, gen)
		}
		// Shared: the minutes' maps are the kept ones, never modified.
		maps.Copy(out, v)
	}
	return out, nil
}

// hotEdges returns the minutes at which minute ranges are cut: the edges
// of the latest short writes and of the held minutes, so that what is
// written lately is read again alone and the rest stays kept.
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
	out = append(out, s.feed.heldEdges()...)
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
// all, or a prefixed name).
func tierKey(r bucketRange, name string) tiers.Key {
	return tiers.Key{Tier: int(r.tier), Lo: r.lo, Hi: r.hi, Name: name}
}

// cachedReport is Report through the tier cache: each range kept, or
// projected on api from its report of every API, or read for every API
// in one query grouped by range; a range another report is reading is
// waited for.
func (s *Store) cachedReport(ctx context.Context, rs []bucketRange, api string) (*analysis.Report, error) {
	rs = cut(rs, s.hotEdges())
	rep := analysis.NewReport()
	type miss struct {
		r   bucketRange
		gen uint64
	}
	var misses []miss
	for _, r := range rs {
		v, ok, gen := s.tiers.Lookup(tierKey(r, api))
		if !ok && api != "" {
			if all, ok2, _ := s.tiers.Lookup(tierKey(r, "")); ok2 {
				v, ok = projectAPI(all, api), true
				s.tiers.Put(tierKey(r, api), v, gen)
			}
		}
		if ok {
			rep.Merge(v, 1)
			continue
		}
		misses = append(misses, miss{r, gen})
	}
	if len(misses) == 0 {
		return rep, nil
	}
	var mine []*flight
	var theirs []*flight
	s.flightMu.Lock()
	for _, m := range misses {
		k := flightKey{tierKey(m.r, ""), m.gen}
		if f := s.flights[k]; f != nil {
			theirs = append(theirs, f)
			continue
		}
		f := &flight{r: m.r, gen: m.gen, done: make(chan struct{})}
		s.flights[k] = f
		mine = append(mine, f)
	}
	s.flightMu.Unlock()
	if len(mine) > 0 {
		err := s.readRanges(ctx, mine)
		s.flightMu.Lock()
		for _, f := range mine {
			delete(s.flights, flightKey{tierKey(f.r, ""), f.gen})
			f.err = err
			close(f.done)
		}
		s.flightMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	for _, f := range theirs {
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			return nil, f.err
		}
	}
	for _, f := range append(mine, theirs...) {
		v := f.rep
		if api != "" {
			v = projectAPI(v, api)
			s.tiers.Put(tierKey(f.r, api), v, f.gen)
		}
		rep.Merge(v, 1)
	}
	return rep, nil
}

// flight is a range's report of every API being read.
type flight struct {
	r    bucketRange
	gen  uint64 // the cache's generation the read began at
	done chan struct{}
	rep  *analysis.Report // when done, unless err
	err  error
}

// flightKey is a range being read, from a generation.
type flightKey struct {
	k   tiers.Key
	gen uint64
}

// readRanges reads and keeps the flights' reports in one query.
func (s *Store) readRanges(ctx context.Context, fs []*flight) error {
	s.tiers.Reads.Add(int64(len(fs)))
	conds := make([]string, len(fs))
	for i, f := range fs {
		conds[i] = where([]bucketRange{f.r})
		f.rep = analysis.NewReport()
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
	err := s.query(light(ctx), "read rollups", `SELECT toUInt32(`+index+`) AS r, toInt8(stat), api, service, operation, value, sum(n) FROM rollups WHERE `+
		cond+` AND `+s.current(cond)+` GROUP BY r, stat, api, service, operation, value`, func(r driver.Rows) error {
		var i uint32
		var k rowKey
		var n int64
		if err := r.Scan(&i, &k.stat, &k.api, &k.svc, &k.op, &k.value, &n); err != nil {
			return err
		}
		if int(i) < len(fs) {
			addRow(fs[i].rep, k, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range fs {
		s.tiers.Put(tierKey(f.r, ""), f.rep, f.gen)
	}
	return nil
}

// projectAPI returns api's report from rep (every API's): its own
// figures and those not per API.
func projectAPI(rep *analysis.Report, api string) *analysis.Report {
	out := analysis.NewReport()
	eachRow(rep, func(k rowKey, n int64) {
		if f := figureOf[uint8(k.stat)]; f != nil && (k.api == api || !f.Scope.PerAPI()) {
			addRow(out, k, n)
		}
	})
	return out
}

// sumsKept are the summaries of window ranges read lately, each at the
// core.sumGen it was read at.
type sumsKept struct {
	mu sync.Mutex
	m  map[[2]int64]sumsEntry
}

type sumsEntry struct {
	gen uint64
	out []*analysis.WindowSummary
}

// maxSumsKept bounds the ranges kept.
const maxSumsKept = 64

func (k *sumsKept) get(lo, hi int64, gen uint64) ([]*analysis.WindowSummary, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[[2]int64{lo, hi}]
	return e.out, ok && e.gen == gen
}

func (k *sumsKept) put(lo, hi int64, gen uint64, out []*analysis.WindowSummary) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxSumsKept {
		k.m = map[[2]int64]sumsEntry{}
	}
	k.m[[2]int64{lo, hi}] = sumsEntry{gen, out}
}
