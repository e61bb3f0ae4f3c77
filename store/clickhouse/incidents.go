package clickhouse

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

var _ store.IncidentReader = (*Store)(nil)

// minuteRange returns the minutes q covers from the retention floor on,
// within the bounds SQL text takes.
func (s *Store) minuteRange(ctx context.Context, q store.Query) (lo, hi int64) {
	lo, hi = q.MinuteRange()
	if f := s.retentionFloor(ctx); f != 0 {
		lo = max(lo, rollup.FloorDiv(f, nsPerMinute))
	}
	return clamp(lo, minBound, maxBound), clamp(hi, minBound, maxBound)
}

// HotMinutes reads the node minutes that pass the thresholds from
// node_minutes (each bucket's current generation of every partition):
// the minutes and nodes that owned at least minOwned first, then their
// requests alone. Through the tier cache, an hour at a time.
func (s *Store) HotMinutes(ctx context.Context, q store.Query, minOwned int64, minRate float64) (analysis.MinuteNodes, error) {
	if err := s.checkOpen("read hot minutes"); err != nil {
		return nil, err
	}
	lo, hi := s.minuteRange(ctx, q)
	if lo >= hi {
		return analysis.MinuteNodes{}, nil
	}
	if s.cachesOn(ctx) && uint64(hi-lo) <= maxHotKept { // hi-lo: ranges of the whole store exceed an int64
		return s.cachedHotMinutes(ctx, lo, hi, minOwned, minRate)
	}
	return s.readHotMinutes(ctx, lo, hi, minOwned, minRate)
}

// hotPass is the condition of a node minute passing the thresholds.
func hotPass(minOwned int64, minRate float64) string {
	return ` requests > 0 AND owned >= ` + itoa(minOwned) + ` AND owned >= ` + strconv.FormatFloat(minRate, 'g', -1, 64) + ` * requests`
}

// shortHot is the most minutes read in one query by HotMinutes.
const shortHot = 10

// maxHotKept bounds the minutes HotMinutes reads through the tier cache.
const maxHotKept = 8 * 24 * 60

// readHotMinutes is HotMinutes of minutes [lo, hi), read from the server.
func (s *Store) readHotMinutes(ctx context.Context, lo, hi int64, minOwned int64, minRate float64) (analysis.MinuteNodes, error) {
	out := analysis.MinuteNodes{}
	if hi-lo <= shortHot {
		// A few minutes (what a write changed): one query, not two.
		return out, s.hotMinutes(light(ctx), where([]bucketRange{{tierMinute, lo, hi}}), "", hotPass(minOwned, minRate), out)
	}
	if err := s.sumHotMinutes(ctx, []bucketRange{{tierMinute, lo, hi}}, minOwned, hotPass(minOwned, minRate), out); err != nil {
		return nil, err
	}
	return out, nil
}

// hotRow returns the scanner of a hot minute row into out.
func hotRow(out analysis.MinuteNodes) func(driver.Rows) error {
	return func(r driver.Rows) error {
		var m int64
		var n graph.Node
		var a analysis.NodeAgg
		if err := r.Scan(&m, &n.Service, &n.Operation, &a.Requests, &a.Owned); err != nil {
			return err
		}
		out.Put(m, n, a)
		return nil
	}
}

