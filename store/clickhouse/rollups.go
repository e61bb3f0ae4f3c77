package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// rollup describes one rollup table: its key and value columns, and how a
// minute's rows are computed from the latest live records.
type rollup struct {
	table string
	keys  []string // after tier, bucket, day
	vals  []string // Int64 sums
	// cols are the records columns src reads; src is the select list over
	// them producing bucket, day, keys, then v_<val> for each value;
	// arrayJoin and where complete it.
	cols      string
	src       string
	arrayJoin string
	where     string
}

// svcColumns are the per-service count columns, in svcCounts order.
var svcColumns = []string{"correct", "false_claim", "false_unclaim", "missing", "invalid", "mismatches",
	"misattributed", "naive", "eligible", "context_drops", "owned", "requests", "virtual_requests",
	"counterfactual", "spurious"}

var rollups = []rollup{
	{
		table: "rollup_totals",
		vals:  []string{"spans", "traces", "fragments"},
		cols:  "minute, day, deleted, spans, fragments",
		src:   "minute AS bucket, day, spans AS v_spans, toInt64(1) AS v_traces, fragments AS v_fragments",
		where: "deleted = 0",
	},
	{
		table: "rollup_api",
		keys:  []string{"api"},
		vals: []string{"traces", "failed", "root_errors", "remote_parent", "radius_sum", "suppressed", "hops",
			"counterfactual", "misattributed", "naive", "eligible", "fragments", "events"},
		cols: "minute, day, deleted, api, failed, root_failed, remote_parent, radius, suppressed, hops, counterfactual, " +
			"misattributed, naive, eligible, fragments, events",
		src: "minute AS bucket, day, api, toInt64(1) AS v_traces, toInt64(failed) AS v_failed, " +
			"toInt64(root_failed) AS v_root_errors, toInt64(remote_parent) AS v_remote_parent, " +
			"toInt64(failed) * radius AS v_radius_sum, suppressed AS v_suppressed, hops AS v_hops, " +
			"counterfactual AS v_counterfactual, misattributed AS v_misattributed, naive AS v_naive, " +
			"eligible AS v_eligible, fragments AS v_fragments, events AS v_events",
		where: "deleted = 0 AND api != ''",
	},
	{
		table: "rollup_radius",
		keys:  []string{"api", "radius"},
		vals:  []string{"n"},
		cols:  "minute, day, deleted, api, failed, radius",
		src:   "minute AS bucket, day, api, radius, toInt64(1) AS v_n",
		where: "deleted = 0 AND api != '' AND failed = 1",
	},
	{
		table: "rollup_amp",
		keys:  []string{"api", "amp"},
		vals:  []string{"n"},
		cols:  "minute, day, deleted, api, failed, amp",
		src:   "minute AS bucket, day, api, amp, toInt64(1) AS v_n",
		where: "deleted = 0 AND api != '' AND failed = 1",
	},
	{
		table: "rollup_owner",
		keys:  []string{"api", "service", "operation"},
		vals:  []string{"events", "spurious"},
		cols:  "minute, day, deleted, api, owner_service, owner_operation, owner_events, owner_spurious",
		src:   "minute AS bucket, day, api, o_service AS service, o_operation AS operation, o_events AS v_events, o_spurious AS v_spurious",
		arrayJoin: "ARRAY JOIN owner_service AS o_service, owner_operation AS o_operation, owner_events AS o_events, " +
			"owner_spurious AS o_spurious",
		where: "deleted = 0 AND api != ''",
	},
	serviceRollup(),
}

func serviceRollup() rollup {
	r := rollup{table: "rollup_service", keys: []string{"service"}, vals: svcColumns, where: "deleted = 0"}
	cols := []string{"minute", "day", "deleted", "svc_name"}
	src := []string{"minute AS bucket", "day", "s_name AS service"}
	joins := []string{"svc_name AS s_name"}
	for _, c := range svcColumns {
		cols = append(cols, "svc_"+c)
		src = append(src, "s_"+c+" AS v_"+c)
		joins = append(joins, "svc_"+c+" AS s_"+c)
	}
	r.cols, r.src, r.arrayJoin = strings.Join(cols, ", "), strings.Join(src, ", "), "ARRAY JOIN "+strings.Join(joins, ", ")
	return r
}

// head returns the column list of an insert into the rollup.
func (r *rollup) head() string {
	cols := append([]string{"tier", "bucket", "day"}, r.keys...)
	cols = append(cols, r.vals...)
	return "INSERT INTO " + r.table + " (" + strings.Join(append(cols, "version"), ", ") + ")"
}

