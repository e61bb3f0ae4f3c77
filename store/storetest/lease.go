package storetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// LeaseOpener opens a new instance of the store under test (as another
// process would) over the data of the calling test, which is fresh for
// each test. clock, when not nil, replaces the clock the store judges the
// lease's expiry and its holder's deadline by.
type LeaseOpener func(t *testing.T, clock func() time.Time) store.Store

// FakeClock is a clock tests move by hand.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock showing t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *FakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// leaseTTL is the lease timeout of the suite (30 s, the service's default).
const leaseTTL = 30 * time.Second

// Lease runs the conformance suite of the analysis lease (store.Leaser).
func Lease(t *testing.T, open LeaseOpener) {
	opener := func(t *testing.T, clock func() time.Time) store.Store {
		s := open(t, clock)
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Run("HeldRenewedReleased", func(t *testing.T) { testLeaseHeld(t, opener) })
	t.Run("Expiry", func(t *testing.T) { testLeaseExpiry(t, opener) })
	t.Run("ExitedHolder", func(t *testing.T) { testLeaseExited(t, opener) })
	t.Run("Concurrent", func(t *testing.T) { testLeaseConcurrent(t, opener) })
	t.Run("Readers", func(t *testing.T) { testLeaseReaders(t, opener) })
	t.Run("Takeover", func(t *testing.T) { testLeaseTakeover(t, opener) })
}

// held checks that err is the refusal of a lease h holds until expires,
// refused at now, and says so.
func held(t *testing.T, err error, h store.LeaseHolder, expires, now time.Time) {
	t.Helper()
	var e *store.LeaseHeldError
	if !errors.Is(err, store.ErrLeaseHeld) || !errors.As(err, &e) {
		t.Fatalf("got %v, want the lease refused as held by %s", err, h.ID)
	}
	if !sameHolder(e.Holder, h) {
		t.Fatalf("refused naming %+v, want %+v", e.Holder, h)
	}
	if !e.Expires.Equal(expires) || !e.Now.Equal(now) {
		t.Fatalf("refused with expiry %v at %v, want %v at %v", e.Expires, e.Now, expires, now)
	}
	msg := err.Error()
	wait := fmt.Sprintf("wait %v if it crashed", expires.Sub(now))
	for _, want := range []string{fmt.Sprintf("pid %d", h.PID), "host " + h.Host, h.Start.UTC().Format(time.RFC3339),
		expires.UTC().Format(time.RFC3339), "stop the other instance", wait, "if it crashed"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("refusal %q does not say %q", msg, want)
		}
	}
}

func sameHolder(a, b store.LeaseHolder) bool {
	return a.ID == b.ID && a.Host == b.Host && a.PID == b.PID && a.Start.Equal(b.Start) && a.Namespace == b.Namespace
}

// lost checks that err says the lease was lost.
func lost(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("%s: got %v, want the lease lost", what, err)
	}
}

