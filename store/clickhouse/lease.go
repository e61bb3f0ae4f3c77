package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/store"
)

// The analysis lease (store.Leaser) without transactions or compare-and-set,
// one per partition, each with its own fence (docs/ARCHITECTURE.md). Each
// claimant writes rows under its own key in leases (latest version wins)
// and reads everyone's: look (another's live held claim: refuse), insert
// an intent, wait LeaseSettle, read again: another's live held claim wins,
// else the live intent with the smallest holder id, which inserts its
// claim as held; losers withdraw.
//
// At most one wins: if P decides at read r and Q's intent was not visible
// at r, Q decides at least a settle after r, and P's held claim, stored
// within half a settle of r, is visible to Q. A claimant whose insert took
// longer withdraws and tries again (leaseAttempts). It assumes that an
// acknowledged insert is visible to every later read (one server, or one
// replica with synchronous inserts). Expiry is by the server's clock
// (whole seconds); the holder's deadline runs on its monotonic clock from
// before it read the server's time, leaseMargin before the expiry (the
// server's clock must not step forward by more).

// leaseName is the default partition's lease (part.leaseName).
const leaseName = "analysis"

// Claim states.
const (
	claimIntent   uint8 = 0
	claimHeld     uint8 = 1
	claimReleased uint8 = 2
)

// DefaultLeaseSettle is how long a claimant waits between claiming and
// deciding (Options.LeaseSettle).
const DefaultLeaseSettle = 2 * time.Second

// minLeaseTTL is the shortest lease timeout: the server counts seconds.
const minLeaseTTL = 3 * time.Second

// leaseAttempts is how many times AcquireLease claims on a slow server.
const leaseAttempts = 3

// leaseMargin is how long before the expiry the holder's deadline comes.
func leaseMargin(ttl time.Duration) time.Duration { return time.Second + ttl/10 }

type claim struct {
	holder           store.LeaseHolder
	state            uint8
	claimed, expires time.Time
}

// live reports whether c counts at server time now for holder me (whose
// own claims are not an exited process's).
func (c *claim) live(now time.Time, me string) bool {
	return c != nil && c.state != claimReleased && c.expires.After(now) && (c.holder.ID == me || !c.holder.Exited())
}

// outranks reports whether held claim c wins over o (both held only when
// the protocol's assumptions failed): the earlier, then the smaller id.
func (c *claim) outranks(o *claim) bool {
	if !c.claimed.Equal(o.claimed) {
		return c.claimed.Before(o.claimed)
	}
	return c.holder.ID < o.holder.ID
}

// claims returns the time expiry is judged by (the server's, or
// Options.LeaseClock's in tests), then the latest claim of every holder.
func (s *Store) claims(ctx context.Context) (now time.Time, out map[string]*claim, err error) {
	if s.lease.Now != nil {
		now = s.lease.Now()
	} else {
		var sec uint32
		if err := s.queryRow(ctx, "read server time", `SELECT toUnixTimestamp(now())`, &sec); err != nil {
			return now, nil, err
		}
		now = time.Unix(int64(sec), 0)
	}
	out = map[string]*claim{}
	err = s.query(ctx, "read lease claims", `SELECT holder, argMax(host, version), argMax(pid, version),
		argMax(started, version), argMax(ns, version), argMax(state, version), argMax(claimed, version),
		argMax(expires, version) FROM leases WHERE name = `+quote(s.leaseName())+` GROUP BY holder`, func(r driver.Rows) error {
		var c claim
		var pid uint32
		var started, claimed, expires int64
		if err := r.Scan(&c.holder.ID, &c.holder.Host, &pid, &started, &c.holder.Namespace, &c.state, &claimed, &expires); err != nil {
			return err
		}
		c.holder.PID, c.holder.Start = int(pid), time.Unix(0, started)
		c.claimed, c.expires = time.Unix(0, claimed), time.Unix(0, expires)
		out[c.holder.ID] = &c
		return nil
	})
	return now, out, err
}

