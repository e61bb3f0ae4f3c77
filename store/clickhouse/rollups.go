package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// Rollups (table rollups, see schema/clickhouse/0005_lean.sql) hold every
// report entry of every bucket as a row of sums, in three tiers: minutes,
// hours and days. Apply writes the change a batch makes to each bucket it
// touches in all three tiers, in one insert; merges sum the rows of a key
// (SummingMergeTree), readers sum with GROUP BY. A bucket that an Apply
// may have left wrong is recomputed, under a new generation: its minutes
// from the records, its hours and days from their minutes and hours.
// Readers count each bucket's current generation only.
//
// Each analysis partition keeps its own rows of every bucket, under
// generations of its own (partition.go): its base generation until one of
// its Applies fails, then each repair's. A repair recomputes the
// partition's share of a bucket (its records, less the records it took
// from other partitions, plus those other partitions took from it:
// record_moves) while the others go on writing deltas to theirs; a reader
// counts, of every partition, its current generation: the latest in
// rollup_gens_by_part, or its base.

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

// Figures: each of analysis.Figures is a stat (the rollups table's
// stat, an Enum8 whose codes and labels are the figures' Stat and Name):
// a row per bucket, figure, key and (for a histogram) value, its count
// in n.

// figureOf is the figure of each stat code.
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

// notPerAPI lists the stat codes of the figures that are not per root
// API (totals, services, nodes): a report of one API reads them all.
var notPerAPI = func() string {
	var codes []string
	for _, f := range analysis.Figures {
		if !f.Scope.PerAPI() {
			codes = append(codes, strconv.Itoa(int(f.Stat)))
		}
	}
	return strings.Join(codes, ", ")
}()

// rowKey is a rollup row's key within its bucket: the figure, and its
// keys.
type rowKey struct {
	stat         int8
	api, svc, op string
	value        float64
}

// rowOf returns the key columns of an aggregate of scope s at k: a
// version goes in the operation column.
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

// eachRow calls fn with every figure of rep but zeros, as a rollup row.
// addRow is its inverse.
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

// loadGens reads the generations of the partition's buckets that have
// one, once.
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

