package analysis

import (
	"fmt"
	"slices"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// WhatIfModel returns the call graph of api as seen in the window, as a
// what-if model (docs/SPEC.md §4.7): nodes are "service operation", edges carry the
// calls per request observed, the observed retries per edge (max attempts
// − 1 on retry-enabled edges, 0 elsewhere) and the learned fail-open state.
// The nodes are returned too.
//
// Calls per request on an edge are its calls over the requests the caller
// serves in the model: as the root, or through the edges the model keeps
// (radius.Model.Kept). The requests a caller serves through an edge the
// model drops — recursion a → b → a, say — still make calls, and those
// calls are charged to the requests the model does see, so that with
// nothing failing each node below serves what it was observed to serve per
// root request. Dividing by every request the caller served would charge
// b of a → b → a, retried at both levels, 1 request in 5.
func (s *State) WhatIfModel(api string, cfg Config) (*radius.Model, []graph.Node, error) {
	g := s.APIs[api]
	if g == nil {
		names := make([]string, 0, len(s.APIs))
		for k := range s.APIs {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, nil, fmt.Errorf("no traces of root API %q (have %q)", api, names)
	}
	nodes := make([]graph.Node, 0, len(g.Nodes))
	for k := range g.Nodes {
		nodes = append(nodes, k)
	}
	slices.SortFunc(nodes, graph.Node.Compare)
	m := &radius.Model{Root: -1}
	idx := make(map[graph.Node]int, len(nodes))
	for i, n := range nodes {
		idx[n] = i
		m.Nodes = append(m.Nodes, n.String())
		if n.String() == api && m.Root < 0 {
			m.Root = i
		}
	}
	if m.Root < 0 {
		return nil, nil, fmt.Errorf("root API %q has no root node", api)
	}
	pairs := make([]graph.Pair, 0, len(g.Edges))
	for k := range g.Edges {
		pairs = append(pairs, k)
	}
	slices.SortFunc(pairs, graph.Pair.Compare)
	for _, p := range pairs {
		e := radius.ModelEdge{From: idx[p.From], To: idx[p.To]}
		global := s.Edges[graph.Edge{Caller: p.From.Service, Callee: p.To}]
		if global != nil && global.RetryEnabled() {
			e.Retries = float64(max(global.MaxAttempts(), 2) - 1)
		}
		e.FailOpen, _ = cfg.Attribution.FailOpen(global)
		m.Edges = append(m.Edges, e)
	}
	kept, err := m.Kept()
	if err != nil {
		return nil, nil, err
	}
	// served: the requests each node serves in the model. Every trace of
	// the API has one root hop; every attempt on an edge reaches one hop of
	// its callee.
	served := make([]int64, len(nodes))
	served[m.Root] = g.Traces
	for i, p := range pairs {
		if kept[i] {
			served[idx[p.To]] += g.Edges[p].Attempts
		}
	}
	for i, p := range pairs {
		from := idx[p.From]
		calls := float64(g.Edges[p].Calls)
		switch {
		case served[from] > 0:
			calls /= float64(served[from])
		case g.Nodes[p.From] != nil && g.Nodes[p.From].Hops > 0:
			// Not reached in the model: the figure is never used.
			calls /= float64(g.Nodes[p.From].Hops)
		default:
			calls = 1
		}
		m.Edges[i].Calls = calls
	}
	return m, nodes, nil
}
