package clickhouse

import (
	"context"
	"strconv"

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
// thresholds (the filter runs in SQL: hot minutes are few).
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
	err := s.query(ctx, "read hot minutes", `SELECT bucket, service, operation, requests, owned FROM (
		SELECT bucket, service, operation, sumIf(n, stat = 'node_requests') AS requests, sumIf(n, stat = 'node_owned') AS owned
		FROM rollups WHERE `+cond+` AND stat IN ('node_requests', 'node_owned') AND `+current(cond)+`
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
	return out, err
}

// LastMinute returns the last minute in q's range with a trace.
func (s *Store) LastMinute(ctx context.Context, q store.Query) (int64, bool, error) {
	if err := s.checkOpen("read last minute"); err != nil {
		return 0, false, err
	}
	lo, hi := s.minuteRange(ctx, q)
	if lo >= hi {
		return 0, false, nil
	}
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
	out := make([]graph.TraceID, 0, min(n, len(best)))
	for _, c := range best[:min(n, len(best))] {
		out = append(out, c.ID)
	}
	return out, nil
}
