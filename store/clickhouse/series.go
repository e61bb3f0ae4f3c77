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

// apiStats lists the stat codes of a root API's own figures: what a
// series point shows.
var apiStats = statCodes(func(f *analysis.Figure) bool { return f.Scope.Aggregate() == analysis.ScopeAPI })

// statCodes lists the stat codes of the figures keep keeps.
func statCodes(keep func(*analysis.Figure) bool) string {
	var codes []string
	for i := range analysis.Figures {
		if keep(&analysis.Figures[i]) {
			codes = append(codes, strconv.Itoa(int(analysis.Figures[i].Stat)))
		}
	}
	return strings.Join(codes, ", ")
}

// APISeries reads a root API's per-step figures: each step tiled by the
// whole days, hours and minutes inside it, each tile kept in the tier
// cache or read, the missing tiles in one query (not a round trip a step).
func (s *Store) APISeries(ctx context.Context, q store.Query, step int64) ([]*analysis.APIAgg, error) {
	if err := s.checkOpen("read series"); err != nil {
		return nil, err
	}
	qlo, qhi := q.MinuteRange()
	if q.From == 0 || q.To == 0 || step <= 0 || qhi <= qlo {
		return nil, fmt.Errorf("clickhouse: a series needs a bounded range and a positive step")
	}
	out := make([]*analysis.APIAgg, (qhi-qlo+step-1)/step)
	at := func(i int64) *analysis.APIAgg {
		if out[i] == nil {
			out[i] = &analysis.APIAgg{Radius: map[int]int64{}, Amplification: map[float64]int64{}}
		}
		return out[i]
	}
	name := "\x00series\x00" + q.API
	miss := s.seriesTiles(ctx, q, step, name, at)
	s.tiers.Reads.Add(int64(len(miss.tiles)))
	for _, terms := range seriesQueries(miss.runs()) {
		err := s.seriesRows(light(ctx), "("+strings.Join(terms, " OR ")+")", q.API, func(tier uint8, bucket int64) *analysis.APIAgg {
			t := miss.of(tier, bucket)
			switch {
			case t == nil:
				return nil
			case t.rep != nil:
				return t.rep.API(q.API)
			}
			return at(t.step)
		})
		if err != nil {
			return nil, err
		}
	}
	for _, t := range miss.tiles {
		if t.rep != nil {
			s.tiers.Put(tierKey(t.r, name), t.rep, t.gen)
			rollup.AddAPI(at(t.step), t.rep, q.API)
		}
	}
	for i, a := range out {
		if a != nil && a.Traces == 0 && len(a.Radius) == 0 && len(a.Amplification) == 0 {
			out[i] = nil
		}
	}
	return out, nil
}

// seriesTile is a tile of a series step to read (rep: to keep).
type seriesTile struct {
	r    bucketRange
	step int64
	gen  uint64
	rep  *analysis.Report // read from the server, to keep
}

// seriesMiss are the tiles of a series to read, short ones by bucket.
type seriesMiss struct {
	tiles    []*seriesTile
	byBucket map[bucketKey]*seriesTile
}

// longRun is the length of a run of buckets read as a range, not a list.
const longRun = 64

// seriesTiles tiles each step of q's series, adds the tiles kept under
// name to their steps (at), and returns the others.
func (s *Store) seriesTiles(ctx context.Context, q store.Query, step int64, name string, at func(int64) *analysis.APIAgg) *seriesMiss {
	qlo, qhi := q.MinuteRange()
	lo, hi := s.minuteRange(ctx, q)
	miss := &seriesMiss{byBucket: map[bucketKey]*seriesTile{}}
	cached := s.cachesOn(ctx)
	var edges []int64
	if cached {
		edges = s.hotEdges() // the minutes written lately, tiles of their own
	}
	for i, sLo := int64(0), qlo; sLo < qhi; i, sLo = i+1, sLo+step {
		rollup.Tile(max(sLo, lo), min(sLo+step, qhi, hi), int(tierDay), tierMinutes, func(level int, bLo, bHi int64) {
			for _, r := range cut([]bucketRange{{uint8(level), bLo, bHi}}, edges) {
				t := &seriesTile{r: r, step: i}
				if cached {
					v, ok, gen := s.tiers.Lookup(tierKey(r, name))
					if ok {
						rollup.AddAPI(at(i), v, q.API)
						continue
					}
					t.gen, t.rep = gen, analysis.NewReport()
				}
				miss.tiles = append(miss.tiles, t)
				for b := r.lo; b < r.hi && r.hi-r.lo < longRun; b++ {
					miss.byBucket[bucketKey{r.tier, b}] = t
				}
			}
		})
	}
	return miss
}

// of returns the tile holding a bucket.
func (m *seriesMiss) of(tier uint8, b int64) *seriesTile {
	if t := m.byBucket[bucketKey{tier, b}]; t != nil {
		return t
	}
	for _, t := range m.tiles {
		if t.r.tier == tier && t.r.lo <= b && b < t.r.hi {
			return t
		}
	}
	return nil
}

// runs returns the tiles' buckets of each tier as runs of consecutive
// buckets (runs may cross tiles).
func (m *seriesMiss) runs() [3][]bucketRange {
	var runs [3][]bucketRange
	for _, t := range m.tiles {
		rs := runs[t.r.tier]
		if n := len(rs); n > 0 && rs[n-1].hi == t.r.lo {
			rs[n-1].hi = t.r.hi
		} else {
			rs = append(rs, t.r)
		}
		runs[t.r.tier] = rs
	}
	return runs
}

// seriesQueries returns the terms of each query selecting runs: IN lists
// of one day each (18.16 scans for an OR of a hundred ranges), long runs
// as ranges; at most maxValues buckets a query (max_query_size).
func seriesQueries(runs [3][]bucketRange) [][]string {
	const maxValues = 2500
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
				add(fmt.Sprintf("(tier = %d AND bucket IN (%s)", tier, intList(list))+
					days(bucketRange{uint8(tier), list[0], list[len(list)-1] + 1})+")", len(list))
				list = nil
			}
		}
		dayOf := func(b int64) int64 { return dayOfMinute(b * minutesPer[tier]) }
		for _, r := range rs {
			if r.hi-r.lo >= longRun {
				add(where([]bucketRange{r}), 2)
				continue
			}
			for b := r.lo; b < r.hi; b++ {
				if len(list) == maxValues || len(list) > 0 && dayOf(list[0]) != dayOf(b) {
					flush()
				}
				list = append(list, b)
			}
		}
		flush()
	}
	if len(terms) > 0 {
		queries = append(queries, terms)
	}
	return queries
}

// seriesRows adds api's own figures cond selects to their bucket's
// aggregate (at; nil: dropped).
func (s *Store) seriesRows(ctx context.Context, cond, api string, at func(tier uint8, bucket int64) *analysis.APIAgg) error {
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
		if a := at(tier, bucket); a != nil {
			f.Add(analysis.Agg{API: a}, value, n)
		}
		return nil
	})
}

// tierMinutes returns the bucket size of a tier, in minutes.
func tierMinutes(tier int) int64 { return minutesPer[tier] }
