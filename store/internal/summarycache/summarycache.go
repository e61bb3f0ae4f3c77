// Package summarycache keeps decoded window summaries for the stores' read
// paths.
package summarycache

import (
	"hash/maphash"
	"sync"

	"github.com/stormradius/stormradius/analysis"
)

// Cache decodes stored window summaries and keeps the decoded form
// of the ones read lately: a summary is decoded again only when its stored
// bytes change. Decoding dominates a long range's read (a week of hourly
// summaries for 100 APIs: ~40 ms in the binary form stores write), and
// closed windows seldom change.
// The summaries it returns are shared: callers must not modify them (the
// read path only merges them into new values).
type Cache struct {
	mu   sync.Mutex
	seed maphash.Seed
	m    map[int64]cachedSummary
}

type cachedSummary struct {
	hash uint64
	size int
	sum  *analysis.WindowSummary
}

// maxCachedSummaries bounds the cache (hourly windows: ~5 months).
const maxCachedSummaries = 4096

// Decode returns window win's summary stored as b.
func (c *Cache) Decode(win int64, b []byte) (*analysis.WindowSummary, error) {
	c.mu.Lock()
	if c.m == nil {
		c.seed, c.m = maphash.MakeSeed(), make(map[int64]cachedSummary)
	}
	seed := c.seed
	c.mu.Unlock()
	h := maphash.Bytes(seed, b)
	c.mu.Lock()
	e, ok := c.m[win]
	c.mu.Unlock()
	if ok && e.hash == h && e.size == len(b) {
		return e.sum, nil
	}
	w, err := analysis.DecodeSummary(b)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedSummaries {
		for k := range c.m { // evict one at random
			delete(c.m, k)
			break
		}
	}
	c.m[win] = cachedSummary{hash: h, size: len(b), sum: w}
	c.mu.Unlock()
	return w, nil
}
