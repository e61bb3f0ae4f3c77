// Package analysis puts the analyses together, for a batch of traces (a
// file) as for a stream of them (one trace at a time, as ingest delivers
// them).
//
// The split that makes both work: a trace's assembly (graph.Trace) is a
// fact that depends on no other trace; a State sums what the window has
// seen (failure memory, retry-enabled edges, max attempts per edge, claims
// nodes answer, per-API call graphs) and is made only of counts, so it
// updates incrementally, merges across instances, subtracts a trace that is
// re-opened by late spans, and serialises. Every window-dependent figure is
// derived from the two by Evaluate, so a result never depends on the order
// in which traces arrived. The package is pure: no I/O, no globals.
package analysis

import (
	"github.com/stormradius/stormradius/graph"
)

// State is what a window of traces has seen, as counts.
type State struct {
	// Edges holds the failure memory and retry stats of every dependency
	// (caller service → callee service and operation).
	Edges map[graph.Edge]*graph.EdgeStats
	// Nodes counts the hops of every node and the claims its failures
	// answered.
	Nodes map[graph.Node]*graph.NodeStats
	// Propagated counts, for failed hops of Pair.From that had a failed call
	// to Pair.To, the claims they answered (indexed by graph.Claim): how a
	// node answers errors it propagates.
	Propagated map[graph.Pair]*[4]int64
	// APIs holds the call graph of every root API.
	APIs map[string]*graph.APIGraph
	// Traces counts the traces added.
	Traces int64

	// admitted are the names the window admitted (see Limits and
	// Admitted): not a count, so Add and Merge leave it alone.
	admitted *Admitted
	// cache, when not nil (Windows.Growing), finds the edges and nodes
	// Add adds to by where their names are. Entries leave the maps only
	// in prune, which drops it.
	cache *stateCache
}

// stateCache is a State's cache of edge and node stats by where their
// names' bytes are (graph.AddrCache).
type stateCache struct {
	edges graph.AddrCache[*graph.EdgeStats]
	nodes graph.NodeCache
	// memos remember what the last trace of each root API found, by
	// position (graph.Memo).
	memos map[string]*stateMemo
}

// stateMemo is what the last trace of a root API found: its calls'
// edges and its hops' nodes.
type stateMemo struct {
	calls graph.Memo[*graph.EdgeStats]
	hops  graph.Memo[*graph.NodeStats]
}

// memo returns the memo of api's traces.
func (c *stateCache) memo(api string) *stateMemo {
	m := c.memos[api]
	if m == nil {
		if c.memos == nil {
			c.memos = map[string]*stateMemo{}
		}
		m = &stateMemo{}
		c.memos[api] = m
	}
	return m
}

// edge returns the stats of edge k in s, created when new.
func (c *stateCache) edge(s *State, k graph.Edge) *graph.EdgeStats {
	a := graph.AddrOf(k.Caller, k.Callee.Service, k.Callee.Operation, "")
	if es, ok := c.edges.Get(&a); ok {
		return es
	}
	es := s.Edges[k]
	if es == nil {
		es = &graph.EdgeStats{}
		s.Edges[k] = es
	}
	c.edges.Put(&a, es, len(s.Edges))
	return es
}

// NewState returns an empty State.
func NewState() *State {
	return &State{
		Edges:      map[graph.Edge]*graph.EdgeStats{},
		Nodes:      map[graph.Node]*graph.NodeStats{},
		Propagated: map[graph.Pair]*[4]int64{},
		APIs:       map[string]*graph.APIGraph{},
	}
}