// writeClaim inserts h's claim.
func (s *Store) writeClaim(ctx context.Context, h store.LeaseHolder, state uint8, claimed, expires time.Time) error {
	var exp int64
	if state != claimReleased {
		exp = expires.UnixNano()
	}
	return s.insert(ctx, "write lease claim", "leases",
		[]string{"name", "holder", "host", "pid", "started", "ns", "state", "claimed", "expires", "version"},
		[]string{s.leaseName()}, []string{h.ID}, []string{h.Host}, []uint32{uint32(h.PID)}, []int64{h.Start.UnixNano()},
		[]string{h.Namespace}, []uint8{state}, []int64{claimed.UnixNano()}, []int64{exp}, []uint64{s.versions(1)})
}

// heldBy returns the winning live held claim of a holder other than me, or nil.
func heldBy(cs map[string]*claim, now time.Time, me string) *claim {
	var best *claim
	for id, c := range cs {
		if id != me && c.state == claimHeld && c.live(now, me) && (best == nil || c.outranks(best)) {
			best = c
		}
	}
	return best
}

// refused is the refusal naming c.
func (s *Store) refused(c *claim, now time.Time) error {
	where := "database " + s.db
	if s.name != "" {
		where += ", partition " + s.name
	}
	return fmt.Errorf("clickhouse: %s: %w", where, &store.LeaseHeldError{Holder: c.holder, Expires: c.expires, Now: now})
}

// errTooSlow: an insert took longer than the protocol allows.
type errTooSlow struct{ took, bound time.Duration }

func (e errTooSlow) Error() string {
	return fmt.Sprintf("the server took %v to store a lease claim, more than %v: another instance's claim may be unseen", e.took.Round(time.Millisecond), e.bound)
}

