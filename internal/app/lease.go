package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stormradius/stormradius/store"
)

// DefaultLeaseTimeout is how long a crashed instance keeps the store's
// analysis lease (--lease-timeout).
const DefaultLeaseTimeout = 30 * time.Second

// leaseKeeper holds the store's analysis lease for a running service: it
// renews it every third of the timeout, and retries a failed renewal every
// tenth of it until the store's deadline. When the lease is lost (taken
// over, or not renewed before the deadline) the store already refuses the
// pipeline's writes; the keeper says so on lost, and Run stops the service
// with an error: an SRE gets a process that exits non-zero and a restart
// that either waits for the lease or takes it, never two analysers
// writing figures side by side.
type leaseKeeper struct {
	st   store.Store
	ttl  time.Duration
	log  *slog.Logger
	lost chan error // one error, once
	quit chan struct{}
	done chan struct{}
}

// takeLease takes the analysis lease of st (refused with the store's
// *store.LeaseHeldError when another instance has it) and keeps it until
// stop.
func takeLease(ctx context.Context, st store.Store, what string, ttl time.Duration, log *slog.Logger) (*leaseKeeper, error) {
	h := store.NewLeaseHolder()
	deadline, err := st.AcquireLease(ctx, h, ttl)
	if err != nil {
		return nil, err
	}
	log.Info("analysis lease taken: this instance analyses "+what+"; another instance is refused it", "holder", h.String(),
		"lease_timeout", ttl)
	k := &leaseKeeper{st: st, ttl: ttl, log: log, lost: make(chan error, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go k.run(deadline)
	return k, nil
}

func (k *leaseKeeper) run(deadline time.Time) {
	defer close(k.done)
	every, retry := k.ttl/3, k.ttl/10
	next := every
	for {
		t := time.NewTimer(next)
		select {
		case <-k.quit:
			t.Stop()
			return
		case <-t.C:
		}
		// A renewal that cannot finish before the deadline is worthless.
		ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), time.Millisecond))
		d, err := k.st.RenewLease(ctx)
		cancel()
		switch {
		case err == nil:
			deadline, next = d, every
		case errors.Is(err, store.ErrLeaseLost):
			k.log.Error("analysis lease lost: stopping without writing more (exit status 1); another instance may be analysing the store now",
				"err", err)
			k.lost <- fmt.Errorf("analysis lease lost: %w", err)
			return
		default:
			k.log.Warn("analysis lease: renewal failed, retrying; the service stops if it cannot renew before the deadline",
				"err", err, "deadline", deadline.Format(time.RFC3339Nano), "retry_in", retry)
			next = retry
		}
	}
}

// stop stops renewing (the store's Close releases the lease).
func (k *leaseKeeper) stop() {
	close(k.quit)
	<-k.done
}
