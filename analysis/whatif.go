package analysis

import (
	"fmt"
	"slices"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// WhatIfModel returns the call graph of api as seen in the window, as a
// what-if model (SPEC §4.7): nodes are "service operation", edges carry the
// calls per request observed (calls / requests served by the caller), the
// observed retries per edge (max attempts − 1 on retry-enabled edges, 0
// elsewhere) and the learned fail-open state. The nodes are returned too.
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
		es := g.Edges[p]
		from := g.Nodes[p.From]
		calls := 1.0
		if from != nil && from.Hops > 0 {
			calls = float64(es.Calls) / float64(from.Hops)
		}
		e := radius.ModelEdge{From: idx[p.From], To: idx[p.To], Calls: calls}
		global := s.Edges[graph.Edge{Caller: p.From.Service, Callee: p.To}]
		if global != nil && global.RetryEnabled() {
			e.Retries = float64(max(global.MaxAttempts(), 2) - 1)
		}
		e.FailOpen, _ = cfg.Attribution.FailOpen(global)
		m.Edges = append(m.Edges, e)
	}
	return m, nodes, nil
}
