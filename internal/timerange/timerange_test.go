package timerange

import (
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
