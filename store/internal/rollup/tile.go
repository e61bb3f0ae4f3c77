package rollup

import "github.com/stormradius/stormradius/analysis"

// AddAPI adds root API api's figures of part (a report of ranges of
// buckets) to a (a step of a series).
func AddAPI(a *analysis.APIAgg, part *analysis.Report, api string) {
	into := analysis.NewReport()
	into.APIs[api] = a
	into.Merge(part, 1)
}

// Tile covers minutes [lo, hi) with the whole buckets of level inside it
// and, at its edges, of the levels below: emit gets runs of buckets
// [bLo, bHi) of one level. size gives a level's bucket length in minutes;
// level 0 is the minute.
func Tile(lo, hi int64, level int, size func(level int) int64, emit func(level int, bLo, bHi int64)) {
	if lo >= hi {
		return
	}
	if level == 0 {
		emit(0, lo, hi)
		return
	}
	n := size(level)
	bLo, bHi := FloorDiv(lo+n-1, n), FloorDiv(hi, n)
	if bLo >= bHi {
		Tile(lo, hi, level-1, size, emit)
		return
	}
	Tile(lo, bLo*n, level-1, size, emit)
	emit(level, bLo, bHi)
	Tile(bHi*n, hi, level-1, size, emit)
}

// FloorDiv is a / b rounded down (towards minus infinity), as buckets of
// minutes before 1970 need.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
