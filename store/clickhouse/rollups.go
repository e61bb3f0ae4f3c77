package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

// Rollups (table rollups) hold every report entry of every bucket as a
// row of sums (SummingMergeTree, read with GROUP BY) in three tiers:
// minutes, hours, days. Apply writes each touched bucket's delta in all
// three. A bucket an Apply may have left wrong is recomputed under a new
// generation (minutes from the records, hours and days from the tier
// below); readers count each bucket's current generation only. Each
// analysis partition has its own rows and generations (partition.go): its
// base until a repair, then the latest in rollup_gens_by_part.

// Tiers.
const (
	tierMinute uint8 = 0
	tierHour   uint8 = 1
	tierDay    uint8 = 2
)

// minutesPer is the length of a bucket of each tier in minutes.
var minutesPer = [3]int64{1, 60, 1440}

// bucketKey names a rollup bucket.
type bucketKey struct {
	tier   uint8
	bucket int64
}

// day returns the partition day of the bucket.
func (k bucketKey) day() int64 { return dayOfMinute(k.bucket * minutesPer[k.tier]) }

// figureOf is the figure of each stat code (the rollups table's stat
// Enum8: a row per bucket, figure, key and histogram value, counted in n).
var figureOf = func() (out [256]*analysis.Figure) {
	for i := range analysis.Figures {
		f := &analysis.Figures[i]
		// The rollups table is a SummingMergeTree read with sum(n): it
		// keeps figures that merge by adding only.
		if f.Aggregate(analysis.ClickHouse) != "sum(n)" {
			panic("clickhouse: figure " + f.Name + " does not merge by sum(n): the rollups table cannot keep it")
		}
		out[uint8(f.Stat)] = f
	}
	return out
}()

// notPerAPI lists the stat codes of the figures not per root API: a
// report of one API reads them all.
var notPerAPI = statCodes(func(f *analysis.Figure) bool { return !f.Scope.PerAPI() })

// rowKey is a rollup row's key within its bucket.
type rowKey struct {
	stat         int8
	api, svc, op string
	value        float64
}

// rowOf returns the key columns of k (a version goes in operation).
func rowOf(s analysis.Scope, k analysis.Key) rowKey {
	if s.Aggregate() == analysis.ScopeVersion {
		return rowKey{api: k.API, svc: k.Service, op: k.Version}
	}
	return rowKey{api: k.API, svc: k.Service, op: k.Operation}
}

// keyOf is the inverse of rowOf.
func keyOf(s analysis.Scope, r rowKey) analysis.Key {
	if s.Aggregate() == analysis.ScopeVersion {
		return analysis.Key{API: r.api, Service: r.svc, Version: r.op}
	}
	return analysis.Key{API: r.api, Service: r.svc, Operation: r.op}
}

// eachRow calls fn with every non-zero figure of rep as a rollup row.
func eachRow(rep *analysis.Report, fn func(k rowKey, n int64)) {
	for _, s := range analysis.Aggregates {
		figs := analysis.FiguresOf(s)
		rep.Each(s, func(k analysis.Key, a analysis.Agg) {
			r := rowOf(s, k)
			for _, f := range figs {
				r.stat, r.value = f.Stat, 0
				if f.Count != nil {
					if n := *f.Count(a); n != 0 {
						fn(r, n)
					}
					continue
				}
				f.Hist(a).Each(func(v float64, n int64) {
					if n != 0 {
						r.value = v
						fn(r, n)
					}
				})
			}
		})
	}
}

// addRow adds a rollup row to rep (a row of a stat no figure has, none).
func addRow(rep *analysis.Report, k rowKey, n int64) {
	f := figureOf[uint8(k.stat)]
	if f == nil {
		return
	}
	f.Add(rep.At(f.Scope, keyOf(f.Scope, k)), k.value, n)
}

var rollupColumns = []string{"tier", "bucket", "day", "gen", "stat", "api", "service", "operation", "value", "n"}

// rollupBlock is rollup rows as the columns of one insert.
type rollupBlock struct {
	tier         []uint8
	bucket       []int64
	day          []time.Time
	gen          []uint64
	stat         []int8
	api, svc, op []string
	value        []float64
	n            []int64
}

