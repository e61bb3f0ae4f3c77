package clickhouse

import (
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/schema"
)

// Ranges cover [lo, hi) exactly once: whole clean hours from the hourly
// tier, the rest from the minutes.
func TestRanges(t *testing.T) {
	for _, c := range []struct {
		lo, hi int64
		dirty  []int64
		want   []bucketRange
	}{
		{0, 0, nil, nil},
		{10, 50, nil, []bucketRange{{0, 10, 50}}},
		{60, 240, nil, []bucketRange{{1, 1, 4}}},
		{45, 250, nil, []bucketRange{{0, 45, 60}, {1, 1, 4}, {0, 240, 250}}},
		{45, 250, []int64{2}, []bucketRange{{0, 45, 60}, {1, 1, 2}, {0, 120, 180}, {1, 3, 4}, {0, 240, 250}}},
		{60, 240, []int64{1, 3, 7}, []bucketRange{{0, 60, 120}, {1, 2, 3}, {0, 180, 240}}},
	} {
		dirty := map[int64]bool{}
		for _, h := range c.dirty {
			dirty[h] = true
		}
		if got := ranges(c.lo, c.hi, dirty); !slices.Equal(got, c.want) {
			t.Errorf("ranges(%d, %d, %v) = %v, want %v", c.lo, c.hi, c.dirty, got, c.want)
		}
	}
	// Unbounded, with a dirty hour: without walking every hour.
	got := ranges(minBound, maxBound, map[int64]bool{5: true})
	if len(got) != 5 || got[1].hi != 5 || got[2] != (bucketRange{0, 300, 360}) || got[3].lo != 6 {
		t.Errorf("unbounded with hour 5 dirty: %v", got)
	}
}

// Statements after "-- requires: X.Y" run only on X.Y and later.
func TestStatementsGated(t *testing.T) {
	m := schema.Migration{Version: 9, Name: "t", SQL: `-- a comment
CREATE TABLE a (x UInt8) ENGINE = Memory;
-- requires: 21.8
ALTER TABLE a
    MODIFY COLUMN x UInt8 CODEC(ZSTD(1));
CREATE TABLE b (x UInt8) ENGINE = Memory;
`}
	for _, c := range []struct {
		v       serverVersion
		run     int
		skipped int
	}{{serverVersion{18, 16}, 2, 1}, {serverVersion{21, 8}, 3, 0}, {serverVersion{26, 7}, 3, 0}} {
		run, skipped, err := forServer(m, c.v)
		if err != nil || len(run) != c.run || skipped != c.skipped {
			t.Errorf("%v: %d run, %d skipped, %v; want %d, %d", c.v, len(run), skipped, err, c.run, c.skipped)
		}
		if !strings.Contains(strings.Join(run, ";"), "CREATE TABLE b") {
			t.Errorf("%v: the statement after the gated one was lost", c.v)
		}
	}
	// Every shipped migration parses.
	ms, err := schema.Load("clickhouse")
	if err != nil || len(ms) == 0 {
		t.Fatalf("%d migrations, %v", len(ms), err)
	}
	for _, m := range ms {
		if _, _, err := forServer(m, serverVersion{18, 16}); err != nil {
			t.Error(err)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"GET /x":      `'GET /x'`,
		`it's`:        `'it\'s'`,
		`a\b`:         `'a\\b'`,
		"tab\there":   `'tab\x09here'`,
		"ünïcode ✓":   `'ünïcode ✓'`,
		"semi;colon?": `'semi;colon?'`,
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
}
