package analysis

import (
	"slices"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// potentialIndex answers, from a window State, how every node answers
// errors: the inputs of the potential radius (docs/SPEC.md §4.5).
type potentialIndex struct {
	s        *State
	cfg      Config
	services map[string]graph.NodeStats  // per service, for nodes never seen failing
	from     map[graph.Node][]graph.Pair // propagated tallies by node
}

func newPotentialIndex(s *State, cfg Config) *potentialIndex {
	p := &potentialIndex{s: s, cfg: cfg, services: map[string]graph.NodeStats{}, from: map[graph.Node][]graph.Pair{}}
	for k, v := range s.Nodes {
		agg := p.services[k.Service]
		agg.Merge(v, 1)
		p.services[k.Service] = agg
	}
	for k := range s.Propagated {
		p.from[k.From] = append(p.from[k.From], k)
	}
	return p
}

// speaks reports whether node n speaks claims: at least half its failed
// responses carried a valid claim. A node never seen failing is judged by
// its service's other operations; a service never seen failing does not.
func (p *potentialIndex) speaks(n graph.Node) bool {
	ns := p.s.Nodes[n]
	if ns == nil || ns.Failed <= 0 {
		agg := p.services[n.Service]
		ns = &agg
	}
	if ns.Failed <= 0 {
		return false
	}
	return float64(ns.ValidClaims()) >= p.cfg.speaks()*float64(ns.Failed)
}

// propagated returns how node n answered the errors it propagated through
// fail-close edges (the majority; ties go to claimed, then missing), and
// whether it was seen propagating at all.
func (p *potentialIndex) propagated(n graph.Node) (graph.Claim, bool) {
	var t [4]int64
	for _, k := range p.from[n] {
		open, _ := p.cfg.Attribution.FailOpen(p.s.Edges[graph.Edge{Caller: n.Service, Callee: k.To}])
		if open {
			continue
		}
		for i, v := range p.s.Propagated[k] {
			t[i] += v
		}
	}
	claimed, unclaimed := t[graph.ClaimClaimed], t[graph.ClaimUnclaimed]
	missing := t[graph.ClaimMissing] + t[graph.ClaimInvalid]
	switch {
	case claimed+unclaimed+missing <= 0:
		return graph.ClaimMissing, false
	case claimed >= unclaimed && claimed >= missing:
		return graph.ClaimClaimed, true
	case missing >= unclaimed:
		return graph.ClaimMissing, true
	}
	return graph.ClaimUnclaimed, true
}

// nodes returns the potential-radius view of an API's call graph.
func (p *potentialIndex) nodes(g *graph.APIGraph) []radius.PotentialNode {
	keys := make([]graph.Node, 0, len(g.Nodes))
	for k := range g.Nodes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, graph.Node.Compare)
	idx := make(map[graph.Node]int32, len(keys))
	out := make([]radius.PotentialNode, len(keys))
	for i, k := range keys {
		idx[k] = int32(i)
		out[i].Speaks = p.speaks(k)
		out[i].Propagated, out[i].SeenPropagating = p.propagated(k)
	}
	pairs := make([]graph.Pair, 0, len(g.Edges))
	for k := range g.Edges {
		pairs = append(pairs, k)
	}
	slices.SortFunc(pairs, graph.Pair.Compare)
	for _, k := range pairs {
		from, okf := idx[k.From]
		to, okt := idx[k.To]
		if !okf || !okt {
			continue
		}
		es := p.s.Edges[graph.Edge{Caller: k.From.Service, Callee: k.To}]
		open, _ := p.cfg.Attribution.FailOpen(es)
		out[to].Callers = append(out[to].Callers, radius.PotentialEdge{
			From: from, RetryEnabled: es != nil && es.RetryEnabled(), FailOpen: open,
		})
	}
	return out
}