// up returns the buckets of the next tier holding the buckets of keys.
func up(tier uint8, buckets []int64) []int64 {
	f := minutesPer[tier+1] / minutesPer[tier]
	out := make([]int64, 0, len(buckets))
	for _, b := range buckets {
		out = append(out, rollup.FloorDiv(b, f))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// deltaRows returns the rows of the changes of minutes (reports of signed
// results) to the partition's rollups of the minutes, their hours and
// their days, each bucket under the partition's current generation.
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

// recompute replaces the partition's rollups of minutes, and of the hours
// and days holding them, under a new generation: minutes from the
// partition's stored records (and moves), hours from their minutes, days
// from their hours. The new rows are written first, then the generation:
// until it is, readers count the old.
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
	// Hours from their minutes, days from their hours: the buckets being
	// recomputed from reps, the others from the table.
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
	var blk rollupBlock
	var tiers []uint8
	var buckets []int64
	var days []time.Time
	var gens []uint64
	for k, rep := range reps {
		rep.Prune()
		blk.add(k, gen, rep)
		tiers, buckets, days, gens = append(tiers, k.tier), append(buckets, k.bucket), append(days, dayDate(k.day())), append(gens, gen)
	}
	if blk.len() > 0 {
		if err := s.insert(ctx, "recompute rollups", "rollups", rollupColumns, blk.columns()...); err != nil {
			return err
		}
	}
	n := len(gens)
	if err := s.insert(ctx, "recompute rollups", "rollup_gens_by_part", []string{"tier", "bucket", "part", "day", "base", "gen", "version"},
		tiers, buckets, slices.Repeat([]string{s.name}, n), days, slices.Repeat([]uint64{s.base}, n), gens,
		slices.Repeat([]uint64{s.versions(1)}, n)); err != nil {
		return err
	}
	for k := range reps {
		s.gens[k] = gen
	}
	return nil
}

// sumRecords adds to their reports in reps the partition's share of
// minutes: the results of its stored records, less the old results of
// those it took from other partitions, plus those of the records other
// partitions took from it (record_moves).
func (s *Store) sumRecords(ctx context.Context, minutes []int64, reps map[bucketKey]*analysis.Report) error {
	wins := map[int64]struct{}{}
	for _, m := range minutes {
		// The windows a minute overlaps (one, unless the window length is
		// not a whole number of minutes): the primary key's first column.
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

// genCond returns the SQL condition selecting, in rs, the rows of each
// bucket's current generation of the partition (the writer's, from
// s.gens), leaving out the buckets of skip.
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
	base := "gen = " + utoa(s.base)
	cond := base
	if len(cur) > 0 {
		slices.Sort(cur)
		slices.Sort(has)
		cond = "((" + base + " AND (tier, bucket) NOT IN (" + strings.Join(has, ", ") + ")) OR (tier, bucket, gen) IN (" +
			strings.Join(cur, ", ") + "))"
	}
	if len(not) > 0 {
		slices.Sort(not)
		cond += " AND (tier, bucket) NOT IN (" + strings.Join(not, ", ") + ")"
	}
	return cond
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

// ranges covers minutes [lo, hi) with whole days from the day tier, the
// whole hours around them from the hour tier and the minutes at either
// end from the minute tier: a week is a few dozen buckets.
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

// where returns the SQL condition selecting rs, in the tables of buckets
// partitioned by their day (rollups, node_minutes, trace_buckets,
// rollup_gens_by_part). The days bound the partitions read: without them
// every part of every day has a mark of its index, where its minutes end
// and its hours begin, that the bucket cannot rule out, and a minute read
// 30 granules instead of one or two.
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

// days returns the condition on the day column of buckets r (not empty),
// as where adds it: days as literals 18.16 parses (up to 2105-12-31); a
// bound at an end of what a Date holds is left out.
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

// readRollups adds to rep the rollup rows cond selects, the per-API rows
// of api only when api is not empty.
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

// Report sums the rollups of the minutes q covers (from the retention
// floor on): whole days from the day tier, whole hours from the hour
// tier, the rest from the minutes; each bucket's current generation of
// every partition.
func (s *Store) Report(ctx context.Context, q store.Query) (*analysis.Report, error) {
	if err := s.checkOpen("report"); err != nil {
		return nil, err
	}
	lo, hi := q.MinuteRange()
	if f := s.retentionFloor(ctx); f != 0 {
		lo = max(lo, rollup.FloorDiv(f, nsPerMinute))
	}
	lo, hi = clamp(lo, minBound, maxBound), clamp(hi, minBound, maxBound)
	rep := analysis.NewReport()
	if lo >= hi {
		return rep, nil
	}
	if s.cachesOn(ctx) {
		rep, err := s.cachedReport(ctx, ranges(lo, hi), q.API)
		if err != nil {
			return nil, err
		}
		rep.Prune()
		return rep, nil
	}
	cond := where(ranges(lo, hi))
	if err := s.readRollups(ctx, cond+" AND "+s.current(cond), q.API, rep); err != nil {
		return nil, err
	}
	rep.Prune()
	return rep, nil
}

// current returns the SQL condition selecting, among the rollup rows cond
// selects (rollups, node_minutes, trace_buckets), those of each bucket's
// current generation of every partition: the latest rollup_gens_by_part
// holds for the bucket and partition, or, for a partition without one,
// its base generation (0, or baseFlag and more: partition.go). From the
// generations kept (gensKept) when they are: as literals, mostly none (a
// bucket has a generation only once an Apply repaired it). Otherwise
// subqueries of rollup_gens_by_part; on a cluster they read every shard's
// once and go to the shards with the query (GLOBAL IN: a Distributed
// table's IN subquery over another is refused otherwise).
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

// gensKept holds every bucket's repair generations, read once and kept
// until a write may have changed them: a repair (an Apply whose change
// row says so, this process's or another's), retention, or a read of
// the change log that failed. A reader then sends them as literals
// rather than subqueries: a read of a cluster's open minute took 20–30
// ms with the subqueries, 10 ms without.
type gensKept struct {
	mu    sync.Mutex
	epoch uint64 // moved by every drop: a read begun before one is not kept
	snap  atomic.Pointer[gensSnap]
}

// gensSnap is the condition current returns from the generations kept.
type gensSnap struct{ cond string }

// maxGensKept bounds the generations kept as literals: past it, the
// subqueries.
const maxGensKept = 2000

// dropGens forgets the generations kept.
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
	cond := `(gen = 0 OR gen >= ` + utoa(baseFlag) + `)`
	if len(bases) > 0 {
		slices.Sort(bases)
		slices.Sort(latest)
		cond = `((` + cond + ` AND (tier, bucket, gen) NOT IN (` + strings.Join(bases, ", ") + `)) OR (tier, bucket, gen) IN (` +
			strings.Join(latest, ", ") + `))`
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.epoch == epoch {
		g.snap.Store(&gensSnap{cond})
	}
}