func (b *rollupBlock) columns() []any {
	return []any{b.tier, b.bucket, b.day, b.gen, b.stat, b.api, b.svc, b.op, b.value, b.n}
}

// add appends the rows of rep as bucket k's, generation gen.
func (b *rollupBlock) add(k bucketKey, gen uint64, rep *analysis.Report) {
	day := dayDate(k.day())
	eachRow(rep, func(r rowKey, n int64) {
		b.tier, b.bucket, b.day, b.gen = append(b.tier, k.tier), append(b.bucket, k.bucket), append(b.day, day), append(b.gen, gen)
		b.stat, b.api, b.svc, b.op, b.value = append(b.stat, r.stat), append(b.api, r.api), append(b.svc, r.svc),
			append(b.op, r.op), append(b.value, r.value)
		b.n = append(b.n, n)
	})
}

func (b *rollupBlock) len() int { return len(b.tier) }

// loadGens reads, once, the partition's buckets' generations.
func (s *Store) loadGens(ctx context.Context) error {
	if s.gens != nil {
		return nil
	}
	gens := map[bucketKey]uint64{}
	err := s.query(ctx, "read rollup generations", `SELECT tier, bucket, argMax(gen, version) FROM rollup_gens_by_part WHERE part = `+
		quote(s.name)+` GROUP BY tier, bucket`,
		func(r driver.Rows) error {
			var k bucketKey
			var g uint64
			if err := r.Scan(&k.tier, &k.bucket, &g); err != nil {
				return err
			}
			gens[k] = g
			return nil
		})
	if err != nil {
		return err
	}
	s.gens = gens
	return nil
}