// A lease is held until released: a second instance is refused, naming
// the holder and its expiry; a renewal moves the expiry; released, it is
// free at once.
func testLeaseHeld(t *testing.T, open LeaseOpener) {
	x := ctx(t)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clk := NewFakeClock(t0)
	a, b := open(t, clk.Now), open(t, clk.Now)
	ha, hb := store.NewLeaseHolder(), store.NewLeaseHolder()
	da, err := a.AcquireLease(x, ha, leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	// The holder must stop writing before another can take over: its
	// deadline is before the expiry, and not absurdly early.
	if !da.After(t0.Add(leaseTTL/2)) || !da.Before(t0.Add(leaseTTL)) {
		t.Fatalf("deadline %v, want within (%v, %v)", da, t0.Add(leaseTTL/2), t0.Add(leaseTTL))
	}
	_, err = b.AcquireLease(x, hb, leaseTTL)
	held(t, err, ha, t0.Add(30*time.Second), t0)

	clk.Add(20 * time.Second)
	d2, err := a.RenewLease(x)
	if err != nil || !d2.After(da) {
		t.Fatalf("renewal: deadline %v (was %v), %v", d2, da, err)
	}
	clk.Add(20 * time.Second) // past the first expiry, before the renewed one
	_, err = b.AcquireLease(x, hb, leaseTTL)
	held(t, err, ha, t0.Add(50*time.Second), t0.Add(40*time.Second))

	if err := a.ReleaseLease(x); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(x, hb, leaseTTL); err != nil {
		t.Fatalf("after the release: %v", err)
	}
	_, err = a.AcquireLease(x, ha, leaseTTL)
	held(t, err, hb, t0.Add(70*time.Second), t0.Add(40*time.Second))
	_, err = a.RenewLease(x)
	lost(t, err, "renewal after the release")
	// Released and re-acquired.
	if err := b.ReleaseLease(x); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcquireLease(x, ha, leaseTTL); err != nil {
		t.Fatalf("re-acquiring: %v", err)
	}
}

// A lease not renewed expires after its timeout: its holder's writes are
// refused from its deadline on (before another instance can take over),
// another instance takes it, and the old holder's renewal finds it lost.
func testLeaseExpiry(t *testing.T, open LeaseOpener) {
	x := ctx(t)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clk := NewFakeClock(t0)
	c := NewCorpus(t, 2, t0, time.Second)
	a, b := open(t, clk.Now), open(t, clk.Now)
	ha, hb := store.NewLeaseHolder(), store.NewLeaseHolder()
	if _, err := a.AcquireLease(x, ha, leaseTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteSpans(x, c.Spans[0]); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	if err := a.Apply(x, store.Batch{Changes: []store.Change{{New: c.Record(0, 1)}}, Watermark: 1}); err != nil {
		t.Fatalf("holder's apply: %v", err)
	}

	clk.Add(leaseTTL - time.Second) // not renewed: past the deadline, not expired
	_, err := a.WriteSpans(x, c.Spans[1])
	lost(t, err, "span write past the deadline")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("span write past the deadline: %v, want it also unavailable (the sender retries)", err)
	}
	lost(t, a.Apply(x, store.Batch{Changes: []store.Change{{New: c.Record(1, 2)}}, Watermark: 2}), "apply past the deadline")
	_, err = b.AcquireLease(x, hb, leaseTTL)
	held(t, err, ha, t0.Add(leaseTTL), t0.Add(leaseTTL-time.Second))

	clk.Add(time.Second)
	if _, err := b.AcquireLease(x, hb, leaseTTL); err != nil {
		t.Fatalf("after the expiry: %v", err)
	}
	_, err = a.RenewLease(x)
	lost(t, err, "old holder's renewal")
	lost(t, a.PutSummaries(x, nil), "old holder's summaries")
	lost(t, a.DeleteBefore(x, t0.UnixNano()), "old holder's retention")
	// The new holder writes; the old one's refused apply left nothing.
	if _, err := b.WriteSpans(x, c.Spans[1]); err != nil {
		t.Fatalf("new holder's write: %v", err)
	}
	if err := b.Apply(x, store.Batch{Changes: []store.Change{{New: c.Record(1, 2)}}, Watermark: 2}); err != nil {
		t.Fatalf("new holder's apply: %v", err)
	}
	recs, err := b.Records(x, []graph.TraceID{c.Traces[0].ID, c.Traces[1].ID})
	if err != nil || len(recs) != 2 {
		t.Fatalf("records %d %v, want both", len(recs), err)
	}
}

// exitedPID returns the pid of a process that has exited.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running a short process: %v", err)
	}
	return cmd.Process.Pid
}

