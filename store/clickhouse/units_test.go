package clickhouse

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store/storetest"
)

// Ranges cover [lo, hi) exactly once: whole days from the day tier, whole
// hours from the hour tier, the rest from the minutes.
func TestRanges(t *testing.T) {
	const h, d = 60, 1440
	for _, c := range []struct {
		lo, hi int64
		want   []bucketRange
	}{
		{0, 0, nil},
		{10, 50, []bucketRange{{0, 10, 50}}},
		{60, 240, []bucketRange{{1, 1, 4}}},
		{45, 250, []bucketRange{{0, 45, 60}, {1, 1, 4}, {0, 240, 250}}},
		{d, 3 * d, []bucketRange{{2, 1, 3}}},
		{d - 5, 3*d + h + 7, []bucketRange{{0, d - 5, d}, {2, 1, 3}, {1, 72, 73}, {0, 3*d + h, 3*d + h + 7}}},
		{d + 5, 3*d + 7, []bucketRange{{0, d + 5, d + h}, {1, 25, 48}, {2, 2, 3}, {0, 3 * d, 3*d + 7}}},
		{d + 5, 2*d - 7, []bucketRange{{0, d + 5, d + h}, {1, 25, 47}, {0, 2*d - h, 2*d - 7}}},
		{-d - 5, d + 3, []bucketRange{{0, -d - 5, -d}, {2, -1, 1}, {0, d, d + 3}}},
	} {
		got := ranges(c.lo, c.hi)
		if !slices.Equal(got, c.want) {
			t.Errorf("ranges(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
		}
		// Every minute covered exactly once.
		n := int64(0)
		for _, r := range got {
			n += (r.hi - r.lo) * minutesPer[r.tier]
		}
		if n != c.hi-c.lo {
			t.Errorf("ranges(%d, %d) covers %d minutes", c.lo, c.hi, n)
		}
	}
	// Unbounded: a handful of ranges.
	if got := ranges(minBound, maxBound); len(got) > 5 || got[0].tier != 0 {
		t.Errorf("unbounded: %v", got)
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
		run, skipped, err := forServer(m, c.v, nil)
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
		if _, _, err := forServer(m, serverVersion{18, 16}, nil); err != nil {
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

// Every figure of a report goes into rollup rows and comes back from them
// (the rows of a bucket summed by key, as readers do).
func TestRowsRoundTrip(t *testing.T) {
	c := storetest.NewCorpus(t, 120, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 7*time.Second)
	want := analysis.NewReport()
	for i, r := range c.Results {
		x := *r
		if i%3 == 0 { // versions, which the corpus has none of
			x.Versions = []analysis.ServiceVersion{{Service: "front", Version: "v" + strconv.Itoa(i%2)}, {Service: "ads", Version: "2.1"}}
		}
		want.Add(&x, 1)
	}
	if len(want.Versions) == 0 || len(want.Nodes) == 0 {
		t.Fatal("the report has no versions or no nodes")
	}
	sums := map[rowKey]int64{}
	rows := 0
	eachRow(want, func(k rowKey, n int64) {
		if n == 0 {
			t.Fatalf("a row of zero: %+v", k)
		}
		sums[k] += n
		rows++
	})
	got := analysis.NewReport()
	for k, n := range sums {
		addRow(got, k, n)
	}
	got.Prune()
	if g, w := dump(got), dump(want); g != w {
		t.Fatalf("%d rows read back differ:\n got %s\nwant %s", rows, g, w)
	}
}
