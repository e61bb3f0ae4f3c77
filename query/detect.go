package query

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

// Incidents are detected from the minute rollups (docs/SPEC.md §4.8): the hot
// minutes of each owner (owned-failure rate and count at or above the
// thresholds) are read with the thresholds applied in the store, chained
// into incidents by analysis.DetectIncidents, and given their figures from
// the rollups of their minutes, the call graphs of their windows and
// example traces from the records. Nothing is kept beside the rollups, so
// incidents are exactly as durable as they are, an open incident grows in
// place as its minutes arrive, and every front end finds the same ones.
//
// An incident is open while fewer than QuietMinutes minutes holding data
// have followed its last hot minute: "now" is the minute after the last
// one holding a trace, so a replayed or delayed stream is judged by its
// own clock, and analyze over a file says the same as report over the
// store holding it.

// ErrNoIncidents reports a store that cannot detect incidents.
var ErrNoIncidents = fmt.Errorf("this store does not keep what incidents are detected from")

// DocumentIncidents returns the incidents of the minutes q selects as a
// document lists them: detected in those minutes alone, figures from those
// minutes; with q.API, those that affected it. A store without an
// store.IncidentReader lists none.
func DocumentIncidents(ctx context.Context, r Reader, q store.Query, cfg analysis.Config) ([]analysis.IncidentDoc, error) {
	ir, ok := r.(store.IncidentReader)
	if !ok {
		return []analysis.IncidentDoc{}, nil
	}
	rules := cfg.Incidents.Resolved()
	all := store.Query{From: q.From, To: q.To}
	last, ok, err := ir.LastMinute(ctx, all)
	if err != nil || !ok {
		return []analysis.IncidentDoc{}, err
	}
	hot, err := ir.HotMinutes(ctx, all, rules.MinOwned, rules.MinRate)
	if err != nil {
		return nil, err
	}
	out := []analysis.IncidentDoc{}
	for _, s := range analysis.DetectIncidents(hot, last+1, rules) {
		d, err := incidentFigures(ctx, r, ir, s, cfg, true)
		if err != nil {
			return nil, err
		}
		if q.API == "" || slices.Contains(d.AffectedAPIs, q.API) {
			out = append(out, d)
		}
	}
	return out, nil
}

// MaxIncidentSpan bounds how far around a range incidents are followed to
// find where they began and ended.
const MaxIncidentSpan = 31 * 24 * time.Hour

// FindIncidents returns the incidents whose hot minutes overlap q's range,
// newest first, each whole: detection looks before and after the range as
// far as an incident goes on (up to MaxIncidentSpan), so an incident has
// the same id and figures whatever range finds it. Examples are looked up
// only when examples is set (they read records).
func FindIncidents(ctx context.Context, r Reader, q store.Query, cfg analysis.Config, examples bool) ([]analysis.IncidentDoc, error) {
	ir, ok := r.(store.IncidentReader)
	if !ok {
		return nil, ErrNoIncidents
	}
	spans, err := detectAround(ctx, ir, q, cfg.Incidents.Resolved())
	if err != nil {
		return nil, err
	}
	out := []analysis.IncidentDoc{}
	for i := len(spans) - 1; i >= 0; i-- {
		d, err := incidentFigures(ctx, r, ir, spans[i], cfg, examples)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// FindIncident returns the incident an id names (store.ErrNotFound when there is
// none), with its examples.
func FindIncident(ctx context.Context, r Reader, id string, cfg analysis.Config) (*analysis.IncidentDoc, error) {
	ir, ok := r.(store.IncidentReader)
	if !ok {
		return nil, ErrNoIncidents
	}
	first, ok := analysis.ParseIncidentID(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an incident id", store.ErrNotFound, id)
	}
	spans, err := detectAround(ctx, ir, store.Query{From: store.MinuteStart(first), To: store.MinuteStart(first + 1)}, cfg.Incidents.Resolved())
	if err != nil {
		return nil, err
	}
	for _, s := range spans {
		if s.ID() == id {
			d, err := incidentFigures(ctx, r, ir, s, cfg, true)
			return &d, err
		}
	}
	return nil, fmt.Errorf("%w: no incident %s", store.ErrNotFound, id)
}

// detectAround detects the incidents overlapping q's minutes, widening the
// minutes it reads (doubling) while an incident reaches the edge of what
// was read.
func detectAround(ctx context.Context, ir store.IncidentReader, q store.Query, rules analysis.IncidentRules) ([]analysis.IncidentSpan, error) {
	lo, hi := q.MinuteRange()
	maxSpan := int64(MaxIncidentSpan / time.Minute)
	if q.From == 0 {
		lo = hi - maxSpan
	}
	back, fwd := rules.QuietMinutes+60, rules.QuietMinutes+60
	// The data's last minute and the first read of hot minutes at once:
	// the read covers the minutes up to hi+fwd, a superset of those up to
	// min(now, hi+fwd) (no minute after the last with a trace holds a
	// hot one), cut to them below.
	var first analysis.MinuteNodes
	firstErr := make(chan error, 1)
	go func() {
		var err error
		first, err = ir.HotMinutes(ctx, store.Query{From: store.MinuteStart(lo - back), To: store.MinuteStart(hi + fwd)}, rules.MinOwned, rules.MinRate)
		firstErr <- err
	}()
	last, ok, err := ir.LastMinute(ctx, store.Query{From: store.MinuteStart(lo - maxSpan)})
	if err2 := <-firstErr; err == nil && ok {
		err = err2
	}
	if err != nil || !ok {
		return nil, err
	}
	now := last + 1
	hi = min(hi, now)
	if lo >= hi {
		return nil, nil
	}
	for speculative := true; ; speculative = false {
		rlo, rhi := lo-back, min(now, hi+fwd)
		var hot analysis.MinuteNodes
		if speculative {
			hot = analysis.MinuteNodes{}
			for m, nodes := range first {
				if m >= rlo && m < rhi {
					hot[m] = nodes
				}
			}
		} else if hot, err = ir.HotMinutes(ctx, store.Query{From: store.MinuteStart(rlo), To: store.MinuteStart(rhi)}, rules.MinOwned, rules.MinRate); err != nil {
			return nil, err
		}
		spans := analysis.DetectIncidents(hot, now, rules)
		widen := false
		var out []analysis.IncidentSpan
		for _, s := range spans {
			if s.First-rlo < rules.QuietMinutes && back < maxSpan {
				back, widen = back*2, true
			}
			if rhi < now && rhi-1-s.Last < rules.QuietMinutes && fwd < maxSpan {
				fwd, widen = fwd*2, true
			}
			if s.First < hi && s.Last >= lo {
				out = append(out, s)
			}
		}
		if !widen {
			return out, nil
		}
	}
}

// incidentFigures gives an incident its figures from the rollups of its
// minutes, the call graphs of its windows and, with examples, up to
// analysis.MaxExamples example traces.
func incidentFigures(ctx context.Context, r Reader, ir store.IncidentReader, s analysis.IncidentSpan, cfg analysis.Config, examples bool) (analysis.IncidentDoc, error) {
	q := store.Query{From: store.MinuteStart(s.First), To: store.MinuteStart(s.Last + 1)}
	rep, err := r.Report(ctx, q)
	if err != nil {
		return analysis.IncidentDoc{}, err
	}
	lo, hi := store.WindowRange(q, cfg.Window)
	sums, err := r.Summaries(ctx, lo, hi)
	if err != nil {
		return analysis.IncidentDoc{}, err
	}
	d := s.Figures(rep, analysis.SummaryGraphs(sums, cfg.Window)(s), cfg.Incidents)
	if examples {
		ids, err := ir.Examples(ctx, q, s.Owner, analysis.MaxExamples)
		if err != nil {
			return analysis.IncidentDoc{}, err
		}
		for _, id := range ids {
			d.ExampleTraces = append(d.ExampleTraces, id.String())
		}
	}
	return d, nil
}
