package web

import (
	"strconv"
	"testing"
	"time"
)

// The gate remembers maxCanaries canaries: a new one past them has no age
// (no grace: an undecided decision is a 412), the ones it holds keep
// theirs, and canaries not seen for canaryForget make room.
func TestCanariesBounded(t *testing.T) {
	var cs canaries
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	hook := func(i int) webhook { return webhook{Name: "svc" + strconv.Itoa(i), Namespace: "prod", Checksum: "c"} }
	for i := range maxCanaries {
		// The first half seen at t0, the second an hour later.
		at := t0
		if i >= maxCanaries/2 {
			at = t0.Add(time.Hour)
		}
		if c := cs.see(hook(i), at); !c.remembered || !c.first || c.age != 0 {
			t.Fatalf("canary %d: %+v", i, c)
		}
	}
	full := t0.Add(time.Hour + time.Minute)
	if c := cs.see(hook(maxCanaries), full); c.remembered || c.first {
		t.Errorf("past %d canaries: %+v, want it not remembered", maxCanaries, c)
	}
	if c := cs.see(hook(0), full); !c.remembered || c.first || c.age != time.Hour+time.Minute || !c.since.Equal(t0) {
		t.Errorf("a canary held, when full: %+v", c)
	}
	// 24 hours after the first half was last seen (canary 0 at full), the
	// rest of it is forgotten: room for new ones, which are young.
	later := t0.Add(canaryForget + time.Second)
	if c := cs.see(hook(maxCanaries), later); !c.remembered || !c.first || c.age != 0 {
		t.Errorf("after the first half is forgotten: %+v", c)
	}
	if c := cs.see(hook(1), later); !c.remembered || !c.first {
		t.Errorf("a forgotten canary comes back young: %+v", c)
	}
	if c := cs.see(hook(0), later); !c.remembered || c.first || !c.since.Equal(t0) {
		t.Errorf("canary 0, seen within 24 hours, keeps its age: %+v", c)
	}
	if c := cs.see(hook(maxCanaries-1), later); !c.remembered || c.first || c.age != canaryForget+time.Second-time.Hour {
		t.Errorf("the second half keeps its age: %+v", c)
	}
	if n := len(cs.seen); n != maxCanaries/2+3 {
		t.Errorf("%d canaries held, want %d", n, maxCanaries/2+3)
	}
}
