package ownership

import (
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	max := time.Duration(1<<63 - 1)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 3 ", 3 * time.Second, true},
		{"120", 2 * time.Minute, true},
		{"99999999999999999999", max, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", max, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"Mon, 30 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Monday, 30-Nov-26 12:01:00 GMT", time.Minute, true},
		{"Mon Nov 30 12:00:05 2026", 5 * time.Second, true},
		{"Sun, 29 Nov 2026 12:00:00 GMT", 0, true}, // past: now
	} {
		got, ok := retryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestJitter(t *testing.T) {
	for n := range 70 {
		ceil := 25 * time.Millisecond
		for i := 0; i < n && ceil < time.Second; i++ {
			ceil *= 2
		}
		ceil = min(ceil, time.Second)
		for range 20 {
			if d := jitter(25*time.Millisecond, time.Second, n); d < 0 || d > ceil {
				t.Fatalf("jitter(n=%d) = %v, want within [0, %v]", n, d, ceil)
			}
		}
	}
	if jitter(0, time.Second, 3) != 0 || jitter(time.Hour, time.Hour, 1000) > time.Hour {
		t.Error("jitter edge cases")
	}
}

func TestRouteOf(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "",
		"/":                      "/",
		"/items/{id}":            "/items/{id}",
		"GET /items/{id}":        "/items/{id}",
		"GET  example.com/x/{$}": "/x/{$}",
		"example.com/":           "/",
		"POST example.com":       "",
		"GET":                    "",
	} {
		if got := routeOf(in); got != want {
			t.Errorf("routeOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBudget follows gRPC's retry throttling by hand: 10 tokens, 0.5 back
// per success, retries while more than 5 remain.
func TestBudget(t *testing.T) {
	b := newBudget(10, 0.5)
	for i := range 4 {
		b.failure() // 9, 8, 7, 6
		if !b.allow() {
			t.Fatalf("denied after %d failures", i+1)
		}
	}
	b.failure() // 5: not more than 5
	if b.allow() {
		t.Fatal("allowed at 5 tokens")
	}
	b.success() // 5.5
	if !b.allow() {
		t.Fatal("denied at 5.5 tokens")
	}
	for range 100 {
		b.failure()
	}
	if b.tokens.Load() != 0 {
		t.Fatalf("tokens %d, want 0 (floor)", b.tokens.Load())
	}
	for range 100 {
		b.success()
	}
	if b.tokens.Load() != 10000 {
		t.Fatalf("tokens %d, want 10000 (cap)", b.tokens.Load())
	}
	u := newBudget(0, 0)
	for range 100 {
		u.failure()
	}
	if !u.allow() {
		t.Fatal("unlimited budget denied")
	}
}
