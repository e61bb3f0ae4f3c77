package sqlite

import (
	"context"
	"database/sql"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

var _ store.IncidentReader = (*Store)(nil)

// HotMinutes reads the minute tier's node rollups that pass the thresholds
// (the filter runs in SQL: hot minutes are few). With the SPEC's count
// threshold or above, the partial index of minutes with at least 10 owned
// failures holds every candidate (its WHERE term must appear literally).
func (s *Store) HotMinutes(ctx context.Context, q store.Query, minOwned int64, minRate float64) (analysis.MinuteNodes, error) {
	lo, hi := q.MinuteRange()
	out := analysis.MinuteNodes{}
	err := s.scan(ctx, hotMinutesSQL(minOwned), []any{lo, hi, minOwned, minRate}, func(rows *sql.Rows) error {
		var m int64
		var n graph.Node
		var a analysis.NodeAgg
		if err := rows.Scan(&m, &n.Service, &n.Operation, &a.Requests, &a.Owned); err != nil {
			return err
		}
		out.Put(m, n, a)
		return nil
	})
	return out, err
}

// hotMinutesSQL reads hot minutes through the partial index when the
// count threshold implies its condition (the planner, without statistics,
// would rather walk the primary key over every node's minutes).
func hotMinutesSQL(minOwned int64) string {
	from, hot := "rollup_node", ""
	if minOwned >= 10 {
		from, hot = "rollup_node INDEXED BY rollup_node_hot", " AND owned >= 10"
	}
	return `SELECT bucket, service, operation, requests, owned FROM ` + from + `
		WHERE tier = 0 AND bucket >= ? AND bucket < ?` + hot + ` AND owned >= ? AND owned >= ? * requests AND requests > 0`
}

// LastMinute returns the last minute in q's range with a trace.
func (s *Store) LastMinute(ctx context.Context, q store.Query) (int64, bool, error) {
	lo, hi := q.MinuteRange()
	var m sql.NullInt64
	err := s.scan(ctx, `SELECT max(bucket) FROM rollup_totals WHERE tier = 0 AND bucket >= ? AND bucket < ? AND traces > 0`,
		[]any{lo, hi}, func(rows *sql.Rows) error { return rows.Scan(&m) })
	return m.Int64, m.Valid, err
}

// Examples scans the records of q's range (through the start index) for
// the owner's failure events.
func (s *Store) Examples(ctx context.Context, q store.Query, owner graph.Node, n int) ([]graph.TraceID, error) {
	lo, hi := q.MinuteRange()
	var best []analysis.Example
	err := s.queryRecords(ctx, `SELECT `+recordColumns+` FROM records WHERE start >= ? AND start < ?`,
		[]any{clampMul(lo), clampMul(hi)}, func(r *store.Record) error {
			if rad, ok := analysis.OwnerRadius(r.Result, owner); ok {
				best = analysis.KeepExample(best, r.TraceID, rad)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return analysis.ExampleIDs(best, n), nil
}

// clampMul turns a minute into unix nanoseconds, saturating.
func clampMul(minute int64) int64 {
	const limit = (1 << 62) / 60_000_000_000
	switch {
	case minute > limit:
		return 1 << 62
	case minute < -limit:
		return -(1 << 62)
	}
	return minute * 60_000_000_000
}