// up returns the next tier's buckets holding buckets.
func up(tier uint8, buckets []int64) []int64 {
	f := minutesPer[tier+1] / minutesPer[tier]
	out := make([]int64, 0, len(buckets))
	for _, b := range buckets {
		out = append(out, rollup.FloorDiv(b, f))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// deltaRows returns the rows of minutes' changes (signed reports) to
// the partition's minutes, hours and days, under their current generation.
func (s *Store) deltaRows(minutes map[int64]*analysis.Report) *rollupBlock {
	reps := map[bucketKey]*analysis.Report{}
	for m, rep := range minutes {
		reps[bucketKey{tierMinute, m}] = rep
		for _, k := range []bucketKey{{tierHour, rollup.FloorDiv(m, 60)}, {tierDay, rollup.FloorDiv(m, 1440)}} {
			if reps[k] == nil {
				reps[k] = analysis.NewReport()
			}
			reps[k].Merge(rep, 1)
		}
	}
	var blk rollupBlock
	for k, rep := range reps {
		blk.add(k, s.gen(k), rep)
	}
	return &blk
}

// gen returns the partition's current generation of bucket k.
func (s *Store) gen(k bucketKey) uint64 {
	if g, ok := s.gens[k]; ok {
		return g
	}
	return s.base
}

// recompute replaces the partition's rollups of minutes and of their
// hours and days under a new generation. The rows are written before the
// generation: until then readers count the old.
func (s *Store) recompute(ctx context.Context, minutes []int64) error {
	if len(minutes) == 0 {
		return nil
	}
	reps := map[bucketKey]*analysis.Report{}
	for _, m := range minutes {
		reps[bucketKey{tierMinute, m}] = analysis.NewReport()
	}
	for len(minutes) > 0 {
		part := minutes[:min(len(minutes), 1000)] // a statement stays well below max_query_size
		minutes = minutes[len(part):]
		if err := s.sumRecords(ctx, part, reps); err != nil {
			return err
		}
	}
	// Hours from minutes, days from hours: from reps, or else the table.
	for tier := tierMinute; tier < tierDay; tier++ {
		var below []int64
		for k := range reps {
			if k.tier == tier {
				below = append(below, k.bucket)
			}
		}
		f := minutesPer[tier+1] / minutesPer[tier]
		for _, b := range up(tier, below) {
			sum := analysis.NewReport()
			rs := []bucketRange{{tier, b * f, b*f + f}}
			err := s.readRollups(ctx, where(rs)+" AND "+s.genCond(rs, reps), "", sum)
			if err != nil {
				return err
			}
			for x := b * f; x < b*f+f; x++ {
				if rep := reps[bucketKey{tier, x}]; rep != nil {
					sum.Merge(rep, 1)
				}
			}
			reps[bucketKey{tier + 1, b}] = sum
		}
	}
	gen := s.versions(1)
	var blk, gens rollupBlock // gens: one row per bucket
	for k, rep := range reps {
		rep.Prune()
		blk.add(k, gen, rep)
		gens.tier, gens.bucket, gens.day = append(gens.tier, k.tier), append(gens.bucket, k.bucket), append(gens.day, dayDate(k.day()))
	}
	if blk.len() > 0 {
		if err := s.insert(ctx, "recompute rollups", "rollups", rollupColumns, blk.columns()...); err != nil {
			return err
		}
	}
	n := gens.len()
	if err := s.insert(ctx, "recompute rollups", "rollup_gens_by_part", []string{"tier", "bucket", "part", "day", "base", "gen", "version"},
		gens.tier, gens.bucket, slices.Repeat([]string{s.name}, n), gens.day, slices.Repeat([]uint64{s.base}, n),
		slices.Repeat([]uint64{gen}, n), slices.Repeat([]uint64{s.versions(1)}, n)); err != nil {
		return err
	}
	for k := range reps {
		s.gens[k] = gen
	}
	return nil
}

// sumRecords adds to reps the partition's share of minutes: its stored
// records' results, less those it took from other partitions, plus those
// others took from it (record_moves).
func (s *Store) sumRecords(ctx context.Context, minutes []int64, reps map[bucketKey]*analysis.Report) error {
	wins := map[int64]struct{}{}
	for _, m := range minutes {
		// The windows a minute overlaps: the primary key's first column.
		for w := analysis.WindowOf(m*nsPerMinute, s.window); w <= analysis.WindowOf(m*nsPerMinute+nsPerMinute-1, s.window); w++ {
			wins[w] = struct{}{}
		}
	}
	in := graph.Interner{}
	add := func(r driver.Rows) error {
		var m int64
		var sign int8
		var b []byte
		if err := r.Scan(&m, &sign, &b); err != nil {
			return err
		}
		res, err := decodeResult(b, in.Intern)
		if err != nil {
			return fmt.Errorf("clickhouse: a record of minute %d: %w: %w", m, store.ErrCorrupt, err)
		}
		if rep := reps[bucketKey{tierMinute, m}]; rep != nil {
			rep.Add(res, int64(sign))
		}
		return nil
	}
	p := quote(s.name)
	if err := s.query(ctx, "sum records", `SELECT minute, toInt8(1), result FROM (SELECT minute, deleted, part, result FROM records FINAL
		WHERE win IN (`+intList(keys(wins))+`) AND minute IN (`+intList(minutes)+`)) WHERE deleted = 0 AND part = `+p, add); err != nil {
		return err
	}
	return s.query(ctx, "sum record moves", `SELECT minute, if(to_part = `+p+`, toInt8(-1), toInt8(1)), result FROM (
		SELECT minute, from_part, to_part, result FROM record_moves FINAL WHERE minute IN (`+intList(minutes)+`))
		WHERE (to_part = `+p+` OR from_part = `+p+`) AND to_part != from_part`, add)
}

// genCond selects in rs the rows of each bucket's current generation of
// the partition (s.gens), but the buckets of skip.
func (s *Store) genCond(rs []bucketRange, skip map[bucketKey]*analysis.Report) string {
	var not, cur, has []string
	for k, g := range s.gens {
		if covers(rs, k) {
			cur = append(cur, fmt.Sprintf("(%d, %d, %d)", k.tier, k.bucket, g))
			has = append(has, fmt.Sprintf("(%d, %d)", k.tier, k.bucket))
		}
	}
	for k := range skip {
		if covers(rs, k) {
			not = append(not, fmt.Sprintf("(%d, %d)", k.tier, k.bucket))
		}
	}
	cond := genLiterals("gen = "+utoa(s.base), "(tier, bucket)", has, cur)
	if len(not) > 0 {
		slices.Sort(not)
		cond += " AND (tier, bucket) NOT IN (" + strings.Join(not, ", ") + ")"
	}
	return cond
}

// genLiterals returns the condition selecting the rows of base's
// generation but those of the keys (columns) in not, and of the
// (tier, bucket, gen) in cur.
func genLiterals(base, columns string, not, cur []string) string {
	if len(cur) == 0 {
		return base
	}
	slices.Sort(not)
	slices.Sort(cur)
	return "((" + base + " AND " + columns + " NOT IN (" + strings.Join(not, ", ") + ")) OR (tier, bucket, gen) IN (" +
		strings.Join(cur, ", ") + "))"
}

// covers reports whether rs covers bucket k.
func covers(rs []bucketRange, k bucketKey) bool {
	for _, r := range rs {
		if r.tier == k.tier && k.bucket >= r.lo && k.bucket < r.hi {
			return true
		}
	}
	return false
}

// bucketRange is a span of buckets of one tier, [lo, hi).
type bucketRange struct {
	tier   uint8
	lo, hi int64
}

// ranges covers minutes [lo, hi) with whole days, the whole hours around
// them and the minutes at either end: a week is a few dozen buckets.
func ranges(lo, hi int64) []bucketRange {
	var out []bucketRange
	add := func(tier uint8, lo, hi int64) {
		if lo < hi {
			out = append(out, bucketRange{tier, lo, hi})
		}
	}
	if lo >= hi {
		return nil
	}
	hLo, hHi := rollup.FloorDiv(lo+59, 60), rollup.FloorDiv(hi, 60) // whole hours
	if hLo >= hHi {
		add(tierMinute, lo, hi)
		return out
	}
	dLo, dHi := rollup.FloorDiv(hLo+23, 24), rollup.FloorDiv(hHi, 24) // whole days
	add(tierMinute, lo, hLo*60)
	if dLo >= dHi {
		add(tierHour, hLo, hHi)
	} else {
		add(tierHour, hLo, dLo*24)
		add(tierDay, dLo, dHi)
		add(tierHour, dHi*24, hHi)
	}
	add(tierMinute, hHi*60, hi)
	return out
}

// where returns the condition selecting rs in the tables of buckets
// partitioned by day. The days bound the parts read: without them a
// minute read 30 granules (every day's part has a mark where its minutes
// end and hours begin), not one or two.
func where(rs []bucketRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		if r.lo >= r.hi {
			parts[i] = "0"
			continue
		}
		parts[i] = fmt.Sprintf("(tier = %d AND bucket >= %d AND bucket < %d", r.tier, r.lo, r.hi) + days(r) + ")"
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// days returns where's condition on the day of buckets r (not empty): a
// bound past what 18.16 parses as a date literal is left out.
func days(r bucketRange) string {
	mp := minutesPer[r.tier]
	c := ""
	if d := dayOfMinute(r.lo * mp); d > 0 && d <= lastDateLiteral {
		c += " AND day >= '" + dayDate(d).Format(time.DateOnly) + "'"
	}
	if d := dayOfMinute((r.hi - 1) * mp); d < lastDateLiteral {
		c += " AND day <= '" + dayDate(d).Format(time.DateOnly) + "'"
	}
	return c
}

// lastDateLiteral is the last day (2105-12-31) ClickHouse 18.16 reads
// from a date literal.
const lastDateLiteral = 49672

// readRollups adds to rep the rows cond selects (of api's, when set).
func (s *Store) readRollups(ctx context.Context, cond, api string, rep *analysis.Report) error {
	if api != "" {
		// Totals, services and nodes are not per API.
		cond += " AND (api = " + quote(api) + " OR toInt8(stat) IN (" + notPerAPI + "))"
	}
	return s.query(ctx, "read rollups", `SELECT toInt8(stat), api, service, operation, value, sum(n) FROM rollups WHERE `+cond+
		` GROUP BY stat, api, service, operation, value`, func(r driver.Rows) error {
		var k rowKey
		var n int64
		if err := r.Scan(&k.stat, &k.api, &k.svc, &k.op, &k.value, &n); err != nil {
			return err
		}
		addRow(rep, k, n)
		return nil
	})
}

// Report sums the rollups of the minutes q covers from the retention
// floor on (ranges), each bucket's current generation of every partition.
func (s *Store) Report(ctx context.Context, q store.Query) (*analysis.Report, error) {
	if err := s.checkOpen("report"); err != nil {
		return nil, err
	}
	lo, hi := s.minuteRange(ctx, q)
	if lo >= hi {
		return analysis.NewReport(), nil
	}
	rep, err := analysis.NewReport(), error(nil)
	if s.cachesOn(ctx) {
		rep, err = s.cachedReport(ctx, ranges(lo, hi), q.API)
	} else {
		cond := where(ranges(lo, hi))
		err = s.readRollups(ctx, cond+" AND "+s.current(cond), q.API, rep)
	}
	if err != nil {
		return nil, err
	}
	rep.Prune()
	return rep, nil
}

// current selects, among the bucket rows cond selects, those of each
// bucket's current generation of every partition: its latest in
// rollup_gens_by_part, else its base (0, or baseFlag and more). As
// literals from gensKept when kept, else subqueries (GLOBAL on a cluster).
func (s *Store) current(cond string) string {
	if g := s.gensKept.snap.Load(); g != nil {
		return g.cond
	}
	in, notIn := "IN", "NOT IN"
	if s.cluster != "" {
		in, notIn = "GLOBAL IN", "GLOBAL NOT IN"
	}
	return `(((gen = 0 OR gen >= ` + utoa(baseFlag) + `) AND (tier, bucket, gen) ` + notIn + ` (SELECT tier, bucket, base FROM rollup_gens_by_part WHERE ` +
		cond + `)) OR (tier, bucket, gen) ` + in + ` (SELECT tier, bucket, argMax(gen, version) FROM rollup_gens_by_part WHERE ` + cond +
		` GROUP BY tier, bucket, part))`
}

// gensKept holds every bucket's repair generations until a repair's
// change row, retention or a failed read of the log: literals, not
// subqueries, took a cluster's open minute from 20–30 ms to 10 ms.
type gensKept struct {
	mu    sync.Mutex
	epoch uint64 // moved by every drop: a read begun before one is not kept
	snap  atomic.Pointer[gensSnap]
}

// gensSnap is the condition current returns from the generations kept.
type gensSnap struct{ cond string }

// maxGensKept bounds the generations kept as literals.
const maxGensKept = 2000

func (g *gensKept) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.epoch++
	g.snap.Store(nil)
}

// keepGens reads every bucket's repair generations, unless kept.
func (s *Store) keepGens(ctx context.Context) {
	g := &s.gensKept
	if g.snap.Load() != nil {
		return
	}
	g.mu.Lock()
	epoch := g.epoch
	g.mu.Unlock()
	var bases, latest []string
	err := s.query(light(ctx), "read rollup generations", `SELECT tier, bucket, any(base), argMax(gen, version) FROM rollup_gens_by_part
		GROUP BY tier, bucket, part LIMIT `+itoa(maxGensKept+1), func(r driver.Rows) error {
		var tier uint8
		var b int64
		var base, gen uint64
		if err := r.Scan(&tier, &b, &base, &gen); err != nil {
			return err
		}
		bases = append(bases, fmt.Sprintf("(%d, %d, %d)", tier, b, base))
		latest = append(latest, fmt.Sprintf("(%d, %d, %d)", tier, b, gen))
		return nil
	})
	if err != nil || len(bases) > maxGensKept {
		return // the subqueries, this time
	}
	cond := genLiterals(`(gen = 0 OR gen >= `+utoa(baseFlag)+`)`, "(tier, bucket, gen)", bases, latest)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.epoch == epoch {
		g.snap.Store(&gensSnap{cond})
	}
}
