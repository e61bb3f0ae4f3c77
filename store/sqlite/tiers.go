package sqlite

import (
	"context"

	"github.com/stormradius/stormradius/analysis"
	tiercache "github.com/stormradius/stormradius/store/internal/tiers"
)

// The tier cache (store/internal/tiers) keeps the reports of the rollup
// bucket ranges Report read lately (ranges: whole days, hours, ten
// minutes, minutes), so that a report reads from the database only the
// ranges a write changed since. Each write drops the ranges holding the
// minutes it touched (the position tracker's OnMove: this process's Apply
// says which; another process's write, seen by the fingerprint, or
// retention, drops everything).

func newTierCache(max int64) *tiercache.Cache[*analysis.Report] {
	return tiercache.New(tiercache.Config[*analysis.Report]{Max: max, MaxEntry: tiercache.DefaultMaxEntry, Size: tiercache.ReportSize,
		Minutes: tierSize})
}

// cachedRange returns the report of one bucket range: kept, or read and
// kept.
func (s *Store) cachedRange(ctx context.Context, br bucketRange, api string) (*analysis.Report, error) {
	k := tiercache.Key{Tier: br.tier, Lo: br.lo, Hi: br.hi, Name: api}
	rep, ok, gen := s.tiers.Lookup(k)
	if ok {
		return rep, nil
	}
	s.tiers.Reads.Add(1)
	rep, err := s.reportRange(ctx, br, api)
	if err != nil {
		return nil, err
	}
	s.tiers.Put(k, rep, gen)
	return rep, nil
}
