package timerange

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-30T10:00:00Z":      time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
		"2026-11-30T10:00:00+01:00": time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC),
		"1764496800":                time.Unix(1764496800, 0),
		"1764496800.5":              time.Unix(1764496800, 5e8),
		"now":                       now,
		"now-15m":                   now.Add(-15 * time.Minute),
		"now+1h":                    now.Add(time.Hour),
	} {
		got, err := Parse(in, now)
		if err != nil || got != want.UnixNano() {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want.UnixNano())
		}
	}
	for _, bad := range []string{"", "yesterday", "now-", "now*2", "NaN", "-5", "1e300", "2026-13-01T00:00:00Z"} {
		if _, err := Parse(bad, now); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// The instants at the edges of int64 unix nanoseconds are taken, and one
// nanosecond beyond them is refused, in every form: no wrapping around.
func TestParseBoundaries(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// math.MaxInt64 ns = 9223372036 s 854775807 ns after the epoch;
	// math.MinInt64 ns = 9223372036 s 854775808 ns before it.
	toMax := time.Unix(9223372036, 854775807).Sub(now) // now+toMax is the last instant
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2262-04-11T23:47:16.854775807Z", math.MaxInt64, true},
		{"2262-04-11T23:47:16.854775808Z", 0, false},
		{"2262-04-12T01:47:16.854775807+02:00", math.MaxInt64, true},
		{"2262-04-12T01:47:16.854775808+02:00", 0, false},
		{"1677-09-21T00:12:43.145224192Z", math.MinInt64, true},
		{"1677-09-21T00:12:43.145224191Z", 0, false},
		{"1677-09-20T23:12:43.145224191-01:00", 0, false},
		{"2263-01-01T00:00:00Z", 0, false},
		{"0001-01-01T00:00:00Z", 0, false},
		{"9999-12-31T23:59:59Z", 0, false},
		{"9223372036.854775807", math.MaxInt64, true},
		{"9223372036.8547758079", math.MaxInt64, true}, // below a nanosecond: cut
		{"9223372036.854775808", 0, false},
		{"9223372037", 0, false},
		{"100000000000", 0, false}, // 1e11: accepted before, and wrapped
		{"99999999999999999999", 0, false},
		{"0", 0, true},
		{"0.000000001", 1, true},
		{"now+" + toMax.String(), math.MaxInt64, true},
		{"now+" + (toMax + 1).String(), 0, false},
		{"now+2562047h47m16.854775807s", 0, false},                             // the longest Go duration
		{"now-2562047h47m16.854775807s", now.UnixNano() - math.MaxInt64, true}, // (the first instant is further than any duration from now)
		{"now+2562048h", 0, false},                                             // not a Go duration at all
	} {
		got, err := Parse(c.in, now)
		switch {
		case c.ok && (err != nil || got != c.want):
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		case !c.ok && err == nil:
			t.Errorf("Parse(%q) = %d (%s), want an error", c.in, got, time.Unix(0, got).UTC().Format(time.RFC3339Nano))
		case !c.ok && !strings.Contains(err.Error(), c.in):
			t.Errorf("Parse(%q): %v does not name the argument", c.in, err)
		}
	}
	if _, err := Parse("2263-01-01T00:00:00Z", now); err == nil || !strings.Contains(err.Error(), "1677-09-21T00:12:43.145224192Z … 2262-04-11T23:47:16.854775807Z") {
		t.Errorf("the error does not give the range: %v", err)
	}
}
