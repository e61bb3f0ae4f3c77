// Package tiers keeps, in memory, what a store read of ranges of rollup
// buckets (reports of whole days, hours, minutes…), so that a read after a
// write goes to the database for the ranges the write changed only: a
// week is its closed days from memory and the open minutes from the
// rollups. Each write drops the ranges holding the minutes it touched
// (Invalidate); a read that ran while a write touched its minutes is not
// kept, as it may hold the state before the write; a store may also hold
// minutes back (Config.Held: minutes another process is writing), whose
// ranges are then read each time.
//
// Values are shared: callers never modify what Lookup returns.
package tiers

import (
	"sync"
	"sync/atomic"

	"github.com/stormradius/stormradius/analysis"
)

// Default bounds of a cache of reports (Config.Max) and of one report
// (Config.MaxEntry): a range of thousands of root APIs (a cardinality
// attack's) is read each time rather than kept.
const (
	DefaultMax      = 32 << 20
	DefaultMaxEntry = 1 << 20
)

// Key is one range of buckets [Lo, Hi) of a tier, for a name (all root
// APIs "", one, or what else a store keeps by range).
type Key struct {
	Tier   int
	Lo, Hi int64 // buckets
	Name   string
}

// Config says how a cache measures what it keeps.
type Config[V any] struct {
	// Max bounds the bytes kept (estimated by Size); MaxEntry one
	// value's: a larger one is read each time.
	Max, MaxEntry int64
	// Size estimates the memory a value holds.
	Size func(V) int64
	// Minutes returns the length of a bucket of a tier, in minutes.
	Minutes func(tier int) int64
	// Held, when set, reports whether minutes [lo, hi) hold one that is
	// not to be kept (called under the cache's lock).
	Held func(lo, hi int64) bool
}

// Cache keeps values by range; it is safe for concurrent use.
type Cache[V any] struct {
	cfg Config[V]

	mu   sync.Mutex
	used int64
	m    map[Key]entry[V]
	gen  uint64      // invalidations so far
	log  []drop      // the latest invalidations, oldest first
	drop func(int64) // tests: called with the bytes dropped

	// Reads counts the ranges read from the database (the stores' tests).
	Reads atomic.Int64
}

type entry[V any] struct {
	v    V
	size int64
}

// drop is one invalidation: minutes [lo, hi) as of generation gen.
type drop struct {
	gen    uint64
	lo, hi int64
}

// logLen is how many invalidations are remembered: a read that began
// before the oldest one is not kept.
const logLen = 64

// New returns an empty cache.
func New[V any](cfg Config[V]) *Cache[V] {
	return &Cache[V]{cfg: cfg, m: map[Key]entry[V]{}}
}

// Minutes returns the minutes [lo, hi) k covers, held to the ends of
// int64 (ranges of unbounded queries reach them).
func (c *Cache[V]) Minutes(k Key) (lo, hi int64) {
	size := c.cfg.Minutes(k.Tier)
	return mulClamp(k.Lo, size), mulClamp(k.Hi, size)
}

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

// Lookup returns k's value and true when kept; otherwise the generation a
// read of it begins at (for Put).
func (c *Cache[V]) Lookup(k Key) (v V, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e.v, ok, c.gen
}

// Put keeps v as k's, read from generation gen on, unless an invalidation
// since touched k's minutes (or is too old to tell) or they are held.
// When the bound is reached everything is dropped: the next reads fill it
// with what is asked now.
func (c *Cache[V]) Put(k Key, v V, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lo, hi := c.Minutes(k)
	if gen != c.gen {
		if len(c.log) == 0 || c.log[0].gen > gen+1 {
			return // invalidations older than the log remembers
		}
		for _, d := range c.log {
			if d.gen > gen && d.lo < hi && lo < d.hi {
				return
			}
		}
	}
	if c.cfg.Held != nil && c.cfg.Held(lo, hi) {
		return
	}
	size := c.cfg.Size(v)
	if size > c.cfg.Max || size > c.cfg.MaxEntry {
		return
	}
	if old, ok := c.m[k]; ok {
		c.used -= old.size
	}
	if c.used+size > c.cfg.Max {
		c.dropAll()
	}
	c.m[k] = entry[V]{v, size}
	c.used += size
}

// Invalidate drops the ranges holding minutes [lo, hi); lo ≥ hi drops
// nothing but still orders reads (a write that changed no rollup).
func (c *Cache[V]) Invalidate(lo, hi int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.log = append(c.log, drop{c.gen, lo, hi})
	if len(c.log) > logLen {
		c.log = append(c.log[:0], c.log[len(c.log)-logLen:]...)
	}
	if lo >= hi {
		return
	}
	for k, e := range c.m {
		if klo, khi := c.Minutes(k); klo < hi && lo < khi {
			delete(c.m, k)
			c.used -= e.size
		}
	}
}

// Clear drops everything and forgets the log: no read begun before is
// kept.
func (c *Cache[V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.log = c.log[:0]
	c.dropAll()
}

// Recent calls fn with the minutes of the latest invalidations, newest
// first, until it returns false.
func (c *Cache[V]) Recent(fn func(lo, hi int64) bool) {
	c.mu.Lock()
	log := append([]drop(nil), c.log...)
	c.mu.Unlock()
	for i := len(log) - 1; i >= 0; i-- {
		if !fn(log[i].lo, log[i].hi) {
			return
		}
	}
}

func (c *Cache[V]) dropAll() {
	if c.drop != nil {
		c.drop(c.used)
	}
	clear(c.m)
	c.used = 0
}

// Used returns the bytes kept and the number of values (tests).
func (c *Cache[V]) Used() (bytes int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.m)
}

// ReportSize estimates the memory a report holds (a Config.Size).
func ReportSize(r *analysis.Report) int64 {
	n := int64(512 + 160*(len(r.Services)+len(r.Nodes)+len(r.Versions)))
	for _, a := range r.APIs {
		n += 384 + int64(48*(len(a.Radius)+len(a.Amplification))+160*len(a.Owners))
	}
	return n
}
