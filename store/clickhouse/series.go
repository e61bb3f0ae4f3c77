package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

var _ store.SeriesReader = (*Store)(nil)

// apiStats lists the stat codes of a root API's own figures (its sums and
// histograms, not its owners'): what a series point shows.
var apiStats = func() string {
	var codes []string
	for _, f := range analysis.Figures {
		if f.Scope.Aggregate() == analysis.ScopeAPI {
			codes = append(codes, strconv.Itoa(int(f.Stat)))
		}
	}
	return strings.Join(codes, ", ")
}()

// APISeries reads a root API's per-step figures in one query: each step
// tiled by the whole days, hours and minutes inside it (from the retention
// floor on), each bucket's current generation of every partition, the
// rows grouped by bucket and added to the step holding it. A report per
// step cost a round trip each (60 for a default series).
func (s *Store) APISeries(ctx context.Context, q store.Query, step int64) ([]*analysis.APIAgg, error) {
	if err := s.checkOpen("read series"); err != nil {
		return nil, err
	}
	qlo, qhi := q.MinuteRange()
	if q.From == 0 || q.To == 0 || step <= 0 || qhi <= qlo {
		return nil, fmt.Errorf("clickhouse: a series needs a bounded range and a positive step")
	}
	out := make([]*analysis.APIAgg, (qhi-qlo+step-1)/step)
	lo, hi := s.minuteRange(ctx, q)
	// The buckets of each tier the steps' tiles use, as IN lists the
	// primary key (tier, bucket, …) answers: ClickHouse 18.16 analyses an
	// OR of a hundred ranges no better than a scan. Long runs (the days of
	// long steps) as ranges; queries of at most maxValues buckets each, as
	// a query's size is bounded (max_query_size, 256 KiB).
	const longRun, maxValues = 64, 2500
	var runs [3][]bucketRange
	for sLo := qlo; sLo < qhi; sLo += step {
		rollup.Tile(max(sLo, lo), min(sLo+step, qhi, hi), int(tierDay), tierMinutes, func(level int, bLo, bHi int64) {
			tier := uint8(level)
			rs := runs[tier]
			if n := len(rs); n > 0 && rs[n-1].hi == bLo {
				rs[n-1].hi = bHi // a bucket's step is found by the bucket: runs may cross steps
			} else {
				rs = append(rs, bucketRange{tier, bLo, bHi})
			}
			runs[tier] = rs
		})
	}
	var queries [][]string
	var terms []string
	values := 0
	add := func(term string, n int) {
		if values+n > maxValues && len(terms) > 0 {
			queries, terms, values = append(queries, terms), nil, 0
		}
		terms, values = append(terms, term), values+n
	}
	for tier, rs := range runs {
		var list []int64
		flush := func() {
			if len(list) > 0 {
				add(fmt.Sprintf("(tier = %d AND bucket IN (%s))", tier, intList(list)), len(list))
				list = nil
			}
		}
		for _, r := range rs {
			if r.hi-r.lo >= longRun {
				add(fmt.Sprintf("(tier = %d AND bucket >= %d AND bucket < %d)", tier, r.lo, r.hi), 2)
				continue
			}
			for b := r.lo; b < r.hi; b++ {
				if list = append(list, b); len(list) == maxValues {
					flush()
				}
			}
		}
		flush()
	}
	if len(terms) > 0 {
		queries = append(queries, terms)
	}
	for _, terms := range queries {
		if err := s.seriesRows(ctx, "("+strings.Join(terms, " OR ")+")", q.API, qlo, step, out); err != nil {
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

// seriesRows adds the rows of api's own figures cond selects to the steps
// of out holding their buckets (steps of step minutes from minute qlo).
func (s *Store) seriesRows(ctx context.Context, cond, api string, qlo, step int64, out []*analysis.APIAgg) error {
	return s.query(ctx, "read series", `SELECT tier, bucket, toInt8(stat), value, sum(n) FROM rollups WHERE `+cond+` AND `+s.current(cond)+
		` AND api = `+quote(api)+` AND toInt8(stat) IN (`+apiStats+`) GROUP BY tier, bucket, stat, value`, func(r driver.Rows) error {
		var tier uint8
		var bucket, n int64
		var stat int8
		var value float64
		if err := r.Scan(&tier, &bucket, &stat, &value, &n); err != nil {
			return err
		}
		f := figureOf[uint8(stat)]
		if f == nil || int(tier) >= len(minutesPer) {
			return nil
		}
		i := (bucket*minutesPer[tier] - qlo) / step
		if i < 0 || i >= int64(len(out)) {
			return nil
		}
		if out[i] == nil {
			out[i] = &analysis.APIAgg{Radius: map[int]int64{}, Amplification: map[float64]int64{}}
		}
		f.Add(analysis.Agg{API: out[i]}, value, n)
		return nil
	})
}

// tierMinutes returns the bucket size of a tier, in minutes.
func tierMinutes(tier int) int64 { return minutesPer[tier] }
