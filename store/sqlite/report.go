package sqlite

import (
	"context"
	"database/sql"

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

// span of rollup buckets: tier 0 minutes or tier 1 hours, [lo, hi).
type bucketRange struct {
	tier   int
	lo, hi int64
}

// ranges covers minutes [lo, hi) with whole hours from the hourly tier and
// the minutes at either end from the minute tier, so a week costs a few
// hundred rows per API, not ten thousand.
func ranges(lo, hi int64) []bucketRange {
	if lo >= hi {
		return nil
	}
	hLo := floorDiv(lo+59, 60) // first whole hour
	hHi := floorDiv(hi, 60)    // end of the last whole hour
	if hLo >= hHi {
		return []bucketRange{{0, lo, hi}}
	}
	out := []bucketRange{{1, hLo, hHi}}
	if lo < hLo*60 {
		out = append(out, bucketRange{0, lo, hLo * 60})
	}
	if hHi*60 < hi {
		out = append(out, bucketRange{0, hHi * 60, hi})
	}
	return out
}

// where returns the SQL condition selecting rs and its arguments.
func where(rs []bucketRange) (string, []any) {
	cond := "("
	var args []any
	for i, r := range rs {
		if i > 0 {
			cond += " OR "
		}
		cond += "(tier = ? AND bucket >= ? AND bucket < ?)"
		args = append(args, r.tier, r.lo, r.hi)
	}
	return cond + ")", args
}

// Report sums the rollups of the minutes q covers.
func (s *Store) Report(ctx context.Context, q store.Query) (*analysis.Report, error) {
	lo, hi := q.MinuteRange()
	rep := analysis.NewReport()
	rs := ranges(lo, hi)
	if len(rs) == 0 {
		return rep, nil
	}
	cond, args := where(rs)
	apiCond, apiArgs := cond, args
	if q.API != "" {
		apiCond += " AND api = ?"
		apiArgs = append(append([]any(nil), args...), q.API)
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
	err = s.scan(ctx, `SELECT api, service, operation, sum(events), sum(spurious) FROM rollup_owner WHERE `+apiCond+`
		GROUP BY api, service, operation`, apiArgs, func(rows *sql.Rows) error {
		var name string
		var n graph.Node
		var o analysis.OwnerAgg
		if err := rows.Scan(&name, &n.Service, &n.Operation, &o.Events, &o.Spurious); err != nil {
			return err
		}
		*rep.API(name).Owner(n) = o
		return nil
	})
	if err != nil {
		return nil, err
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
	rep.Prune()
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