// The lease of a holder of this machine and pid namespace whose process
// has exited is taken at once; one of another machine must expire first.
func testLeaseExited(t *testing.T, open LeaseOpener) {
	x := ctx(t)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clk := NewFakeClock(t0)
	dead := store.NewLeaseHolder()
	dead.PID = exitedPID(t)
	if !dead.Exited() {
		t.Skip("this platform cannot tell that a process has exited: crashed holders' leases expire")
	}
	elsewhere := dead
	elsewhere.ID, elsewhere.Namespace = store.NewLeaseHolder().ID, "another-machine/pid:[1]"
	a, b := open(t, clk.Now), open(t, clk.Now)
	hb := store.NewLeaseHolder()

	if _, err := a.AcquireLease(x, elsewhere, leaseTTL); err != nil {
		t.Fatal(err)
	}
	_, err := b.AcquireLease(x, hb, leaseTTL)
	held(t, err, elsewhere, t0.Add(leaseTTL), t0)

	a2 := open(t, clk.Now)
	clk.Add(leaseTTL)
	if _, err := a2.AcquireLease(x, dead, leaseTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(x, hb, leaseTTL); err != nil {
		t.Fatalf("the holder has exited, its lease is still held: %v", err)
	}
}

// Instances that start at once: exactly one takes the lease, round after
// round (a wrong protocol may pick one winner by luck once).
func testLeaseConcurrent(t *testing.T, open LeaseOpener) {
	x := ctx(t)
	const n, rounds = 6, 5
	stores := make([]store.Store, n)
	for i := range stores {
		stores[i] = open(t, nil)
	}
	late := open(t, nil)
	for round := range rounds {
		holders := make([]store.LeaseHolder, n)
		for i := range holders {
			holders[i] = store.NewLeaseHolder()
		}
		errs := make([]error, n)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				_, errs[i] = stores[i].AcquireLease(x, holders[i], leaseTTL)
			}()
		}
		start.Done()
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: instances %d and %d both took the lease", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrLeaseHeld):
				t.Fatalf("round %d: instance %d: %v, want taken or refused as held", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no instance took the lease: %v", round, errs)
		}
		_, err := late.AcquireLease(x, store.NewLeaseHolder(), leaseTTL)
		var e *store.LeaseHeldError
		if !errors.As(err, &e) || e.Holder.ID != holders[winner].ID {
			t.Fatalf("round %d: a later instance: %v, want refused naming the winner %s", round, err, holders[winner].ID)
		}
		if err := stores[winner].ReleaseLease(x); err != nil {
			t.Fatal(err)
		}
	}
}

// Readers neither take the lease nor need it: an instance that never
// took it reads and is not fenced, and closing it leaves the holder's
// lease alone; closing the holder releases it.
func testLeaseReaders(t *testing.T, open LeaseOpener) {
	x := ctx(t)
	a, reader := open(t, nil), open(t, nil)
	ha := store.NewLeaseHolder()
	if _, err := a.AcquireLease(x, ha, leaseTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Watermark(x); err != nil {
		t.Fatalf("reader: %v", err)
	}
	if _, err := reader.Report(x, store.Query{}); err != nil {
		t.Fatalf("reader: %v", err)
	}
	if err := reader.ReleaseLease(x); err != nil {
		t.Fatalf("releasing a lease never taken: %v", err)
	}
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}
	b := open(t, nil)
	var e *store.LeaseHeldError
	if _, err := b.AcquireLease(x, store.NewLeaseHolder(), leaseTTL); !errors.As(err, &e) || e.Holder.ID != ha.ID {
		t.Fatalf("after a reader closed: %v, want the lease still held by %s", err, ha.ID)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(x, store.NewLeaseHolder(), leaseTTL); err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
}

// An instance opened while another held the lease continues from what the
// holder wrote: its span writes follow the holder's last.
func testLeaseTakeover(t *testing.T, open LeaseOpener) {
	x := ctx(t)
	c := NewCorpus(t, 3, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	a := open(t, nil)
	if _, err := a.AcquireLease(x, store.NewLeaseHolder(), leaseTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteSpans(x, c.Spans[0]); err != nil {
		t.Fatal(err)
	}
	b := open(t, nil) // opened now, takes over later
	last, err := a.WriteSpans(x, c.Spans[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(x, store.NewLeaseHolder(), leaseTTL); err != nil {
		t.Fatal(err)
	}
	seq, err := b.WriteSpans(x, c.Spans[2])
	if err != nil || seq <= last {
		t.Fatalf("new holder's write: sequence %d after the old holder's %d, %v", seq, last, err)
	}
	var seqs []uint64
	if err := b.SpansAfter(x, 0, func(s uint64, _ []graph.Span) error { seqs = append(seqs, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 {
		t.Fatalf("writes %v, want three", seqs)
	}
}
