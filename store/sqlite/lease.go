package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stormradius/stormradius/store"
)

// The analysis lease (store.Leaser) is one row of results.db, checked and
// replaced in one write transaction: SQLite serialises them across the
// processes that open the directory, so two instances starting at once
// cannot both take it. Expiry is judged by the host's clock, the only one
// involved (the directory cannot be shared across hosts).

// leaseName is the lease's row; a partition's is "analysis/<partition>"
// (Store.leaseName).
const leaseName = "analysis"

// leaseDeadline is the holder's deadline for a lease written at sent: a
// tenth of the timeout before it expires, so that a write that passed the
// fence just before it still ends before another process can take over.
func leaseDeadline(sent time.Time, ttl time.Duration) time.Time { return sent.Add(ttl - ttl/10) }

type leaseRow struct {
	holder  store.LeaseHolder
	expires time.Time
}

// readLease reads the lease's row name in tx.
func readLease(ctx context.Context, tx *sql.Tx, name string) (leaseRow, bool, error) {
	var r leaseRow
	var started, expires int64
	err := tx.QueryRowContext(ctx, `SELECT holder, host, pid, started, namespace, expires FROM lease WHERE name = ?`, name).
		Scan(&r.holder.ID, &r.holder.Host, &r.holder.PID, &started, &r.holder.Namespace, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	r.holder.Start, r.expires = time.Unix(0, started), time.Unix(0, expires)
	return r, err == nil, err
}

// AcquireLease takes the lease for h, unless another holder's is live:
// not expired, and not held by a process of this host that has exited.
// It then reads the last span write again: a previous holder may have
// written since Open.
func (s *Store) AcquireLease(ctx context.Context, h store.LeaseHolder, ttl time.Duration) (time.Time, error) {
	if err := s.checkWritable("take lease"); err != nil {
		return time.Time{}, err // a reader takes no lease
	}
	if s.viewClosed.Load() {
		return time.Time{}, fmt.Errorf("sqlite: take lease: partition %q: %w", s.part, store.ErrClosed)
	}
	if ttl <= 0 || h.ID == "" {
		return time.Time{}, fmt.Errorf("sqlite: take lease: want a holder and a positive timeout, not %q and %v", h.ID, ttl)
	}
	now := s.lease.Clock()
	tx, err := s.resW.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, unavailable(ctx, "take lease", err)
	}
	defer tx.Rollback()
	cur, ok, err := readLease(ctx, tx, s.leaseName)
	if err != nil {
		return time.Time{}, unavailable(ctx, "read lease", err)
	}
	if ok && cur.holder.ID != h.ID {
		expired := !cur.expires.After(now)
		if !expired && !cur.holder.Exited() {
			return time.Time{}, fmt.Errorf("sqlite: data directory %s%s: %w", s.dir, s.partitionNote(),
				&store.LeaseHeldError{Holder: cur.holder, Expires: cur.expires, Now: now})
		}
		s.log.Info("sqlite: taking over the analysis lease", "lease", s.leaseName, "from", cur.holder.String(), "expired", expired,
			"expires", cur.expires.UTC())
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO lease (name, holder, host, pid, started, namespace, expires)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, s.leaseName, h.ID, h.Host, h.PID, h.Start.UnixNano(), h.Namespace, now.Add(ttl).UnixNano()); err != nil {
		return time.Time{}, unavailable(ctx, "take lease", err)
	}
	if err := tx.Commit(); err != nil {
		return time.Time{}, unavailable(ctx, "take lease", err)
	}
	deadline := leaseDeadline(now, ttl)
	s.lease.Hold(h, ttl, deadline)
	if err := s.readLastWrite(ctx); err != nil {
		return time.Time{}, err
	}
	return deadline, nil
}

// RenewLease extends the lease while this store's holder still has it.
func (s *Store) RenewLease(ctx context.Context) (time.Time, error) {
	h, ttl, err := s.lease.Held()
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: renew lease: %w", err)
	}
	now := s.lease.Clock()
	tx, err := s.resW.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, unavailable(ctx, "renew lease", err)
	}
	defer tx.Rollback()
	cur, ok, err := readLease(ctx, tx, s.leaseName)
	if err != nil {
		return time.Time{}, unavailable(ctx, "read lease", err)
	}
	if !ok || cur.holder.ID != h.ID {
		lost := fmt.Errorf("%w: its row is gone", store.ErrLeaseLost)
		if ok {
			lost = fmt.Errorf("%w: taken over by %v", store.ErrLeaseLost, cur.holder)
		}
		s.lease.Lose(lost)
		return time.Time{}, fmt.Errorf("sqlite: renew lease: %w", lost)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE lease SET expires = ? WHERE name = ? AND holder = ?`,
		now.Add(ttl).UnixNano(), s.leaseName, h.ID); err != nil {
		return time.Time{}, unavailable(ctx, "renew lease", err)
	}
	if err := tx.Commit(); err != nil {
		return time.Time{}, unavailable(ctx, "renew lease", err)
	}
	deadline := leaseDeadline(now, ttl)
	if err := s.lease.Renewed(deadline); err != nil {
		return time.Time{}, fmt.Errorf("sqlite: renew lease: %w", err)
	}
	return deadline, nil
}

// ReleaseLease deletes the lease's row if this store's holder has it.
func (s *Store) ReleaseLease(ctx context.Context) error {
	h, ok := s.lease.Taken()
	if !ok {
		return nil
	}
	if _, err := s.resW.ExecContext(ctx, `DELETE FROM lease WHERE name = ? AND holder = ?`, s.leaseName, h.ID); err != nil {
		return unavailable(ctx, "release lease", err)
	}
	s.lease.Release()
	return nil
}

// checkWritable refuses a write (what) to a store opened read-only.
func (s *Store) checkWritable(what string) error {
	if s.readOnly {
		return fmt.Errorf("sqlite: %s: %w", what, store.ErrReadOnly)
	}
	return nil
}

// fence returns nil when the store (or partition view) may write (not
// opened read-only, not a closed view, see fence.Fence), else an error
// saying what was refused.
func (s *Store) fence(what string) error {
	if err := s.checkWritable(what); err != nil {
		return err
	}
	if s.viewClosed.Load() {
		return fmt.Errorf("sqlite: %s: partition %q: %w", what, s.part, store.ErrClosed)
	}
	if err := s.lease.Check(); err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return nil
}

// partitionNote names the handle's partition in an error, when it is not
// the store's own.
func (s *Store) partitionNote() string {
	if s.part == "" {
		return ""
	}
	return fmt.Sprintf(", partition %q", s.part)
}
