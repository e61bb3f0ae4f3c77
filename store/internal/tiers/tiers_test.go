package tiers

import "testing"

func newTest(max int64) *Cache[int64] {
	return New(Config[int64]{Max: max, MaxEntry: max, Size: func(v int64) int64 { return v },
		Minutes: func(tier int) int64 { return []int64{1, 60}[tier] }})
}

// TestBound: what is kept stays within the bound, and the bound drops
// everything, not nothing.
func TestBound(t *testing.T) {
	c := newTest(5000)
	dropped := int64(0)
	c.drop = func(n int64) { dropped += n }
	for i := int64(0); i < 100; i++ {
		k := Key{0, i, i + 1, ""}
		_, _, gen := c.Lookup(k)
		c.Put(k, 120, gen)
		if used, n := c.Used(); used > 5000 || used != int64(n)*120 {
			t.Fatalf("after %d puts: %d bytes counted for %d values of 120, bound 5000", i+1, used, n)
		}
	}
	if dropped == 0 {
		t.Error("never dropped at the bound")
	}
	k := Key{0, 1, 2, ""}
	c.Put(k, 5001, 0)
	if _, ok, _ := c.Lookup(k); ok {
		t.Error("a value over the bound was kept")
	}
}

// TestInvalidate: a write drops the ranges holding its minutes, of every
// tier, and only those; a read across it is not kept, one across another
// write's minutes is; held minutes are never kept.
func TestInvalidate(t *testing.T) {
	c := newTest(1 << 20)
	put := func(k Key) {
		_, _, gen := c.Lookup(k)
		c.Put(k, 1, gen)
	}
	hour := Key{1, 10, 12, ""}     // minutes [600, 720)
	minute := Key{0, 700, 701, ""} // inside it
	other := Key{0, 800, 810, "api"}
	for _, k := range []Key{hour, minute, other} {
		put(k)
	}
	c.Invalidate(700, 701)
	for k, want := range map[Key]bool{hour: false, minute: false, other: true} {
		if _, ok, _ := c.Lookup(k); ok != want {
			t.Errorf("%v kept: %v, want %v", k, ok, want)
		}
	}
	// A read that began before an invalidation of its minutes.
	_, _, gen := c.Lookup(minute)
	c.Invalidate(700, 701)
	c.Put(minute, 1, gen)
	if _, ok, _ := c.Lookup(minute); ok {
		t.Error("a value read across an invalidation of its minutes was kept")
	}
	// One across an invalidation of other minutes.
	_, _, gen = c.Lookup(minute)
	c.Invalidate(5, 6)
	c.Put(minute, 1, gen)
	if _, ok, _ := c.Lookup(minute); !ok {
		t.Error("a value read across an invalidation of other minutes was not kept")
	}
	// One older than the log remembers.
	_, _, gen = c.Lookup(hour)
	for i := 0; i <= logLen; i++ {
		c.Invalidate(5, 6)
	}
	c.Put(hour, 1, gen)
	if _, ok, _ := c.Lookup(hour); ok {
		t.Error("a value read before the oldest invalidation remembered was kept")
	}
	// Clear: nothing kept, no read begun before it kept.
	_, _, gen = c.Lookup(hour)
	c.Clear()
	if _, n := c.Used(); n != 0 {
		t.Errorf("%d values kept after Clear", n)
	}
	c.Put(hour, 1, gen)
	if _, ok, _ := c.Lookup(hour); ok {
		t.Error("a value read before Clear was kept")
	}
	// Held minutes.
	held := int64(650)
	c.cfg.Held = func(lo, hi int64) bool { return lo <= held && held < hi }
	put(hour)
	put(other)
	if _, ok, _ := c.Lookup(hour); ok {
		t.Error("a range holding a held minute was kept")
	}
	if _, ok, _ := c.Lookup(other); !ok {
		t.Error("a range without held minutes was not kept")
	}
}
