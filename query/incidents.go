package query

import (
	"context"
	"errors"
	"fmt"

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
	all, err := store.FindIncidents(ctx, s.Store, q, s.Config, false)
	if errors.Is(err, store.ErrNoIncidents) {
		return []analysis.IncidentDoc{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]analysis.IncidentDoc, 0, min(limit, len(all)))
	for _, d := range all {
		if api != "" && !contains(d.AffectedAPIs, api) {
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
	d, err := store.FindIncident(ctx, s.Store, id, s.Config)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	case errors.Is(err, store.ErrNoIncidents):
		return nil, fmt.Errorf("%w: no incident %s (%v)", ErrNotFound, id, err)
	}
	return d, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
