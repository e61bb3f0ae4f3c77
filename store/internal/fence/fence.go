// Package fence is a store's side of the analysis lease it holds
// (store.Leaser): whether it holds one, and the deadline past which its
// writes are refused. Both stores keep one.
package fence

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stormradius/stormradius/store"
)

// Fence is a store's side of the lease it holds: whether it holds
// one, and the deadline past which its writes are refused. The zero value
// holds none and fences nothing. It is safe for concurrent use.
type Fence struct {
	// Now is the clock deadlines are in (time.Now when nil; tests move it).
	Now func() time.Time

	mu       sync.Mutex
	state    fenceState
	holder   store.LeaseHolder
	ttl      time.Duration
	deadline time.Time
	lost     error // why, once lost
}

type fenceState int

const (
	fenceNone fenceState = iota
	fenceHeld
	fenceLost
	fenceReleased
)

// Clock returns the fence's current time.
func (f *Fence) Clock() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Hold records that h took (or renewed) the lease for ttl, with deadline.
func (f *Fence) Hold(h store.LeaseHolder, ttl time.Duration, deadline time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state, f.holder, f.ttl, f.deadline, f.lost = fenceHeld, h, ttl, deadline, nil
}

// Renewed moves the deadline of a lease still held; it returns the
// store.ErrLeaseLost error when the lease was lost meanwhile (a renewal cannot
// bring it back: another holder may have taken it).
func (f *Fence) Renewed(deadline time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked(); err != nil {
		return err
	}
	f.deadline = deadline
	return nil
}

// Held returns the holder and ttl of the lease held, with the store.ErrLeaseLost
// error when none is (never taken, lost, released or past its deadline).
func (f *Fence) Held() (store.LeaseHolder, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == fenceNone {
		return store.LeaseHolder{}, 0, fmt.Errorf("%w: no lease was taken", store.ErrLeaseLost)
	}
	return f.holder, f.ttl, f.checkLocked()
}

// Taken returns the holder of a lease taken and not released (lost or
// not): what Close gives up.
func (f *Fence) Taken() (store.LeaseHolder, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holder, f.state == fenceHeld || f.state == fenceLost
}

// Lose records that the lease was lost, why.
func (f *Fence) Lose(why error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == fenceHeld {
		f.state, f.lost = fenceLost, why
	}
}

// Release records that the lease was given up.
func (f *Fence) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != fenceNone {
		f.state = fenceReleased
	}
}

// Check returns nil when a write may go ahead: no lease was ever taken
// (the store is not fenced), or the lease is held and its deadline has not
// passed. Otherwise it returns an error wrapping store.ErrLeaseLost.
func (f *Fence) Check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == fenceNone {
		return nil
	}
	return f.checkLocked()
}

func (f *Fence) checkLocked() error {
	switch f.state {
	case fenceLost:
		return f.lost
	case fenceReleased:
		return fmt.Errorf("%w: it was released", store.ErrLeaseLost)
	case fenceHeld:
		if now := f.Clock(); !now.Before(f.deadline) {
			f.state = fenceLost
			f.lost = fmt.Errorf("%w: not renewed before %s (timeout %v): another instance may have taken it",
				store.ErrLeaseLost, f.deadline.UTC().Format(time.RFC3339Nano), f.ttl)
			return f.lost
		}
	}
	return nil
}

// Retryable returns err, a refused span write, as store.ErrUnavailable
// too when it is a lost lease: nothing was stored, and the sender retries
// (against the instance that holds the lease now). Other refusals (the
// store closed, read-only) are returned as they are.
func Retryable(err error) error {
	if errors.Is(err, store.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}