// AcquireLease takes the lease for h, then reads again what a previous
// holder may have written since Open.
func (s *Store) AcquireLease(ctx context.Context, h store.LeaseHolder, ttl time.Duration) (time.Time, error) {
	if err := s.checkWritable("take lease"); err != nil {
		return time.Time{}, err // a reader takes no lease
	}
	if ttl < minLeaseTTL || h.ID == "" {
		return time.Time{}, fmt.Errorf("clickhouse: take lease: want a holder and a timeout of at least %v, not %q and %v",
			minLeaseTTL, h.ID, ttl)
	}
	var slow error
	for range leaseAttempts {
		deadline, err := s.claimLease(ctx, h, ttl)
		if _, ok := err.(errTooSlow); ok {
			slow = err
			s.log.Warn("clickhouse: lease claim too slow, claiming again", "err", err)
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		if err := s.readProgress(ctx); err != nil {
			return time.Time{}, err
		}
		return deadline, nil
	}
	return time.Time{}, fmt.Errorf("clickhouse: take lease: %w: %w", store.ErrUnavailable, slow)
}

// claimLease makes one claim: look, claim, settle, decide.
func (s *Store) claimLease(ctx context.Context, h store.LeaseHolder, ttl time.Duration) (_ time.Time, err error) {
	bound := s.leaseSettle / 2
	now, cs, err := s.claims(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if c := heldBy(cs, now, h.ID); c != nil {
		return time.Time{}, s.refused(c, now)
	}

	// Past the look, a claim that does not end held is withdrawn.
	defer func() {
		if err != nil {
			s.withdraw(h)
		}
	}()
	sent := time.Now()
	if err := s.writeClaim(ctx, h, claimIntent, now, now.Add(2*s.leaseSettle+2*time.Second)); err != nil {
		return time.Time{}, err
	}
	if took := time.Since(sent); took > bound {
		return time.Time{}, errTooSlow{took, bound}
	}
	select {
	case <-time.After(s.leaseSettle):
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("clickhouse: take lease: %w", ctx.Err())
	}

	read := time.Now()
	base := s.lease.Clock() // the deadline's origin: before the server's time is read
	if now, cs, err = s.claims(ctx); err != nil {
		return time.Time{}, err
	}
	if !cs[h.ID].live(now, h.ID) {
		return time.Time{}, fmt.Errorf("clickhouse: take lease: this instance's claim is not visible %v after it was stored "+
			"(are inserts asynchronous, or reads served by another replica?)", s.leaseSettle)
	}
	if c := heldBy(cs, now, h.ID); c != nil {
		return time.Time{}, s.refused(c, now)
	}
	var winner *claim
	for _, c := range cs {
		if c.state == claimIntent && c.live(now, h.ID) && (winner == nil || c.holder.ID < winner.holder.ID) {
			winner = c
		}
	}
	if winner == nil { // cannot be: this instance's intent is live
		return time.Time{}, fmt.Errorf("clickhouse: take lease: no live intent, this instance's neither")
	}
	if winner.holder.ID != h.ID {
		return time.Time{}, s.refused(winner, now)
	}
	if err := s.writeClaim(ctx, h, claimHeld, now, now.Add(ttl)); err != nil {
		return time.Time{}, err
	}
	if took := time.Since(read); took > bound {
		return time.Time{}, errTooSlow{took, bound}
	}
	deadline := base.Add(ttl - leaseMargin(ttl))
	s.lease.Hold(h, ttl, deadline)
	return deadline, nil
}

// withdraw gives up h's claim, on a context of its own (the caller's may
// have ended): a claim left behind expires anyway.
func (s *Store) withdraw(h store.LeaseHolder) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.writeClaim(ctx, h, claimReleased, time.Time{}, time.Time{}); err != nil {
		s.log.Warn("clickhouse: withdrawing a lease claim; it expires by itself", "err", err)
	}
}

// RenewLease writes a heartbeat of the held claim, while it is live and no
// other held claim outranks it.
func (s *Store) RenewLease(ctx context.Context) (time.Time, error) {
	h, ttl, err := s.lease.Held()
	if err != nil {
		return time.Time{}, fmt.Errorf("clickhouse: renew lease: %w", err)
	}
	base := s.lease.Clock()
	now, cs, err := s.claims(ctx)
	if err != nil {
		return time.Time{}, err
	}
	mine := cs[h.ID]
	var lost error
	switch other := heldBy(cs, now, h.ID); {
	case mine == nil || mine.state != claimHeld:
		lost = fmt.Errorf("%w: its claim is gone", store.ErrLeaseLost)
	case !mine.expires.After(now):
		lost = fmt.Errorf("%w: it expired at %s by the server's clock", store.ErrLeaseLost, mine.expires.UTC().Format(time.RFC3339))
	case other != nil && other.outranks(mine):
		lost = fmt.Errorf("%w: taken over by %v", store.ErrLeaseLost, other.holder)
	}
	if lost != nil {
		s.lease.Lose(lost)
		return time.Time{}, fmt.Errorf("clickhouse: renew lease: %w", lost)
	}
	if err := s.writeClaim(ctx, h, claimHeld, mine.claimed, now.Add(ttl)); err != nil {
		return time.Time{}, err
	}
	// It counts only if stored before the deadline it extends (Renewed).
	deadline := base.Add(ttl - leaseMargin(ttl))
	if err := s.lease.Renewed(deadline); err != nil {
		return time.Time{}, fmt.Errorf("clickhouse: renew lease: %w", err)
	}
	return deadline, nil
}

// ReleaseLease marks this store's claim released.
func (s *Store) ReleaseLease(ctx context.Context) error {
	h, ok := s.lease.Taken()
	if !ok {
		return nil
	}
	if err := s.writeClaim(ctx, h, claimReleased, time.Time{}, time.Time{}); err != nil {
		return err
	}
	s.lease.Release()
	return nil
}

// checkWrite refuses a write (what) to a closed or read-only store, or
// once its lease may be lost (fence.Fence).
func (s *Store) checkWrite(what string) error {
	if err := s.checkOpen(what); err != nil {
		return err
	}
	if err := s.checkWritable(what); err != nil {
		return err
	}
	if err := s.lease.Check(); err != nil {
		return fmt.Errorf("clickhouse: %s: %w", what, err)
	}
	return nil
}
