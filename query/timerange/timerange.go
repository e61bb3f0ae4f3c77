// Package timerange parses the time arguments users give commands and the
// REST API: RFC 3339 timestamps, unix seconds, and "now" with an optional
// offset ("now-2h").
//
// Instants are unix nanoseconds in an int64, as everything downstream
// keeps them, so the instants a time argument may name are Min … Max
// (1677-09-21T00:12:43.145224192Z … 2262-04-11T23:47:16.854775807Z).
// Anything outside is refused: converted, it would wrap around to another
// instant and select other data without a word.
package timerange

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Min and Max are the first and the last instant a time argument may name:
// the range of int64 unix nanoseconds.
var (
	Min = time.Unix(0, math.MinInt64).UTC()
	Max = time.Unix(0, math.MaxInt64).UTC()
)

// RangeText names the representable range in messages and help.
var RangeText = Min.Format(time.RFC3339Nano) + " … " + Max.Format(time.RFC3339Nano)

// maxUnixSeconds and maxNanos are Max in unix seconds and nanoseconds:
// later unix seconds are out of range.
const (
	maxUnixSeconds = math.MaxInt64 / int64(time.Second)
	maxNanos       = math.MaxInt64 % int64(time.Second)
)

// Parse returns the instant s names, in unix nanoseconds: an RFC 3339
// timestamp ("2026-11-30T10:00:00Z"), unix seconds ("1764496800", a
// fraction allowed, at most nanoseconds), "now", or "now" plus or minus a
// Go duration ("now-15m"). An instant outside Min … Max is an error.
func Parse(s string, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty time")
	}
	if rest, ok := strings.CutPrefix(s, "now"); ok {
		if rest == "" {
			return inRange(s, now)
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
		// time.Time holds instants far beyond int64 nanoseconds: the sum
		// is exact, and inRange judges it.
		return inRange(s, now.Add(d))
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return inRange(s, t)
	}
	if ns, ok, err := unixSeconds(s); ok {
		if err != nil {
			return 0, fmt.Errorf("time %q: %w", s, err)
		}
		return ns, nil
	}
	return 0, fmt.Errorf("time %q: want RFC 3339 (2006-01-02T15:04:05Z), unix seconds, or now-DURATION", s)
}

// inRange returns t in unix nanoseconds, or an error naming s when t is
// outside Min … Max (where UnixNano's result is undefined).
func inRange(s string, t time.Time) (int64, error) {
	if t.Before(Min) || t.After(Max) {
		return 0, fmt.Errorf("time %q is %s, outside the range times can take (%s)", s, t.UTC().Format(time.RFC3339Nano), RangeText)
	}
	return t.UnixNano(), nil
}

// unixSeconds reads decimal unix seconds, "SECONDS[.FRACTION]", exactly
// (a float64 has no nanoseconds left near Max). ok is false when s is not
// of that form.
func unixSeconds(s string) (ns int64, ok bool, err error) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return 0, false, nil
	}
	tooLate := func() error {
		return fmt.Errorf("unix seconds after %d.%09d, outside the range times can take (%s)", maxUnixSeconds, maxNanos, RangeText)
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec > maxUnixSeconds {
		return 0, true, tooLate()
	}
	if len(frac) > 9 {
		frac = frac[:9] // below a nanosecond
	}
	nano, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	if sec == maxUnixSeconds && nano > maxNanos {
		return 0, true, tooLate()
	}
	return sec*int64(time.Second) + nano, true, nil
}
