// Package position keeps a store's write position (store.Store.Position):
// a counter of this process that moves on the process's own writes at once
// and on anyone's writes when a cheap fingerprint of the database, read at
// most every Every, differs from the last one read.
package position

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEvery is how long a position read from the database is trusted:
// another process's writes become visible within it.
const DefaultEvery = 250 * time.Millisecond

// Tracker keeps a write position. The zero value is not usable: set Read.
// It is safe for concurrent use.
type Tracker struct {
	// Read returns the database's fingerprint: it differs whenever a
	// write (this process's or another's) changed what a read returns. A
	// fingerprint that changes for nothing only costs a cache miss.
	Read func(ctx context.Context) (uint64, error)
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
// by every write seen (Wrote, or a fingerprint that changed).
func (t *Tracker) Position(ctx context.Context) (uint64, error) {
	if now := time.Now().UnixNano(); t.known0() && now < t.due.Load() {
		return t.pos.Load() + 1, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known && time.Now().UnixNano() < t.due.Load() {
		return t.pos.Load() + 1, nil // another caller polled while this one waited
	}
	if err := t.poll(ctx); err != nil {
		return 0, err
	}
	return t.pos.Load() + 1, nil
}

// Do runs fn under the lock Read runs under (a store closing what Read
// uses).
func (t *Tracker) Do(fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn()
}

// known0 reports, without the lock, whether a fingerprint was read.
func (t *Tracker) known0() bool { return t.due.Load() != 0 }

// poll reads the fingerprint and moves the position when it changed;
// under t.mu.
func (t *Tracker) poll(ctx context.Context) error {
	fp, err := t.Read(ctx)
	if err != nil {
		return err
	}
	if t.known && fp != t.last {
		t.pos.Add(1)
	}
	t.last, t.known = fp, true
	every := t.Every
	if every == 0 {
		every = DefaultEvery
	}
	t.due.Store(max(1, time.Now().UnixNano()+int64(every)))
	return nil
}

// Wrote moves the position after a write of this process returned (or
// failed: part of it may be stored), and takes the fingerprint that write
// left as the last one read, so that the next poll does not move the
// position for it again. A write that changed nothing moves it too.
func (t *Tracker) Wrote(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The position moves first: a reader that sees the new position reads
	// after the write.
	t.pos.Add(1)
	if fp, err := t.Read(context.WithoutCancel(ctx)); err == nil {
		t.last, t.known = fp, true
	}
}
