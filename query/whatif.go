package query

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// WhatIfRequest is a what-if question (docs/SPEC.md §4.7): a chain, or the call
// graph of a root API learned from traces, with failing nodes and a retry
// behaviour.
type WhatIfRequest struct {
	// Chain is a call chain, root first. Either Chain or API.
	Chain []string `json:"chain,omitempty"`
	// API is the root API whose learned call graph is used.
	API string `json:"api,omitempty"`
	// Fail names the failing nodes (chain) or services / "service
	// operation" nodes (call graph).
	Fail []string `json:"fail"`
	// Retries is R per hop; nil means 1 for a chain and the retries
	// observed per edge for a call graph.
	Retries *float64 `json:"retries,omitempty"`
	// Budget is B, a fraction of requests (default 0.1).
	Budget *float64 `json:"budget,omitempty"`
	// Policy is naive (default), budget or ownership.
	Policy string `json:"policy,omitempty"`
	// ErrorRate, when set, also asks the error rate a caller sees after
	// retries for that independent error rate.
	ErrorRate *float64 `json:"error_rate,omitempty"`
}

// WhatIfAnswer is the answer (docs/SPEC.md §5.2: policy and requests).
type WhatIfAnswer struct {
	Policy string `json:"policy"`
	// Requests per node (chain) or per service (call graph), per request
	// at the root.
	Requests map[string]float64 `json:"requests"`
	// Nodes, for a call graph: per "service operation", in Order.
	Nodes   map[string]float64 `json:"nodes,omitempty"`
	Failing []string           `json:"failing"`
	// Retries is the R used for every edge; absent when the observed
	// retries of each edge were used.
	Retries *float64 `json:"retries,omitempty"`
	Budget  float64  `json:"budget"`
	API     string   `json:"api,omitempty"`
	// ErrorRateAfterRetries answers ErrorRate.
	ErrorRateAfterRetries *float64 `json:"error_rate_after_retries,omitempty"`
	// Order lists the model's nodes as a table shows them: the chain's
	// order, or the call graph's sorted nodes.
	Order []string `json:"order"`
}

// Defaults of a what-if question.
const (
	DefaultRetries = 1.0
	DefaultBudget  = 0.1
)

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}

// Check validates the question, naming what is wrong.
func (r *WhatIfRequest) Check() error {
	if (len(r.Chain) == 0) == (r.API == "") {
		return bad("give either a chain or an api")
	}
	if len(r.Fail) == 0 {
		return bad("fail is required: the failing node(s)")
	}
	if _, err := radius.ParsePolicy(r.policy()); err != nil {
		return bad("%v", err)
	}
	if r.Retries != nil {
		if x := *r.Retries; math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return bad("retries %v: want a finite number of retries per hop, 0 or more", x)
		}
	}
	if r.Budget != nil {
		if x := *r.Budget; !(x >= 0 && x <= 1) {
			return bad("budget %v: want a fraction of requests between 0 and 1 (0.1 is 10%%)", x)
		}
	}
	if r.ErrorRate != nil {
		if x := *r.ErrorRate; !(x >= 0 && x <= 1) {
			return bad("error rate %v: want a fraction between 0 and 1 (0.05 is 5%%)", x)
		}
	}
	for i, n := range r.Chain {
		if n == "" {
			return bad("chain: empty node name at %d", i)
		}
		if slices.Index(r.Chain, n) != i {
			return bad("chain %q names %q twice: a chain visits each node once (for a call graph with cycles, use an api)", r.Chain, n)
		}
	}
	return nil
}

func (r *WhatIfRequest) policy() string {
	if r.Policy == "" {
		return "naive"
	}
	return r.Policy
}

// WhatIf answers a what-if question. For an API, state holds the learned
// call graphs (the sum of the windows the traces came from); for a chain it
// may be nil. An unknown API wraps ErrNotFound; a bad question
// ErrBadRequest; a result too large for a float64 radius.ErrOverflow.
func WhatIf(r WhatIfRequest, state *analysis.State, cfg analysis.Config) (*WhatIfAnswer, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	pol, _ := radius.ParsePolicy(r.policy())
	budget := DefaultBudget
	if r.Budget != nil {
		budget = *r.Budget
	}
	out := &WhatIfAnswer{Policy: pol.String(), Failing: r.Fail, Budget: budget, Requests: map[string]float64{}}
	retries := DefaultRetries
	if r.Retries != nil {
		retries = *r.Retries
	}
	sc := radius.Scenario{Retries: retries, Budget: budget, Policy: pol}
	var model *radius.Model
	var nodes []graph.Node
	if len(r.Chain) > 0 {
		model = radius.ChainModel(r.Chain)
		sc.Failing = make([]bool, len(r.Chain))
		for _, f := range r.Fail {
			i := slices.Index(r.Chain, f)
			if i < 0 {
				return nil, bad("fail %q is not in the chain %q", f, r.Chain)
			}
			sc.Failing[i] = true
		}
		out.Retries = &retries
	} else {
		if state == nil {
			return nil, fmt.Errorf("%w: no traces of root API %q", ErrNotFound, r.API)
		}
		var err error
		model, nodes, err = state.WhatIfModel(r.API, cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		if r.Retries != nil {
			for i := range model.Edges {
				model.Edges[i].Retries = -1 // the scenario's R everywhere
			}
			out.Retries = &retries
		}
		sc.Failing = make([]bool, len(nodes))
		for _, f := range r.Fail {
			found := false
			for i, n := range nodes {
				if n.Service == f || n.String() == f {
					sc.Failing[i], found = true, true
				}
			}
			if !found {
				return nil, bad("fail %q is not a service in the call graph of %q", f, r.API)
			}
		}
		out.API = r.API
		out.Nodes = map[string]float64{}
	}
	req, err := model.Requests(sc)
	if err != nil {
		if errors.Is(err, radius.ErrOverflow) {
			return nil, err
		}
		return nil, bad("%v", err)
	}
	for i, name := range model.Nodes {
		out.Order = append(out.Order, name)
		if nodes == nil {
			out.Requests[name] = req[i]
			continue
		}
		out.Nodes[name] = req[i]
		out.Requests[nodes[i].Service] += req[i]
	}
	if r.ErrorRate != nil {
		e := radius.ErrorRateAfterRetries(*r.ErrorRate, budget)
		out.ErrorRateAfterRetries = &e
	}
	return out, nil
}
