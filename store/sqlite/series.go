package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

var _ store.SeriesReader = (*Store)(nil)

// APISeries reads a root API's per-step figures in three grouped queries
// (totals, radius and amplification histograms) from the coarsest tier
// whose buckets tile both the range and the step.
func (s *Store) APISeries(ctx context.Context, q store.Query, step int64) ([]*analysis.APIAgg, error) {
	lo, hi := q.MinuteRange()
	if q.From == 0 || q.To == 0 || step <= 0 || hi <= lo {
		return nil, fmt.Errorf("sqlite: a series needs a bounded range and a positive step")
	}
	level := 0
	for l := len(tiers) - 1; l > 0; l-- {
		if size := tiers[l].minutes; step%size == 0 && floorMod(lo, size) == 0 && floorMod(hi, size) == 0 {
			level = l
			break
		}
	}
	tier, size := tiers[level].id, tiers[level].minutes
	out := make([]*analysis.APIAgg, (hi-lo+step-1)/step)
	at := func(i int64) *analysis.APIAgg {
		if out[i] == nil {
			out[i] = &analysis.APIAgg{Radius: map[int]int64{}, Amplification: map[float64]int64{}}
		}
		return out[i]
	}
	// i = (bucket·size − lo) / step: the step a bucket falls in.
	args := []any{size, lo, step, tier, lo / size, hi / size, q.API}
	const where = ` WHERE tier = ? AND bucket >= ? AND bucket < ? AND api = ? GROUP BY i`
	idx := `(bucket * ? - ?) / ? AS i`
	err := s.scan(ctx, `SELECT `+idx+`, sum(traces), sum(failed), sum(root_errors), sum(remote_parent), sum(radius_sum),
		sum(suppressed), sum(hops), sum(counterfactual), sum(misattributed), sum(naive), sum(eligible), sum(fragments), sum(events)
		FROM rollup_api`+where, args, func(rows *sql.Rows) error {
		var i int64
		var a analysis.APIAgg
		if err := rows.Scan(&i, &a.Traces, &a.Failed, &a.RootErrors, &a.RemoteParent, &a.RadiusSum, &a.Suppressed,
			&a.Hops, &a.Counterfactual, &a.Misattributed, &a.Naive, &a.Eligible, &a.Fragments, &a.Events); err != nil {
			return err
		}
		dst := at(i)
		a.Radius, a.Amplification = dst.Radius, dst.Amplification
		*dst = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT `+idx+`, radius, sum(n) FROM rollup_radius`+where+`, radius HAVING sum(n) <> 0`, args,
		func(rows *sql.Rows) error {
			var i, n int64
			var r int
			if err := rows.Scan(&i, &r, &n); err != nil {
				return err
			}
			at(i).Radius[r] += n
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT `+idx+`, amp, sum(n) FROM rollup_amp`+where+`, amp HAVING sum(n) <> 0`, args,
		func(rows *sql.Rows) error {
			var i, n int64
			var amp float64
			if err := rows.Scan(&i, &amp, &n); err != nil {
				return err
			}
			at(i).Amplification[amp] += n
			return nil
		})
	if err != nil {
		return nil, err
	}
	for i, a := range out {
		if a != nil && a.Traces == 0 && len(a.Radius) == 0 && len(a.Amplification) == 0 {
			out[i] = nil
		}
	}
	return out, nil
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