// sumHotMinutes adds to out the node minutes of rs that pass (the
// condition pass), summing each node's rows in a minute.
func (s *Store) sumHotMinutes(ctx context.Context, rs []bucketRange, minOwned int64, pass string, out analysis.MinuteNodes) error {
	cond := where(rs)
	if minOwned < 1 { // every minute with requests may pass: no narrowing
		return s.hotMinutes(ctx, cond, "", pass, out)
	}
	var ranges []bucketRange
	nodes := map[graph.Node]bool{}
	// Grouped by a hash of the names: a third cheaper than by the strings.
	err := s.query(ctx, "read owned minutes", `SELECT bucket, any(service), any(operation) FROM node_minutes
		WHERE `+cond+` AND owned != 0 AND `+s.current(cond)+`
		GROUP BY bucket, cityHash64(service, operation) HAVING sum(owned) >= `+itoa(minOwned)+` ORDER BY bucket`,
		func(r driver.Rows) error {
			var m int64
			var n graph.Node
			if err := r.Scan(&m, &n.Service, &n.Operation); err != nil {
				return err
			}
			if k := len(ranges); k > 0 && ranges[k-1].hi >= m {
				ranges[k-1].hi = m + 1
			} else {
				ranges = append(ranges, bucketRange{tierMinute, m, m + 1})
			}
			nodes[n] = true
			return nil
		})
	if err != nil || len(ranges) == 0 {
		return err
	}
	if len(ranges) > maxRanges {
		ranges = []bucketRange{{tierMinute, ranges[0].lo, ranges[len(ranges)-1].hi}}
	}
	nodeCond := ""
	if len(nodes) <= maxNodes {
		list := make([]string, 0, len(nodes))
		for n := range nodes {
			list = append(list, "("+quote(n.Service)+","+quote(n.Operation)+")")
		}
		slices.Sort(list)
		nodeCond = " AND (service, operation) IN (" + strings.Join(list, ",") + ")"
	}
	return s.hotMinutes(ctx, where(ranges), nodeCond, pass, out)
}

// hotMinutes adds to out the node minutes cond and nodeCond select that
// pass, summed.
func (s *Store) hotMinutes(ctx context.Context, cond, nodeCond, pass string, out analysis.MinuteNodes) error {
	return s.query(ctx, "read hot minutes", `SELECT bucket, service, operation, requests, owned FROM (
		SELECT bucket, service, operation, sum(requests) AS requests, sum(owned) AS owned
		FROM node_minutes WHERE `+cond+nodeCond+` AND `+s.current(cond)+`
		GROUP BY bucket, service, operation)
		WHERE`+pass, hotRow(out))
}

// splitDays returns the partitions of node_minutes cond selects that a
// server holds in several parts: what Compact merges. A hint only: no
// answer depends on how rows are split in parts.
func (s *Store) splitDays(ctx context.Context, cond string) ([]string, error) {
	table := "node_minutes"
	if s.cluster != "" {
		table += localSuffix
	}
	return queryColumn[string](ctx, s, "list node_minutes parts", `SELECT DISTINCT partition_id FROM (SELECT hostName() AS host, path,
		partition_id FROM `+s.partsSource()+` WHERE database = `+quote(s.db)+` AND table = `+quote(table)+` AND active AND `+cond+`)
		GROUP BY host, replaceRegexpOne(path, '[^/]+/$', ''), partition_id HAVING count() > 1 ORDER BY partition_id`)
}

// dayID returns a day's partition id (YYYYMMDD).
func dayID(d int64) string { return dayDate(d).Format("20060102") }

// Compact merges node_minutes' day partitions before the UTC day holding
// t into one part each (OPTIMIZE … FINAL): fewer rows for HotMinutes to
// sum. It changes no answer.
func (s *Store) Compact(ctx context.Context, t int64) error {
	if err := s.checkWrite("compact"); err != nil {
		return err
	}
	ids, err := s.splitDays(ctx, `partition_id < `+quote(dayID(dayOf(t))))
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := s.exec(ctx, "compact node minutes", `OPTIMIZE TABLE `+s.dataTable("node_minutes")+` PARTITION ID `+quote(id)+` FINAL`); err != nil {
			return err
		}
	}
	return nil
}

// Bounds past which the second read of HotMinutes is not narrowed to the
// minutes and nodes the first found (the SQL text would grow too long).
const (
	maxRanges = 256
	maxNodes  = 512
)

// LastMinute returns the last minute in q's range with a trace.
func (s *Store) LastMinute(ctx context.Context, q store.Query) (int64, bool, error) {
	if err := s.checkOpen("read last minute"); err != nil {
		return 0, false, err
	}
	lo, hi := s.minuteRange(ctx, q)
	if lo >= hi {
		return 0, false, nil
	}
	ctx = light(ctx) // two numbers per bucket of trace_buckets
	if !s.cachesOn(ctx) {
		return s.readLastMinute(ctx, lo, hi)
	}
	k := tierKey(bucketRange{tierMinute, lo, hi}, "\x00last")
	v, ok, gen := s.last.Lookup(k)
	if ok {
		return v.m, v.ok, nil
	}
	s.last.Reads.Add(1)
	var m int64
	var found bool
	var err error
	// The answer before the write that dropped it is a hint: the day up
	// to it and on is one query; only when it holds no trace does the
	// search go on before it.
	if hint, ok := s.lastHint(k); ok && hint-1440 > lo {
		m, found, err = s.lastMinuteIn(ctx, hint-1440, hi)
		if err == nil && !found {
			m, found, err = s.readLastMinute(ctx, lo, hint-1440)
		}
	} else {
		m, found, err = s.readLastMinute(ctx, lo, hi)
	}
	if err == nil {
		s.last.Put(k, lastMinute{m, found}, gen)
		if found {
			s.setLastHint(k, m)
		}
	}
	return m, found, err
}

