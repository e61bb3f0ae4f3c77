package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAnswersBound: the cache holds at most its bound in bytes, dropping
// the least recently used answer first, and keeps no answer larger than
// the bound.
func TestAnswersBound(t *testing.T) {
	c := newAnswers(10_000)
	x := context.Background()
	mk := func(n int) func(context.Context) (*answer, error) {
		return func(context.Context) (*answer, error) {
			return newAnswer(200, strings.Repeat("x", n))
		}
	}
	// The size an answer counts: its body, its gzip and a fixed overhead.
	probe, _ := newAnswer(200, strings.Repeat("x", 1000))
	if want := int64(len(probe.body) + len(probe.gz) + 256); probe.size != want || len(probe.body) != 1003 {
		t.Fatalf("an answer of %d bytes counts %d, want %d", len(probe.body), probe.size, want)
	}
	per := probe.size
	fits := int(10_000 / per)
	for i := 0; i < 20; i++ {
		if _, err := c.get(x, fmt.Sprint("k", i), time.Second, mk(1000)); err != nil {
			t.Fatal(err)
		}
		if c.bytes() > 10_000 {
			t.Fatalf("after %d answers the cache holds %d bytes, bound 10000", i+1, c.bytes())
		}
		// k0 is asked again each time: the most recently used, it stays.
		if _, err := c.get(x, "k0", time.Second, mk(1000)); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.bytes(); got != int64(fits)*per {
		t.Errorf("the cache holds %d bytes, want %d answers of %d", got, fits, per)
	}
	c.mu.Lock()
	_, k0 := c.byKey["k0"]
	_, k19 := c.byKey["k19"]
	_, k1 := c.byKey["k1"]
	held := len(c.byKey)
	c.mu.Unlock()
	if !k0 || !k19 || k1 || held != fits {
		t.Errorf("held %d answers (k0 %v, k19 %v, k1 %v): want %d, the most recently used", held, k0, k19, k1, fits)
	}
	if n := c.computed.Load(); n != 20 {
		t.Errorf("%d answers computed, want 20 (k0 once)", n)
	}
	// Larger than the bound: answered, not kept.
	a, err := c.get(x, "big", time.Second, mk(20_000))
	if err != nil || len(a.body) != 20_003 {
		t.Fatalf("a large answer: %v", err)
	}
	c.mu.Lock()
	_, big := c.byKey["big"]
	c.mu.Unlock()
	if big || c.bytes() > 10_000 {
		t.Errorf("an answer larger than the bound was kept (%d bytes held)", c.bytes())
	}
}

// TestAssemble: an answer's members with the request's own make the
// object encoding/json writes for the map of them all.
func TestAssemble(t *testing.T) {
	m := map[string]any{"zeta": []int{1, 2}, "apis": map[string]string{"a": "<b>"}, "g": 1.5}
	a, err := newMembers(m)
	if err != nil {
		t.Fatal(err)
	}
	from, to := time.Date(2026, 3, 1, 10, 0, 0, 123, time.UTC), time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	got := a.assemble([]member{echoTime("from", from), echoTime("to", to)})
	m["from"], m["to"] = from, to
	want, _ := encodeJSON(m)
	if string(got.body) != string(want) {
		t.Fatalf("assembled %s\nwant      %s", got.body, want)
	}
	other := a.assemble([]member{echoTime("from", from.Add(time.Second)), echoTime("to", to)})
	if other.tag == got.tag {
		t.Error("two echoes, one ETag")
	}
}

// TestAnswersPanic: a computation that panics fails its requests with an
// error (the process goes on) and is not kept.
func TestAnswersPanic(t *testing.T) {
	c := newAnswers(1 << 20)
	_, err := c.get(context.Background(), "k", time.Second, func(context.Context) (*answer, error) { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("a panicking computation: %v, want its error", err)
	}
	a, err := c.get(context.Background(), "k", time.Second, func(context.Context) (*answer, error) { return newAnswer(200, 1) })
	if err != nil || string(a.body) != "1\n" {
		t.Fatalf("asked again: %v %q", err, a.body)
	}
}
