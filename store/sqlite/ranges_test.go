package sqlite

import (
	"math/rand/v2"
	"testing"
)

// ranges covers every minute of [lo, hi) exactly once and no other minute
// (counting a bucket taken away as -1), with few rows: at most a day
// range, two hour buckets and two day buckets' worth of edges.
func TestRangesCoverExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const span = 4 * 24 * 60
	cases := [][2]int64{{0, 60}, {1, 60}, {0, 1}, {59, 61}, {30, 91}, {0, 1440}, {1439, 1441}, {5, 2 * 1440}, {-100, 100}}
	for i := 0; i < 3000; i++ {
		lo := rng.Int64N(span) - span/2
		cases = append(cases, [2]int64{lo, lo + 1 + rng.Int64N(span)})
	}
	for _, c := range cases {
		lo, hi := c[0], c[1]
		cover := map[int64]int64{}
		rows := int64(0)
		for _, r := range ranges(lo, hi) {
			size := tierSize(r.tier)
			rows += r.hi - r.lo
			for b := r.lo; b < r.hi; b++ {
				for m := b * size; m < (b+1)*size; m++ {
					cover[m] += r.sign
				}
			}
		}
		for m := lo - 2*1440; m < hi+2*1440; m++ {
			want := int64(0)
			if m >= lo && m < hi {
				want = 1
			}
			if cover[m] != want {
				t.Fatalf("[%d, %d): minute %d counted %d times, want %d: %+v", lo, hi, m, cover[m], want, ranges(lo, hi))
			}
		}
		// Two edges of at most 12 hours (or a day less 12), 3 ten minutes
		// and 5 minutes (or a bucket less them) each, and the whole days.
		if days := (hi - lo) / 1440; rows > days+2*(1+12+1+3+1+5) {
			t.Errorf("[%d, %d): %d rows", lo, hi, rows)
		}
	}
}