// Add adds trace t to the state (sign +1), or removes it again (sign -1).
// Every count is weighted: a sampled trace counts as the traces of the
// traffic it stands for (t.W(), docs/SPEC.md §4.9), so that what the
// window learns from a sample is what the whole traffic would teach.
func (s *State) Add(t *graph.Trace, sign int64) {
	sign *= t.W()
	s.Traces += sign
	var memo *stateMemo
	if s.cache != nil && sign > 0 {
		memo = s.cache.memo(t.API())
	}
	for i := range t.Calls {
		c := &t.Calls[i]
		k := graph.Edge{Caller: t.Hops[c.Caller].Service, Callee: graph.Node{Service: c.CalleeService, Operation: c.CalleeOperation}}
		var es *graph.EdgeStats
		if memo != nil {
			a := graph.AddrOf(k.Caller, k.Callee.Service, k.Callee.Operation, "")
			var ok bool
			if es, ok = memo.calls.Get(i, &a); !ok {
				es = s.cache.edge(s, k)
				memo.calls.Put(i, &a, es)
			}
		} else if es = s.Edges[k]; es == nil {
			es = &graph.EdgeStats{}
			s.Edges[k] = es
		}
		es.Observe(t, c, sign)
	}
	for i := range t.Hops {
		h := &t.Hops[i]
		key := h.Key()
		var ns *graph.NodeStats
		if memo != nil {
			a := graph.AddrOf(h.Service, h.Operation, "", "")
			var ok bool
			if ns, ok = memo.hops.Get(i, &a); !ok {
				ns = s.cache.nodes.Stats(s.Nodes, key)
				memo.hops.Put(i, &a, ns)
			}
		} else if ns = s.Nodes[key]; ns == nil {
			ns = &graph.NodeStats{}
			s.Nodes[key] = ns
		}
		ns.Hops += sign
		if !h.Failed {
			continue
		}
		ns.Failed += sign
		claim := t.ObservedClaim(int32(i)) & 3
		ns.FailedBy[claim] += sign
		// Tally the answer once per distinct callee among failed calls.
		for c := h.CallStart; c < h.CallEnd; c++ {
			call := &t.Calls[c]
			if !call.Failed || seenEarlier(t, h, c) {
				continue
			}
			p := graph.Pair{From: key, To: graph.Node{Service: call.CalleeService, Operation: call.CalleeOperation}}
			tally := s.Propagated[p]
			if tally == nil {
				tally = &[4]int64{}
				s.Propagated[p] = tally
			}
			tally[claim] += sign
		}
	}
	if api := t.API(); api != "" {
		g := s.APIs[api]
		if g == nil {
			g = graph.NewAPIGraph(api)
			if s.cache != nil {
				g.Growing()
			}
			s.APIs[api] = g
		}
		g.Add(t, sign)
		if g.Traces == 0 {
			delete(s.APIs, api)
		}
	}
	if sign < 0 {
		s.prune()
	}
}

// seenEarlier reports whether a failed call of h before c has c's callee.
func seenEarlier(t *graph.Trace, h *graph.Hop, c int32) bool {
	call := &t.Calls[c]
	for e := h.CallStart; e < c; e++ {
		o := &t.Calls[e]
		if o.Failed && o.CalleeService == call.CalleeService && o.CalleeOperation == call.CalleeOperation {
			return true
		}
	}
	return false
}

// Merge adds sign × o to s (sign +1 merges, -1 subtracts). What the
// windows admitted (Admitted) is not a count: it is left as it is. An
// entry whose counts come to zero is dropped, whatever the sign: a
// partition's part may hold negative counts (a trace another partition
// added, taken out by this one), which the sum cancels.
func (s *State) Merge(o *State, sign int64) {
	dropped := false
	s.Traces += sign * o.Traces
	for k, v := range o.Edges {
		es := s.Edges[k]
		if es == nil {
			es = &graph.EdgeStats{}
			s.Edges[k] = es
		}
		es.Merge(v, sign)
		if es.IsZero() {
			delete(s.Edges, k)
			dropped = true
		}
	}
	for k, v := range o.Nodes {
		ns := s.Nodes[k]
		if ns == nil {
			ns = &graph.NodeStats{}
			s.Nodes[k] = ns
		}
		ns.Merge(v, sign)
		if *ns == (graph.NodeStats{}) {
			delete(s.Nodes, k)
			dropped = true
		}
	}
	for k, v := range o.Propagated {
		tally := s.Propagated[k]
		if tally == nil {
			tally = &[4]int64{}
			s.Propagated[k] = tally
		}
		for i := range tally {
			tally[i] += sign * v[i]
		}
		if *tally == ([4]int64{}) {
			delete(s.Propagated, k)
			dropped = true
		}
	}
	for k, v := range o.APIs {
		g := s.APIs[k]
		if g == nil {
			g = graph.NewAPIGraph(k)
			s.APIs[k] = g
		}
		g.Merge(v, sign)
		if g.Traces == 0 && len(g.Nodes) == 0 {
			delete(s.APIs, k)
		}
	}
	if dropped {
		s.cache = nil // it may hold what is deleted
	}
}

// Clone returns a deep copy of s, with the names its window admitted
// that its counts do not hold (what a stored copy needs).
func (s *State) Clone() *State {
	c := NewState()
	c.Merge(s, 1)
	c.admitted = s.admitted.extras(s)
	return c
}

// prune drops entries whose counts all went back to zero.
func (s *State) prune() {
	s.cache = nil // it may hold what is deleted
	for k, v := range s.Edges {
		if v.IsZero() {
			delete(s.Edges, k)
		}
	}
	for k, v := range s.Nodes {
		if *v == (graph.NodeStats{}) {
			delete(s.Nodes, k)
		}
	}
	for k, v := range s.Propagated {
		if *v == ([4]int64{}) {
			delete(s.Propagated, k)
		}
	}
}
