// Package rollup computes what a store batch changes in the rollups, for
// the stores that keep them as per-minute sums (store/sqlite,
// store/clickhouse).
package rollup

import (
	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

// Deltas returns, per minute, what the changes add to its rollups: each
// old record's result taken away, each new one's added. Minutes in skip
// (summed again whole by the caller) are left out.
func Deltas(changes []store.Change, skip map[int64]struct{}) map[int64]*analysis.Report {
	deltas := map[int64]*analysis.Report{}
	add := func(r *store.Record, sign int64) {
		if r == nil {
			return
		}
		m := r.Minute()
		if _, ok := skip[m]; ok {
			return
		}
		d := deltas[m]
		if d == nil {
			d = analysis.NewReport()
			deltas[m] = d
		}
		d.Add(r.Result, sign)
	}
	for _, c := range changes {
		add(c.Old, -1)
		add(c.New, 1)
	}
	return deltas
}
