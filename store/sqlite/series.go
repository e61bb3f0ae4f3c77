package sqlite

import (
	"context"
	"fmt"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

var _ store.SeriesReader = (*Store)(nil)

// APISeries reads a root API's per-step figures in a grouped query per
// table of per-API figures (sums, radius and amplification histograms)
// from the coarsest tier
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
	var i int64
	for _, t := range rollupTables {
		if t.scope.Aggregate() != analysis.ScopeAPI {
			continue
		}
		err := s.scanTable(ctx, t, t.series, args, []any{&i}, func(value float64, sums []int64) error {
			t.add(analysis.Agg{API: at(i)}, value, sums)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for i, a := range out {
		if a != nil && a.Traces == 0 && len(a.Radius) == 0 && len(a.Amplification) == 0 {
			out[i] = nil
		}
	}
	return out, nil
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
