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
)

var _ store.IncidentReader = (*Store)(nil)

// minuteRange returns the minutes q covers from the retention floor on,
// within the bounds SQL text takes.
func (s *Store) minuteRange(ctx context.Context, q store.Query) (lo, hi int64) {
	lo, hi = q.MinuteRange()
	if f := s.retentionFloor(ctx); f != 0 {
		lo = max(lo, floorDiv(f, nsPerMinute))
	}
	return clamp(lo, minBound, maxBound), clamp(hi, minBound, maxBound)
}

// current returns the SQL condition selecting, among the rollup rows cond
// selects, those of each bucket's current generation: the latest
// rollup_gens holds for it, 0 without one.
func current(cond string) string {
	return `((gen = 0 AND (tier, bucket) NOT IN (SELECT tier, bucket FROM rollup_gens WHERE ` + cond + `)) OR
		(tier, bucket, gen) IN (SELECT tier, bucket, argMax(gen, version) FROM rollup_gens WHERE ` + cond + ` GROUP BY tier, bucket))`
}

// HotMinutes reads the minute tier's node figures that pass the
// thresholds, from node_minutes (two numbers per node and minute, in key
// order). Most nodes own no failure in most minutes: the minutes and nodes
// that owned at least minOwned are found first among the rows with owned
// failures, and their requests are read for those alone.
func (s *Store) HotMinutes(ctx context.Context, q store.Query, minOwned int64, minRate float64) (analysis.MinuteNodes, error) {
	if err := s.checkOpen("read hot minutes"); err != nil {
		return nil, err
	}
	out := analysis.MinuteNodes{}
	lo, hi := s.minuteRange(ctx, q)
	if lo >= hi {
		return out, nil
	}
	cond := where([]bucketRange{{tierMinute, lo, hi}})
	if minOwned < 1 { // every minute with requests may pass: no narrowing
		return out, s.hotMinutes(ctx, cond, "", minOwned, minRate, out)
	}
	var ranges []bucketRange
	nodes := map[graph.Node]bool{}
	// Grouped by a hash of the names: a third cheaper than by the strings.
	err := s.query(ctx, "read owned minutes", `SELECT bucket, any(service), any(operation) FROM node_minutes
		WHERE `+cond+` AND owned != 0 AND `+current(cond)+`
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
		return out, err
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
	return out, s.hotMinutes(ctx, where(ranges), nodeCond, minOwned, minRate, out)
}

// hotMinutes adds to out the node minutes cond and nodeCond select that
// pass the thresholds.
func (s *Store) hotMinutes(ctx context.Context, cond, nodeCond string, minOwned int64, minRate float64, out analysis.MinuteNodes) error {
	return s.query(ctx, "read hot minutes", `SELECT bucket, service, operation, requests, owned FROM (
		SELECT bucket, service, operation, sum(requests) AS requests, sum(owned) AS owned
		FROM node_minutes WHERE `+cond+nodeCond+` AND `+current(cond)+`
		GROUP BY bucket, service, operation)
		WHERE requests > 0 AND owned >= `+itoa(minOwned)+` AND owned >= `+strconv.FormatFloat(minRate, 'g', -1, 64)+` * requests`,
		func(r driver.Rows) error {
			var m int64
			var n graph.Node
			var a analysis.NodeAgg
			if err := r.Scan(&m, &n.Service, &n.Operation, &a.Requests, &a.Owned); err != nil {
				return err
			}
			out.Put(m, n, a)
			return nil
		})
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
	// The last hour with a trace first (the hour tier is 60 times
	// smaller), then its last minute with one; an hour whose minutes in
	// the range hold none (the range ends inside it) sends the search to
	// the hours before it.
	hLo, hHi := floorDiv(lo, 60), floorDiv(hi-1, 60)+1
	for hHi > hLo {
		cond := where([]bucketRange{{tierHour, hLo, hHi}})
		var h int64
		var n uint64
		if err := s.queryRow(ctx, "read last hour", `SELECT max(bucket), count() FROM (SELECT bucket, sum(n) AS traces FROM rollups
			WHERE `+cond+` AND stat = 'traces' AND `+current(cond)+` GROUP BY bucket) WHERE traces > 0`, &h, &n); err != nil || n == 0 {
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
	cond := where([]bucketRange{{tierMinute, lo, hi}})
	var m int64
	var n uint64
	err := s.queryRow(ctx, "read last minute", `SELECT max(bucket), count() FROM (SELECT bucket, sum(n) AS traces FROM rollups
		WHERE `+cond+` AND stat = 'traces' AND `+current(cond)+` GROUP BY bucket) WHERE traces > 0`, &m, &n)
	return m, n > 0, err
}

// Examples scans the records of q's range (a range of the primary key)
// for the owner's failure events. Only records whose result holds the
// owner's names are read back (names are stored verbatim in results; the
// JSON of earlier releases is read whole).
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
	in := interner{}
	err := s.query(ctx, "read examples", `SELECT trace_id, result FROM (SELECT trace_id, deleted, start, result FROM records FINAL
		WHERE win >= `+itoa(wlo)+` AND win <= `+itoa(whi)+` AND minute >= `+itoa(lo)+` AND minute < `+itoa(hi)+`)
		WHERE deleted = 0 AND start >= `+itoa(s.retentionFloor(ctx))+` AND (startsWith(result, '{') OR (position(result, `+
		quote(owner.Service)+`) > 0 AND position(result, `+quote(owner.Operation)+`) > 0))`, func(r driver.Rows) error {
		var id graph.TraceID
		var b []byte
		if err := r.Scan(&id, &b); err != nil {
			return err
		}
		res, err := decodeResult(b, in.intern)
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
