package sqlite

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/stormradius/stormradius/analysis"
)

// tierCache keeps, in memory, the reports of the rollup bucket ranges
// Report read lately (ranges: whole days, hours, ten minutes, minutes),
// so that a report reads from the database only the ranges a write
// changed since: a week is its closed days from memory and the open hour's
// minutes from the rollups. Each write drops the ranges holding the
// minutes it touched (the position tracker's OnMove: this process's
// Apply says which; another process's write, seen by the fingerprint, or
// retention, drops everything). A report read while a write touched its
// minutes is not kept: it may hold the state before the write.
//
// The reports it returns are shared: callers merge them into reports of
// their own and never modify them.
type tierCache struct {
	max int64 // bytes, estimated (reportSize)

	mu   sync.Mutex
	used int64
	m    map[tierKey]tierEntry
	gen  uint64      // invalidations so far
	log  []tierDrop  // the latest invalidations, oldest first
	drop func(int64) // tests: called with the bytes dropped

	reads atomic.Int64 // ranges read from the database (tests)
}

// tierKey is one bucket range of one tier, for all APIs ("") or one.
type tierKey struct {
	tier   int
	lo, hi int64 // buckets
	api    string
}

// minutes returns the minutes [lo, hi) the range covers.
func (k tierKey) minutes() (lo, hi int64) {
	size := tierSize(k.tier)
	return mulClamp(k.lo, size), mulClamp(k.hi, size)
}

// mulClamp returns a·b held to the ends of int64 (ranges of unbounded
// queries reach them).
func mulClamp(a, b int64) int64 {
	const lim = 1 << 62
	switch {
	case a > lim/b:
		return lim
	case a < -lim/b:
		return -lim
	}
	return a * b
}

type tierEntry struct {
	rep  *analysis.Report
	size int64
}

// tierDrop is one invalidation: minutes [lo, hi) as of generation gen.
type tierDrop struct {
	gen    uint64
	lo, hi int64
}

// tierLog is how many invalidations are remembered: a read that began
// before the oldest one is not kept.
const tierLog = 64

// defaultTierBytes bounds the tier cache's memory (estimated), and
// maxTierEntry one report's: a range of thousands of root APIs (a
// cardinality attack's) is read each time rather than kept.
const (
	defaultTierBytes = 32 << 20
	maxTierEntry     = 1 << 20
)

func newTierCache(max int64) *tierCache {
	return &tierCache{max: max, m: map[tierKey]tierEntry{}}
}

// lookup returns the kept report of k, or nil and the generation a read
// of it begins at (for put).
func (c *tierCache) lookup(k tierKey) (*analysis.Report, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k].rep, c.gen
}

// put keeps rep as k's, read from generation gen on, unless an
// invalidation since touched k's minutes (or is too old to tell). When
// the bound is reached everything is dropped: the next reads fill it with
// what is asked now.
func (c *tierCache) put(k tierKey, rep *analysis.Report, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		if len(c.log) == 0 || c.log[0].gen > gen+1 {
			return // invalidations older than the log remembers
		}
		lo, hi := k.minutes()
		for _, d := range c.log {
			if d.gen > gen && d.lo < hi && lo < d.hi {
				return
			}
		}
	}
	size := reportSize(rep)
	if size > c.max || size > maxTierEntry {
		return
	}
	if old, ok := c.m[k]; ok {
		c.used -= old.size
	}
	if c.used+size > c.max {
		c.dropAll()
	}
	c.m[k] = tierEntry{rep, size}
	c.used += size
}

// invalidate drops the ranges holding minutes [lo, hi) (the tracker's
// OnMove).
func (c *tierCache) invalidate(lo, hi int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.log = append(c.log, tierDrop{c.gen, lo, hi})
	if len(c.log) > tierLog {
		c.log = append(c.log[:0], c.log[len(c.log)-tierLog:]...)
	}
	if lo >= hi {
		return
	}
	for k, e := range c.m {
		if klo, khi := k.minutes(); klo < hi && lo < khi {
			delete(c.m, k)
			c.used -= e.size
		}
	}
}

func (c *tierCache) dropAll() {
	if c.drop != nil {
		c.drop(c.used)
	}
	clear(c.m)
	c.used = 0
}

// reportSize estimates the memory a report holds.
func reportSize(r *analysis.Report) int64 {
	n := int64(512 + 160*(len(r.Services)+len(r.Nodes)+len(r.Versions)))
	for _, a := range r.APIs {
		n += 384 + int64(48*(len(a.Radius)+len(a.Amplification))+160*len(a.Owners))
	}
	return n
}

// cachedRange returns the report of one bucket range: kept, or read and
// kept.
func (s *Store) cachedRange(ctx context.Context, br bucketRange, api string) (*analysis.Report, error) {
	k := tierKey{br.tier, br.lo, br.hi, api}
	rep, gen := s.tiers.lookup(k)
	if rep != nil {
		return rep, nil
	}
	s.tiers.reads.Add(1)
	rep, err := s.reportRange(ctx, br, api)
	if err != nil {
		return nil, err
	}
	s.tiers.put(k, rep, gen)
	return rep, nil
}
