// Package position keeps a store's write position (store.Store.Position):
// a counter of this process that moves on the process's own writes at once
// and on anyone else's when a cheap fingerprint of the database, read at
// most every Every, differs from the last one read.
package position

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEvery is how long a position read from the database is trusted:
// another process's writes become visible within it.
const DefaultEvery = 250 * time.Millisecond

// All is the range of minutes a write of unknown extent touched.
const (
	AllLo = math.MinInt64
	AllHi = math.MaxInt64
)

// Tracker keeps a write position. Set Read before use; it is safe for
// concurrent use.
type Tracker struct {
	// Read returns the database's fingerprint: it differs whenever a
	// write the process did not report by Wrote changed what a read
	// returns, and moves for other writers only (SQLite's data_version on
	// the writer's connection; ClickHouse's change log without the
	// process's own rows). A fingerprint that changes for nothing only
	// costs readers a miss.
	Read func(ctx context.Context) (uint64, error)
	// OnMove, when set, is called with the minutes [lo, hi) a move of the
	// position may have changed (AllLo, AllHi for a write of unknown
	// extent: another process's), before the position moves, under the
	// tracker's lock: a store drops what it kept of those minutes.
	OnMove func(lo, hi int64)
	// Precise: Read itself tells the store what another process's writes
	// changed (ClickHouse's change log); a changed fingerprint then moves
	// the position without calling OnMove, which only hears of the
	// process's own writes.
	Precise bool
	// Every bounds how often Read runs (DefaultEvery when zero); a
	// negative Every reads on every Position.
	Every time.Duration

	pos atomic.Uint64

	mu    sync.Mutex // one Read at a time
	last  uint64
	known bool         // last holds a fingerprint
	due   atomic.Int64 // when the next Position reads (unix nanoseconds; 0 before the first)
}

// Position returns the write position: positive, never decreasing, moved
// by every write seen (Wrote, or a fingerprint that changed). While one
// caller reads the fingerprint the others take the position as it is.
func (t *Tracker) Position(ctx context.Context) (uint64, error) {
	if due := t.due.Load(); due != 0 && time.Now().UnixNano() < due {
		return t.pos.Load() + 1, nil
	}
	if t.due.Load() != 0 {
		if !t.mu.TryLock() {
			return t.pos.Load() + 1, nil // another caller is reading it
		}
	} else {
		t.mu.Lock() // the first read: every caller waits for it
	}
	defer t.mu.Unlock()
	if due := t.due.Load(); due != 0 && time.Now().UnixNano() < due {
		return t.pos.Load() + 1, nil // another caller polled while this one waited
	}
	fp, err := t.Read(ctx)
	if err != nil {
		return 0, err
	}
	if t.known && fp != t.last {
		if t.Precise {
			t.pos.Add(1)
		} else {
			t.move(AllLo, AllHi)
		}
	}
	t.last, t.known = fp, true
	every := t.Every
	if every == 0 {
		every = DefaultEvery
	}
	t.due.Store(max(1, time.Now().UnixNano()+int64(every)))
	return t.pos.Load() + 1, nil
}

// move moves the position for a write of minutes [lo, hi).
func (t *Tracker) move(lo, hi int64) {
	if t.OnMove != nil {
		t.OnMove(lo, hi)
	}
	t.pos.Add(1)
}

// Wrote moves the position after a write of this process that touched
// minutes [lo, hi) (AllLo, AllHi: unknown) returned, or failed: part of it
// may be stored. A write that changed nothing moves it too. It never waits
// for a read of the fingerprint: writes do not wait for readers.
func (t *Tracker) Wrote(lo, hi int64) {
	t.move(lo, hi)
}

// Do runs fn under the lock Read runs under (a store closing what Read
// uses).
func (t *Tracker) Do(fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn()
}
