package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// The analysis lease. A store is analysed by one process at a time: the
// pipeline owns the window states, the checkpoint and the pending traces,
// and a second analyser over the same store would halve per-edge counts
// and lose traces. The analysing process (`serve`, cmd/ingest) takes the
// lease before it recovers anything, renews it while it runs and releases
// it when it stops; a second one is refused at start (ErrLeaseHeld).
// Readers (report, cmd/api, gate) never take it.
//
// A holder that crashed loses the lease when it expires, a timeout after
// its last renewal; a holder on the same machine (same kernel boot and pid
// namespace) whose process has exited loses it at once
// (LeaseHolder.Exited), so that restarting after kill -9 does not wait.
//
// A store that took a lease refuses writes once it may have lost it: when
// a renewal found another holder, or when the holder's own deadline (the
// last renewal, plus the timeout, minus a margin for clocks and writes in
// flight) passed without a renewal. Its writes then return ErrLeaseLost,
// so that an analyser cut off from the store for longer than the timeout
// cannot write next to the one that took over. A store that never took a
// lease is not fenced.

// Sentinel errors of the lease.
var (
	// ErrLeaseHeld: another instance holds the store's analysis lease.
	// The error is a *LeaseHeldError that says who and until when.
	ErrLeaseHeld = errors.New("another instance is analysing this store")
	// ErrLeaseLost: this store's lease expired or was taken over: it must
	// stop writing.
	ErrLeaseLost = errors.New("this instance lost the store's analysis lease")
)

// Leaser is the analysis lease of a store (see above). One store value
// holds at most one lease, for one holder.
type Leaser interface {
	// AcquireLease takes the lease for h, for ttl from now. It returns a
	// *LeaseHeldError (errors.Is ErrLeaseHeld) when another holder's lease
	// is live. On success it returns the deadline before which the
	// holder's writes are accepted unless renewed (in the holder's clock).
	AcquireLease(ctx context.Context, h LeaseHolder, ttl time.Duration) (deadline time.Time, err error)
	// RenewLease extends the lease by its ttl from now and returns the new
	// deadline. It returns an error wrapping ErrLeaseLost when the lease
	// was taken over, released, or its deadline passed; other errors
	// (ErrUnavailable) may be retried until the deadline.
	RenewLease(ctx context.Context) (deadline time.Time, err error)
	// ReleaseLease gives the lease up, so that another instance can take
	// it at once. Close releases it too, after the store's last write.
	ReleaseLease(ctx context.Context) error
}

// LeaseHolder identifies a process holding (or claiming) a lease.
type LeaseHolder struct {
	// ID is unique per holder (random).
	ID string
	// Host, PID and Start (the process's start) say which process it is,
	// for people.
	Host  string
	PID   int
	Start time.Time
	// Namespace identifies the holder's machine (kernel boot) and pid
	// namespace, "" where unknown: a holder of the same Namespace whose
	// PID is gone has exited (Exited).
	Namespace string
}

// processStart is when this process started (close enough: package
// initialisation).
var processStart = time.Now()

// NewLeaseHolder returns a holder for this process, with a new ID.
func NewLeaseHolder() LeaseHolder {
	var b [8]byte
	rand.Read(b[:])
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return LeaseHolder{ID: hex.EncodeToString(b[:]), Host: host, PID: os.Getpid(), Start: processStart,
		Namespace: localNamespace()}
}

// String names the holder for people: pid, host and start.
func (h LeaseHolder) String() string {
	return fmt.Sprintf("pid %d on host %s (started %s)", h.PID, h.Host, h.Start.UTC().Format(time.RFC3339))
}

// Exited reports whether h is a process of this machine and pid namespace
// that has exited: its lease can be taken at once. A process of another
// machine or namespace, or one whose pid is in use (it may be the holder),
// is not known to have exited.
func (h LeaseHolder) Exited() bool {
	ns := localNamespace()
	return ns != "" && h.Namespace == ns && h.PID > 0 && processGone(h.PID)
}

// localNamespace identifies this machine's kernel boot and this process's
// pid namespace ("" where it cannot be read): two processes see the same
// pids exactly when they share it. Both are fixed for the process's life:
// read once.
var localNamespace = sync.OnceValue(func() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	pidns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + pidns
})

// LeaseHeldError is the refusal of a lease another holder has.
type LeaseHeldError struct {
	// Holder holds the lease (or won the race to take it).
	Holder LeaseHolder
	// Expires is when the lease expires unless renewed, and Now the time
	// it was refused at, both in the clock the store judges expiry by.
	Expires, Now time.Time
}

// Error says who holds the lease, until when, and what to do.
func (e *LeaseHeldError) Error() string {
	wait := e.Expires.Sub(e.Now).Round(time.Second)
	if wait < time.Second {
		wait = time.Second
	}
	return fmt.Sprintf("%v: held by %v until %s; stop the other instance, or wait %v if it crashed",
		ErrLeaseHeld, e.Holder, e.Expires.UTC().Format(time.RFC3339), wait)
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }
