package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

// MaxIncidents bounds how many incidents one list answers.
const MaxIncidents = 500

// Incidents returns the incidents overlapping q's range, newest first, at
// most limit (MaxIncidents when ≤ 0), with their figures; example traces
// only on the incident itself. With q.API, those that affected it.
func (s *Service) Incidents(ctx context.Context, q store.Query, limit int) ([]analysis.IncidentDoc, error) {
	if limit <= 0 || limit > MaxIncidents {
		limit = MaxIncidents
	}
	api := q.API
	q.API = ""
	all, err := FindIncidents(ctx, s.Store, q, s.Config, false)
	if errors.Is(err, ErrNoIncidents) {
		return []analysis.IncidentDoc{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]analysis.IncidentDoc, 0, min(limit, len(all)))
	for _, d := range all {
		if api != "" && !slices.Contains(d.AffectedAPIs, api) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, d)
	}
	return out, nil
}

// Incident returns one incident with its example traces; ErrNotFound when
// the id names none.
func (s *Service) Incident(ctx context.Context, id string) (*analysis.IncidentDoc, error) {
	d, err := FindIncident(ctx, s.Store, id, s.Config)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, notFound{err}
	case errors.Is(err, ErrNoIncidents):
		return nil, fmt.Errorf("%w: no incident %s (%v)", ErrNotFound, id, err)
	}
	return d, err
}

// notFound is a store's ErrNotFound as this package's: its message alone
// (it already begins "not found"), and both sentinels for errors.Is.
type notFound struct{ err error }

func (e notFound) Error() string   { return e.err.Error() }
func (e notFound) Unwrap() []error { return []error{ErrNotFound, e.err} }

// IncidentWatch follows incidents as data arrives: each Check detects the
// incidents of the recent past and says which opened, grew or closed
// since the last one (the service logs them).
type IncidentWatch struct {
	svc  *Service
	open map[string]analysis.IncidentDoc
	// Lookback is how far back a check looks (default an hour).
	Lookback time.Duration
}

// NewIncidentWatch returns a watch over svc.
func NewIncidentWatch(svc *Service) *IncidentWatch {
	return &IncidentWatch{svc: svc, open: map[string]analysis.IncidentDoc{}, Lookback: time.Hour}
}

// IncidentChange is what a check saw happen to an incident.
type IncidentChange struct {
	Incident analysis.IncidentDoc
	// Change is "opened", "updated" (an open incident's last hot minute
	// moved) or "closed".
	Change string
}

// Check detects the incidents of the last Lookback before now and returns
// what changed since the previous check.
func (w *IncidentWatch) Check(ctx context.Context, now time.Time) ([]IncidentChange, error) {
	list, err := w.svc.Incidents(ctx, store.Query{From: now.Add(-w.Lookback).UnixNano(), To: now.UnixNano()}, MaxIncidents)
	if err != nil {
		return nil, err
	}
	var out []IncidentChange
	seen := map[string]bool{}
	for _, d := range list {
		seen[d.ID] = true
		prev, was := w.open[d.ID]
		switch {
		case d.Open && !was:
			out = append(out, IncidentChange{d, "opened"})
		case d.Open && !prev.End.Equal(d.End):
			out = append(out, IncidentChange{d, "updated"})
		case !d.Open && was:
			out = append(out, IncidentChange{d, "closed"})
		}
		if d.Open {
			w.open[d.ID] = d
		} else {
			delete(w.open, d.ID)
		}
	}
	for id, d := range w.open {
		if !seen[id] { // out of the lookback: it closed long ago
			d.Open = false
			out = append(out, IncidentChange{d, "closed"})
			delete(w.open, id)
		}
	}
	return out, nil
}
