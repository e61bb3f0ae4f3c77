package query

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/analysis/plan"
	"github.com/stormradius/stormradius/store"
)

// PlanRequest asks for an adoption plan (docs/PLANNER.md).
type PlanRequest struct {
	// APIs limits the plan to these root APIs (all when empty).
	APIs []string `json:"apis,omitempty"`
	// Steps is the most steps to plan (0: until no step helps).
	Steps int `json:"steps,omitempty"`
	// Budget is B, an adopted service's retry budget (default 0.1).
	Budget *float64 `json:"budget,omitempty"`
	// Fail names the services or nodes to plan for (default: every node,
	// weighed by its observed owned-failure rate).
	Fail []string `json:"fail,omitempty"`
}

// MaxPlanSteps bounds Steps.
const MaxPlanSteps = 100000

// Check validates the request, naming what is wrong.
func (r *PlanRequest) Check() error {
	if r.Steps < 0 || r.Steps > MaxPlanSteps {
		return bad("steps %d: want 0 (every step that helps) to %d", r.Steps, MaxPlanSteps)
	}
	if r.Budget != nil {
		if x := *r.Budget; !(x >= 0 && x <= 1) || math.IsNaN(x) {
			return bad("budget %v: want a fraction of requests between 0 and 1 (0.1 is 10%%)", x)
		}
	}
	for _, f := range r.Fail {
		if f == "" {
			return bad("fail: an empty name")
		}
	}
	return nil
}

// Plan makes the adoption plan of the call graphs in state (the sum of
// the windows the traces came from), with the owned failures of each API's
// owners from doc (its figures over the same traces). An API not in state
// wraps ErrNotFound; a bad request ErrBadRequest.
func Plan(r PlanRequest, state *analysis.State, doc *analysis.Document, cfg analysis.Config) (*plan.Plan, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	for _, api := range r.APIs {
		if state.APIs[api] == nil {
			return nil, fmt.Errorf("%w: no traces of root API %q in the range", ErrNotFound, api)
		}
	}
	owners := map[string][]analysis.OwnerDoc{}
	virtual := map[string]bool{}
	if doc != nil {
		for _, a := range doc.APIs {
			owners[a.API] = a.Owners
		}
		for _, s := range doc.Services {
			virtual[s.Service] = s.Virtual
		}
	}
	mesh, err := plan.FromState(state, owners, virtual, cfg, r.APIs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	budget := DefaultBudget
	if r.Budget != nil {
		budget = *r.Budget
	}
	p, err := plan.Make(mesh, plan.Options{Budget: budget, Steps: r.Steps, Fail: slices.Clone(r.Fail)})
	if err != nil {
		return nil, bad("%v", err)
	}
	return p, nil
}

// PlanOver makes the adoption plan of the traces in q's range: the call
// graphs of the windows it overlaps, the owned failures of its figures.
func (s *Service) PlanOver(ctx context.Context, r PlanRequest, q store.Query) (*plan.Plan, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	st, err := s.merged(ctx, q)
	if err != nil {
		return nil, err
	}
	q.API = ""
	doc, err := s.Figures(ctx, q)
	if err != nil {
		return nil, err
	}
	return Plan(r, st, doc, s.Config)
}