// sums returns "sum(v_a), sum(v_b)…"; values "a AS v_a…"; zeros
// "toInt64(0) AS v_a…"; live a condition true for a stored row with a
// value other than zero.
func (r *rollup) sums() string {
	return r.list(func(v string) string { return "sum(v_" + v + ")" }, ", ")
}
func (r *rollup) values() string {
	return r.list(func(v string) string { return v + " AS v_" + v }, ", ")
}
func (r *rollup) zeros() string {
	return r.list(func(v string) string { return "toInt64(0) AS v_" + v }, ", ")
}
func (r *rollup) live() string { return r.list(func(v string) string { return v + " != 0" }, " OR ") }

func (r *rollup) list(f func(string) string, sep string) string {
	parts := make([]string, len(r.vals))
	for i, v := range r.vals {
		parts[i] = f(v)
	}
	return strings.Join(parts, sep)
}

// keyList returns ", k1, k2" (empty without keys).
func (r *rollup) keyList() string {
	if len(r.keys) == 0 {
		return ""
	}
	return ", " + strings.Join(r.keys, ", ")
}

// minuteSQL recomputes the minute rows of the minutes recs selects: the
// sums over the latest live records, and a zero row for every key stored
// with a value that no longer has one.
func (r *rollup) minuteSQL(recs, minutes string, v uint64) string {
	return r.head() + "\nSELECT 0, bucket, day" + r.keyList() + ", " + r.sums() + ", " + utoa(v) + " FROM (\n" +
		"  SELECT " + r.src + " FROM (SELECT " + r.cols + " FROM records FINAL WHERE " + recs + ")" +
		strings.TrimRight(" "+r.arrayJoin, " ") + " WHERE " + r.where + "\n" +
		"  UNION ALL\n" +
		"  SELECT bucket, day" + r.keyList() + ", " + r.zeros() + " FROM " + r.table +
		" WHERE tier = 0 AND bucket IN (" + minutes + ") AND (" + r.live() + ")\n" +
		") GROUP BY bucket, day" + r.keyList()
}

// hourSQL recomputes the hour rows of hours from their minute rows.
func (r *rollup) hourSQL(minuteRanges, hours string, v uint64) string {
	return r.head() + "\nSELECT 1, hour, day" + r.keyList() + ", " + r.sums() + ", " + utoa(v) + " FROM (\n" +
		"  SELECT toInt64(floor(bucket / 60)) AS hour, day" + r.keyList() + ", " + r.values() + " FROM " + r.table +
		" FINAL WHERE tier = 0 AND (" + minuteRanges + ")\n" +
		"  UNION ALL\n" +
		"  SELECT bucket, day" + r.keyList() + ", " + r.zeros() + " FROM " + r.table +
		" WHERE tier = 1 AND bucket IN (" + hours + ") AND (" + r.live() + ")\n" +
		") GROUP BY hour, day" + r.keyList()
}

// recomputeChunk bounds the minutes or hours one statement recomputes.
const recomputeChunk = 2000

// recomputeMinutes replaces the rollups of minutes by what the stored
// records sum to, at version v.
func (s *Store) recomputeMinutes(ctx context.Context, minutes []int64, v uint64) error {
	for len(minutes) > recomputeChunk { // a statement stays well below max_query_size
		if err := s.recomputeMinutes(ctx, minutes[:recomputeChunk], v); err != nil {
			return err
		}
		minutes = minutes[recomputeChunk:]
	}
	if len(minutes) == 0 {
		return nil
	}
	wins := map[int64]struct{}{}
	for _, m := range minutes {
		// The windows a minute overlaps (one, unless the window length is
		// not a whole number of minutes): the primary key's first column.
		for w := analysis.WindowOf(m*nsPerMinute, s.window); w <= analysis.WindowOf(m*nsPerMinute+nsPerMinute-1, s.window); w++ {
			wins[w] = struct{}{}
		}
	}
	ml := intList(minutes)
	recs := "win IN (" + intList(keys(wins)) + ") AND minute IN (" + ml + ")"
	// The tables are independent: recomputed at once.
	return s.each(ctx, func(r *rollup) error { return s.exec(ctx, "recompute "+r.table, r.minuteSQL(recs, ml, v)) })
}