// readLastMinute is LastMinute of minutes [lo, hi), read from the server:
// the last hour with a trace (the hour tier is 60 times smaller), then
// its last minute; an hour with none in the range sends the search back.
func (s *Store) readLastMinute(ctx context.Context, lo, hi int64) (int64, bool, error) {
	hLo, hHi := rollup.FloorDiv(lo, 60), rollup.FloorDiv(hi-1, 60)+1
	for hHi > hLo {
		h, ok, err := s.lastBucket(ctx, bucketRange{tierHour, hLo, hHi})
		if err != nil || !ok {
			return 0, false, err
		}
		m, ok, err := s.lastMinuteIn(ctx, max(lo, h*60), min(hi, (h+1)*60))
		if err != nil || ok {
			return m, ok, err
		}
		hHi = h
	}
	return 0, false, nil
}

// lastMinuteIn returns the last minute of [lo, hi) with a trace.
func (s *Store) lastMinuteIn(ctx context.Context, lo, hi int64) (int64, bool, error) {
	return s.lastBucket(ctx, bucketRange{tierMinute, lo, hi})
}

// lastBucket returns the last bucket of r with a trace.
func (s *Store) lastBucket(ctx context.Context, r bucketRange) (int64, bool, error) {
	cond := where([]bucketRange{r})
	var b int64
	var n uint64
	err := s.queryRow(ctx, "read last bucket", `SELECT max(bucket), count() FROM (SELECT bucket, sum(n) AS traces FROM trace_buckets
		WHERE `+cond+` AND `+s.current(cond)+` GROUP BY bucket) WHERE traces > 0`, &b, &n)
	return b, n > 0, err
}

// Examples scans the records of q's range for the owner's failure
// events, reading back only results that hold the owner's names.
func (s *Store) Examples(ctx context.Context, q store.Query, owner graph.Node, n int) ([]graph.TraceID, error) {
	if err := s.checkOpen("read examples"); err != nil {
		return nil, err
	}
	lo, hi := s.minuteRange(ctx, q)
	if lo >= hi || n <= 0 {
		return nil, nil
	}
	wlo := analysis.WindowOf(clamp(lo, -(1<<62)/nsPerMinute, (1<<62)/nsPerMinute)*nsPerMinute, s.window)
	whi := analysis.WindowOf(clamp(hi, -(1<<62)/nsPerMinute, (1<<62)/nsPerMinute)*nsPerMinute, s.window)
	var best []analysis.Example
	in := graph.Interner{}
	err := s.query(ctx, "read examples", `SELECT trace_id, result FROM (SELECT trace_id, deleted, start, result FROM records FINAL
		WHERE win >= `+itoa(wlo)+` AND win <= `+itoa(whi)+` AND minute >= `+itoa(lo)+` AND minute < `+itoa(hi)+`)
		WHERE deleted = 0 AND start >= `+itoa(s.retentionFloor(ctx))+` AND position(result, `+
		quote(owner.Service)+`) > 0 AND position(result, `+quote(owner.Operation)+`) > 0`, func(r driver.Rows) error {
		var id graph.TraceID
		var b []byte
		if err := r.Scan(&id, &b); err != nil {
			return err
		}
		res, err := decodeResult(b, in.Intern)
		if err != nil {
			return nil // not an example; a corrupt record is reported where records are read
		}
		if rad, ok := analysis.OwnerRadius(res, owner); ok {
			best = analysis.KeepExample(best, id, rad)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return analysis.ExampleIDs(best, n), nil
}
