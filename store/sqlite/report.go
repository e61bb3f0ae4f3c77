package sqlite

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// Audit verdict indexes into attribution.Counts.
const (
	auditCorrect      = attribution.AuditCorrect
	auditFalseClaim   = attribution.AuditFalseClaim
	auditFalseUnclaim = attribution.AuditFalseUnclaim
	auditMissing      = attribution.AuditMissing
	auditInvalid      = attribution.AuditInvalid
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
	bLo := floorDiv(lo+size-1, size) // first whole bucket
	bHi := floorDiv(hi, size)        // end of the last whole bucket
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
// read through the primary key (tier, bucket, ...).
func (s *Store) Report(ctx context.Context, q store.Query) (*analysis.Report, error) {
	lo, hi := q.MinuteRange()
	rep := analysis.NewReport()
	for _, r := range ranges(lo, hi) {
		part, err := s.reportRange(ctx, r, q.API)
		if err != nil {
			return nil, err
		}
		rep.Merge(part, r.sign)
	}
	rep.Prune()
	return rep, nil
}

// reportRange reads the rollups of one bucket range.
func (s *Store) reportRange(ctx context.Context, br bucketRange, api string) (*analysis.Report, error) {
	rep := analysis.NewReport()
	cond := "tier = ? AND bucket >= ? AND bucket < ?"
	args := []any{br.tier, br.lo, br.hi}
	apiCond, apiArgs := cond, args
	if api != "" {
		apiCond += " AND api = ?"
		apiArgs = append(append([]any(nil), args...), api)
	}
	err := s.scan(ctx, `SELECT coalesce(sum(spans),0), coalesce(sum(traces),0), coalesce(sum(fragments),0) FROM rollup_totals WHERE `+cond, args,
		func(rows *sql.Rows) error { return rows.Scan(&rep.Spans, &rep.Traces, &rep.Fragments) })
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT api, sum(traces), sum(failed), sum(root_errors), sum(remote_parent), sum(radius_sum),
		sum(suppressed), sum(hops), sum(counterfactual), sum(misattributed), sum(naive), sum(eligible), sum(fragments), sum(events)
		FROM rollup_api WHERE `+apiCond+` GROUP BY api`, apiArgs, func(rows *sql.Rows) error {
		var name string
		var a analysis.APIAgg
		if err := rows.Scan(&name, &a.Traces, &a.Failed, &a.RootErrors, &a.RemoteParent, &a.RadiusSum, &a.Suppressed,
			&a.Hops, &a.Counterfactual, &a.Misattributed, &a.Naive, &a.Eligible, &a.Fragments, &a.Events); err != nil {
			return err
		}
		dst := rep.API(name)
		a.Radius, a.Amplification, a.Owners = dst.Radius, dst.Amplification, dst.Owners
		*dst = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT api, radius, sum(n) FROM rollup_radius WHERE `+apiCond+` GROUP BY api, radius HAVING sum(n) <> 0`, apiArgs,
		func(rows *sql.Rows) error {
			var name string
			var r int
			var n int64
			if err := rows.Scan(&name, &r, &n); err != nil {
				return err
			}
			rep.API(name).Radius[r] += n
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT api, amp, sum(n) FROM rollup_amp WHERE `+apiCond+` GROUP BY api, amp HAVING sum(n) <> 0`, apiArgs,
		func(rows *sql.Rows) error {
			var name string
			var amp float64
			var n int64
			if err := rows.Scan(&name, &amp, &n); err != nil {
				return err
			}
			rep.API(name).Amplification[amp] += n
			return nil
		})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT api, service, operation, sum(events), sum(spurious), sum(traces), sum(suppressed), sum(radius_sum)
		FROM rollup_owner WHERE `+apiCond+` GROUP BY api, service, operation`, apiArgs, func(rows *sql.Rows) error {
		var name string
		var n graph.Node
		var o analysis.OwnerAgg
		if err := rows.Scan(&name, &n.Service, &n.Operation, &o.Events, &o.Spurious, &o.Traces, &o.Suppressed, &o.RadiusSum); err != nil {
			return err
		}
		dst := rep.API(name).Owner(n)
		o.Radius, o.Amplification = dst.Radius, dst.Amplification
		*dst = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT api, service, operation, radius, sum(n) FROM rollup_owner_radius WHERE `+apiCond+`
		GROUP BY api, service, operation, radius HAVING sum(n) <> 0`, apiArgs, func(rows *sql.Rows) error {
		var name string
		var nd graph.Node
		var r int
		var n int64
		if err := rows.Scan(&name, &nd.Service, &nd.Operation, &r, &n); err != nil {
			return err
		}
		rep.API(name).Owner(nd).Radius[r] += n
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT api, service, operation, amp, sum(n) FROM rollup_owner_amp WHERE `+apiCond+`
		GROUP BY api, service, operation, amp HAVING sum(n) <> 0`, apiArgs, func(rows *sql.Rows) error {
		var name string
		var nd graph.Node
		var amp float64
		var n int64
		if err := rows.Scan(&name, &nd.Service, &nd.Operation, &amp, &n); err != nil {
			return err
		}
		rep.API(name).Owner(nd).Amplification[amp] += n
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT service, operation, sum(requests), sum(owned) FROM rollup_node WHERE `+cond+`
		GROUP BY service, operation`, args, func(rows *sql.Rows) error {
		var nd graph.Node
		var a analysis.NodeAgg
		if err := rows.Scan(&nd.Service, &nd.Operation, &a.Requests, &a.Owned); err != nil {
			return err
		}
		*rep.Node(nd) = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, `SELECT api, service, version, sum(traces), sum(failed), sum(root_errors), sum(radius_sum)
		FROM rollup_version WHERE `+apiCond+` GROUP BY api, service, version`, apiArgs, func(rows *sql.Rows) error {
		var k analysis.VersionKey
		var v analysis.VersionAgg
		if err := rows.Scan(&k.API, &k.Service, &k.Version, &v.Traces, &v.Failed, &v.RootErrors, &v.RadiusSum); err != nil {
			return err
		}
		dst := rep.Version(k)
		v.Radius, v.Amplification = dst.Radius, dst.Amplification
		*dst = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, h := range []struct{ table, col string }{{"rollup_version_radius", "radius"}, {"rollup_version_amp", "amp"}} {
		// Table and column names are our own constants.
		err = s.scan(ctx, `SELECT api, service, version, `+h.col+`, sum(n) FROM `+h.table+` WHERE `+apiCond+`
			GROUP BY api, service, version, `+h.col+` HAVING sum(n) <> 0`, apiArgs, func(rows *sql.Rows) error {
			var k analysis.VersionKey
			var x float64
			var n int64
			if err := rows.Scan(&k.API, &k.Service, &k.Version, &x, &n); err != nil {
				return err
			}
			if h.col == "radius" {
				rep.Version(k).Radius[int(x)] += n
			} else {
				rep.Version(k).Amplification[x] += n
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	err = s.scan(ctx, `SELECT service, sum(correct), sum(false_claim), sum(false_unclaim), sum(missing), sum(invalid),
		sum(mismatches), sum(misattributed), sum(naive), sum(eligible), sum(context_drops), sum(owned), sum(requests),
		sum(virtual_requests), sum(counterfactual), sum(spurious) FROM rollup_service WHERE `+cond+` GROUP BY service`, args,
		func(rows *sql.Rows) error {
			var name string
			var v analysis.ServiceResult
			c := &v.Claims
			if err := rows.Scan(&name, &c[auditCorrect], &c[auditFalseClaim], &c[auditFalseUnclaim], &c[auditMissing],
				&c[auditInvalid], &v.Mismatches, &v.Misattributed, &v.NaiveMisattributed, &v.Eligible, &v.ContextDrops,
				&v.OwnedFailures, &v.Requests, &v.VirtualRequests, &v.Counterfactual, &v.Spurious); err != nil {
				return err
			}
			v.Service = name
			*rep.Service(name) = v
			return nil
		})
	if err != nil {
		return nil, err
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