// recomputeHours replaces the rollups of hours by the sum of their
// minutes', at version v.
func (s *Store) recomputeHours(ctx context.Context, hours []int64, v uint64) error {
	for len(hours) > recomputeChunk {
		if err := s.recomputeHours(ctx, hours[:recomputeChunk], v); err != nil {
			return err
		}
		hours = hours[recomputeChunk:]
	}
	if len(hours) == 0 {
		return nil
	}
	var ranges []string
	for _, h := range hours {
		ranges = append(ranges, fmt.Sprintf("(bucket >= %d AND bucket < %d)", h*60, h*60+60))
	}
	mr, hl := strings.Join(ranges, " OR "), intList(hours)
	return s.each(ctx, func(r *rollup) error { return s.exec(ctx, "recompute "+r.table, r.hourSQL(mr, hl, v)) })
}

// each calls fn for every rollup table concurrently and returns the
// first error.
func (s *Store) each(ctx context.Context, fn func(*rollup) error) error {
	errs := make([]error, len(rollups))
	var wg sync.WaitGroup
	for i := range rollups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(&rollups[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// bucketRange is a span of rollup buckets: tier 0 minutes or tier 1
// hours, [lo, hi).
type bucketRange struct {
	tier   int
	lo, hi int64
}

// ranges covers minutes [lo, hi) with whole hours from the hourly tier
// (but for the dirty hours, behind their minutes) and the other minutes
// from the minute tier, so a week costs a few hundred rows per API, not
// ten thousand.
func ranges(lo, hi int64, dirty map[int64]bool) []bucketRange {
	if lo >= hi {
		return nil
	}
	hLo := floorDiv(lo+59, 60) // first whole hour
	hHi := floorDiv(hi, 60)    // end of the last whole hour
	if hLo >= hHi {
		return []bucketRange{{0, lo, hi}}
	}
	var out []bucketRange
	add := func(tier int, lo, hi int64) {
		if lo >= hi {
			return
		}
		if n := len(out); n > 0 && out[n-1].tier == tier && out[n-1].hi == lo {
			out[n-1].hi = hi
			return
		}
		out = append(out, bucketRange{tier, lo, hi})
	}
	add(0, lo, hLo*60)
	var ds []int64 // dirty hours in range, in order
	for h := range dirty {
		if h >= hLo && h < hHi {
			ds = append(ds, h)
		}
	}
	slices.Sort(ds)
	h := hLo
	for _, d := range ds {
		add(1, h, d)
		add(0, d*60, d*60+60)
		h = d + 1
	}
	add(1, h, hHi)
	add(0, hHi*60, hi)
	return out
}

// dirtyHours returns the hours in [lo, hi) whose hourly rollups are behind
// their minutes.
func (s *Store) dirtyHours(ctx context.Context, lo, hi int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if lo >= hi {
		return out, nil
	}
	err := s.query(ctx, "read dirty hours", `SELECT id FROM (SELECT id, dirty FROM dirty FINAL WHERE kind = 'hour' AND id >= `+
		itoa(lo)+` AND id < `+itoa(hi)+`) WHERE dirty = 1`, func(r driver.Rows) error {
		var h int64
		if err := r.Scan(&h); err != nil {
			return err
		}
		out[h] = true
		return nil
	})
	return out, err
}

// where returns the SQL condition selecting rs.
func where(rs []bucketRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("(tier = %d AND bucket >= %d AND bucket < %d)", r.tier, r.lo, r.hi)
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// Report sums the rollups of the minutes q covers (from the retention
// floor on): the latest version of each row, whole hours from the hourly
// tier unless it is behind.
func (s *Store) Report(ctx context.Context, q store.Query) (*analysis.Report, error) {
	if err := s.checkOpen("report"); err != nil {
		return nil, err
	}
	lo, hi := q.MinuteRange()
	if f := s.retentionFloor(ctx); f != 0 {
		lo = max(lo, floorDiv(f, nsPerMinute))
	}
	lo, hi = clamp(lo, minBound, maxBound), clamp(hi, minBound, maxBound)
	rep := analysis.NewReport()
	if lo >= hi {
		return rep, nil
	}
	dirty, err := s.dirtyHours(ctx, floorDiv(lo+59, 60), floorDiv(hi, 60))
	if err != nil {
		return nil, err
	}
	rs := ranges(lo, hi, dirty)
	cond := where(rs)
	apiCond := cond
	if q.API != "" {
		apiCond += " AND api = " + quote(q.API)
	}
	sums := make([]string, len(svcColumns))
	for i, c := range svcColumns {
		sums[i] = "sum(" + c + ")"
	}
	// Six independent reads, at once, each into a report of its own.
	reads := []func(*analysis.Report) error{
		func(rep *analysis.Report) error {
			return s.queryRow(ctx, "read rollups", `SELECT sum(spans), sum(traces), sum(fragments) FROM rollup_totals FINAL WHERE `+cond,
				&rep.Spans, &rep.Traces, &rep.Fragments)
		},
		func(rep *analysis.Report) error {
			return s.query(ctx, "read rollups", `SELECT api, sum(traces), sum(failed), sum(root_errors), sum(remote_parent),
				sum(radius_sum), sum(suppressed), sum(hops), sum(counterfactual), sum(misattributed), sum(naive), sum(eligible),
				sum(fragments), sum(events) FROM rollup_api FINAL WHERE `+apiCond+` GROUP BY api`, func(r driver.Rows) error {
				var name string
				var a analysis.APIAgg
				if err := r.Scan(&name, &a.Traces, &a.Failed, &a.RootErrors, &a.RemoteParent, &a.RadiusSum, &a.Suppressed,
					&a.Hops, &a.Counterfactual, &a.Misattributed, &a.Naive, &a.Eligible, &a.Fragments, &a.Events); err != nil {
					return err
				}
				dst := rep.API(name)
				a.Radius, a.Amplification, a.Owners = dst.Radius, dst.Amplification, dst.Owners
				*dst = a
				return nil
			})
		},
		func(rep *analysis.Report) error {
			return s.query(ctx, "read rollups", `SELECT api, radius, sum(n) FROM rollup_radius FINAL WHERE `+apiCond+
				` GROUP BY api, radius HAVING sum(n) != 0`, func(r driver.Rows) error {
				var name string
				var radius, n int64
				if err := r.Scan(&name, &radius, &n); err != nil {
					return err
				}
				rep.API(name).Radius[int(radius)] += n
				return nil
			})
		},
		func(rep *analysis.Report) error {
			return s.query(ctx, "read rollups", `SELECT api, amp, sum(n) FROM rollup_amp FINAL WHERE `+apiCond+
				` GROUP BY api, amp HAVING sum(n) != 0`, func(r driver.Rows) error {
				var name string
				var amp float64
				var n int64
				if err := r.Scan(&name, &amp, &n); err != nil {
					return err
				}
				rep.API(name).Amplification[amp] += n
				return nil
			})
		},
		func(rep *analysis.Report) error {
			return s.query(ctx, "read rollups", `SELECT api, service, operation, sum(events), sum(spurious) FROM rollup_owner FINAL
				WHERE `+apiCond+` GROUP BY api, service, operation`, func(r driver.Rows) error {
				var name string
				var n graph.Node
				var o analysis.OwnerAgg
				if err := r.Scan(&name, &n.Service, &n.Operation, &o.Events, &o.Spurious); err != nil {
					return err
				}
				*rep.API(name).Owner(n) = o
				return nil
			})
		},
		func(rep *analysis.Report) error {
			return s.query(ctx, "read rollups", `SELECT service, `+strings.Join(sums, ", ")+` FROM rollup_service FINAL WHERE `+cond+
				` GROUP BY service`, func(r driver.Rows) error {
				var v analysis.ServiceResult
				var c [numSvc]int64
				dest := []any{&v.Service}
				for i := range c {
					dest = append(dest, &c[i])
				}
				if err := r.Scan(dest...); err != nil {
					return err
				}
				cl := &v.Claims
				cl[attribution.AuditCorrect], cl[attribution.AuditFalseClaim], cl[attribution.AuditFalseUnclaim],
					cl[attribution.AuditMissing], cl[attribution.AuditInvalid] = c[0], c[1], c[2], c[3], c[4]
				v.Mismatches, v.Misattributed, v.NaiveMisattributed, v.Eligible, v.ContextDrops, v.OwnedFailures,
					v.Requests, v.VirtualRequests, v.Counterfactual, v.Spurious = c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14]
				*rep.Service(v.Service) = v
				return nil
			})
		},
	}
	parts, errs := make([]*analysis.Report, len(reads)), make([]error, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		parts[i] = analysis.NewReport()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = read(parts[i])
		}()
	}
	wg.Wait()
	for i := range reads {
		if errs[i] != nil {
			return nil, errs[i]
		}
		rep.Merge(parts[i], 1)
	}
	rep.Prune()
	return rep, nil
}
