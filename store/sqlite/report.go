package sqlite

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

// span of rollup buckets: tier 0 minutes, tier 1 hours, tier 2 days,
// [lo, hi), added (sign 1) or taken away (sign -1).
type bucketRange struct {
	tier   int
	lo, hi int64
	sign   int64
}

// tiers are the rollup tiers by bucket size: id is the tier column's
// value (ids are kept as they were introduced), minutes the bucket size.
var tiers = [...]struct {
	id      int
	minutes int64
}{{0, 1}, {3, 10}, {1, 60}, {2, 24 * 60}}

// tierSize returns the bucket size, in minutes, of tier id.
func tierSize(id int) int64 {
	for _, t := range tiers {
		if t.id == id {
			return t.minutes
		}
	}
	panic("sqlite: no rollup tier " + strconv.Itoa(id))
}

// ranges covers minutes [lo, hi) with whole days from the day tier and
// the parts of days at either end from the hours, ten minutes and minutes
// below, so that a week costs a few dozen rows per API, not ten thousand. A part
// that covers more than half of its bucket is read as the bucket minus
// the rest (the tiers sum the same records, so a bucket is exactly the
// sum of the buckets below it): "the last hour" is the current hour and
// the previous one, less the minutes outside — and the minutes after now
// hold nothing to read.
func ranges(lo, hi int64) []bucketRange { return split(lo, hi, len(tiers)-1, 1) }

// split covers [lo, hi) from tiers[level] down.
func split(lo, hi int64, level int, sign int64) []bucketRange {
	if lo >= hi {
		return nil
	}
	if level == 0 {
		return []bucketRange{{tiers[0].id, lo, hi, sign}}
	}
	size, id := tiers[level].minutes, tiers[level].id
	bLo := rollup.FloorDiv(lo+size-1, size) // first whole bucket
	bHi := rollup.FloorDiv(hi, size)        // end of the last whole bucket
	if bLo > bHi {
		// Inside one bucket: [lo, hi) below, or the bucket less the rest.
		return part(lo, hi, bHi, level, sign)
	}
	var out []bucketRange
	if bLo < bHi {
		out = append(out, bucketRange{id, bLo, bHi, sign})
	}
	out = append(out, part(lo, bLo*size, bLo-1, level, sign)...)
	return append(out, part(bHi*size, hi, bHi, level, sign)...)
}

// part covers [lo, hi), which lies inside bucket b of tiers[level], from the tier
// below, or as the bucket less what it holds outside [lo, hi) when that
// is more than half of it.
func part(lo, hi, b int64, level int, sign int64) []bucketRange {
	if lo >= hi {
		return nil
	}
	size := tiers[level].minutes
	if 2*(hi-lo) <= size {
		return split(lo, hi, level-1, sign)
	}
	out := []bucketRange{{tiers[level].id, b, b + 1, sign}}
	out = append(out, split(b*size, lo, level-1, -sign)...)
	return append(out, split(hi, (b+1)*size, level-1, -sign)...)
}

// Report sums the rollups of the minutes q covers (see ranges), each range
// read through the primary key (tier, bucket, ...) unless the tier cache
// (tiers.go) holds it.
func (s *Store) Report(ctx context.Context, q store.Query) (*analysis.Report, error) {
	lo, hi := q.MinuteRange()
	rep := analysis.NewReport()
	// The position first: another process's writes drop the ranges kept
	// (a read of the fingerprint at most every position.DefaultEvery).
	_, perr := s.pos.Position(ctx)
	for _, r := range ranges(lo, hi) {
		var part *analysis.Report
		var err error
		if perr == nil {
			part, err = s.cachedRange(ctx, r, q.API)
		} else {
			part, err = s.reportRange(ctx, r, q.API)
		}
		if err != nil {
			return nil, err
		}
		rep.Merge(part, r.sign)
	}
	rep.Prune()
	return rep, nil
}

// reportRange reads the rollups of one bucket range: one query per
// rollup table.
func (s *Store) reportRange(ctx context.Context, br bucketRange, api string) (*analysis.Report, error) {
	rep := analysis.NewReport()
	for _, t := range rollupTables {
		if err := s.readTable(ctx, t, br, api, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// scan runs a read query and calls fn for every row.
func (s *Store) scan(ctx context.Context, q string, args []any, fn func(*sql.Rows) error) error {
	rows, err := s.resR.QueryContext(ctx, q, args...)
	if err != nil {
		return unavailable(ctx, "read rollups", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return unavailable(ctx, "read rollups", err)
		}
	}
	if err := rows.Err(); err != nil {
		return unavailable(ctx, "read rollups", err)
	}
	return nil
}
