package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/rollup"
	tiercache "github.com/stormradius/stormradius/store/internal/tiers"
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
	if level == 0 && hi-lo > step {
		// Steps that no tier tiles whole (a range of "now-7d" starts
		// mid-hour): each step from the coarsest buckets inside it, rather
		// than every minute of the range.
		if err := s.tiledSeries(ctx, q.API, lo, hi, step, at); err != nil {
			return nil, err
		}
		return prune(out), nil
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
	return prune(out), nil
}

// prune drops the steps that hold nothing.
func prune(out []*analysis.APIAgg) []*analysis.APIAgg {
	for i, a := range out {
		if a != nil && a.Traces == 0 && len(a.Radius) == 0 && len(a.Amplification) == 0 {
			out[i] = nil
		}
	}
	return out
}

// tiledSeries adds api's figures of each step of minutes [lo, hi) to
// at(step): each step tiled by the whole buckets of the coarsest tiers
// inside it (days, then hours, ten minutes and minutes at its edges).
// Each run of buckets is kept in the tier cache (tiers.go): after a write
// only the runs holding its minutes are read again, per tier and table,
// grouped by bucket.
func (s *Store) tiledSeries(ctx context.Context, api string, lo, hi, step int64, at func(int64) *analysis.APIAgg) error {
	type run struct {
		level  int
		lo, hi int64 // buckets
		step   int64
		gen    uint64
		rep    *analysis.Report // read from the database
	}
	var miss []*run
	key := func(level int, bLo, bHi int64) tiercache.Key {
		return tiercache.Key{Tier: tiers[level].id, Lo: bLo, Hi: bHi, Name: "\x00series\x00" + api}
	}
	_, perr := s.pos.Position(ctx) // another process's writes drop what is kept
	for i, sLo := int64(0), lo; sLo < hi; i, sLo = i+1, sLo+step {
		rollup.Tile(sLo, min(sLo+step, hi), len(tiers)-1, levelMinutes, func(level int, bLo, bHi int64) {
			rep, ok, gen := s.tiers.Lookup(key(level, bLo, bHi))
			if ok && perr == nil {
				rollup.AddAPI(at(i), rep, api)
				return
			}
			miss = append(miss, &run{level: level, lo: bLo, hi: bHi, step: i, gen: gen, rep: analysis.NewReport()})
		})
	}
	// Short runs (the edges' minutes, ten minutes, hours) by their
	// buckets, an IN list the primary key answers; long ones (days) by
	// range, through the (tier, api, bucket) index. An OR of ranges would
	// scan the tier.
	const inList, longRun = 500, 64
	for level := range tiers {
		id := tiers[level].id
		var conds []string
		var argss [][]any
		var list []any
		byBucket := map[int64]*run{}
		flush := func() {
			if len(list) > 0 {
				conds = append(conds, `tier = ? AND api = ? AND bucket IN (?`+strings.Repeat(",?", len(list)-1)+`)`)
				argss = append(argss, append([]any{id, api}, list...))
				list = nil
			}
		}
		for _, r := range miss {
			if r.level != level {
				continue
			}
			s.tiers.Reads.Add(1)
			for b := r.lo; b < r.hi; b++ {
				byBucket[b] = r
			}
			if r.hi-r.lo >= longRun {
				conds = append(conds, `tier = ? AND api = ? AND bucket >= ? AND bucket < ?`)
				argss = append(argss, []any{id, api, r.lo, r.hi})
				continue
			}
			for b := r.lo; b < r.hi; b++ {
				if list = append(list, b); len(list) == inList {
					flush()
				}
			}
		}
		flush()
		var b int64
		for i, cond := range conds {
			for _, t := range rollupTables {
				if t.scope.Aggregate() != analysis.ScopeAPI {
					continue
				}
				err := s.scanTable(ctx, t, t.selectSQL([]string{"bucket"}, cond), argss[i], []any{&b}, func(value float64, sums []int64) error {
					t.add(analysis.Agg{API: byBucket[b].rep.API(api)}, value, sums)
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
	}
	for _, r := range miss {
		if perr == nil {
			s.tiers.Put(key(r.level, r.lo, r.hi), r.rep, r.gen)
		}
		rollup.AddAPI(at(r.step), r.rep, api)
	}
	return nil
}

// bucketRun is buckets [lo, hi) of one tier.
type bucketRun struct{ lo, hi int64 }

// levelMinutes returns the bucket size of tiers[level], in minutes.
func levelMinutes(level int) int64 { return tiers[level].minutes }

func floorMod(a, b int64) int64 { return a - rollup.FloorDiv(a, b)*b }
