// Package timerange parses the time arguments users give commands and the
// REST API: RFC 3339 timestamps, unix seconds, and "now" with an optional
// offset ("now-2h").
package timerange

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Parse returns the instant s names, in unix nanoseconds: an RFC 3339
// timestamp ("2026-11-30T10:00:00Z"), unix seconds ("1764496800", fractions
// allowed), "now", or "now" plus or minus a Go duration ("now-15m").
func Parse(s string, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty time")
	}
	if rest, ok := strings.CutPrefix(s, "now"); ok {
		if rest == "" {
			return now.UnixNano(), nil
		}
		if rest[0] != '-' && rest[0] != '+' {
			return 0, fmt.Errorf("time %q: want now, now-DURATION or now+DURATION", s)
		}
		d, err := time.ParseDuration(rest[1:])
		if err != nil {
			return 0, fmt.Errorf("time %q: %w", s, err)
		}
		if rest[0] == '-' {
			d = -d
		}
		return now.Add(d).UnixNano(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
			return 0, fmt.Errorf("time %q: unix seconds out of range", s)
		}
		return int64(f * 1e9), nil
	}
	return 0, fmt.Errorf("time %q: want RFC 3339 (2006-01-02T15:04:05Z), unix seconds, or now-DURATION", s)
}
