package graph

// MaxAttemptBuckets bounds the attempt-count histogram of an edge: calls
// with more attempts are counted as having MaxAttemptBuckets.
const MaxAttemptBuckets = 32

// Edge is a dependency as the failure memory sees it (docs/SPEC.md §4.3): a caller
// service calling one operation of a callee service.
type Edge struct {
	Caller string `json:"caller"`
	Callee Node   `json:"callee"`
}

// Pair is an edge of a call graph between two nodes.
type Pair struct {
	From Node `json:"from"`
	To   Node `json:"to"`
}

// Compare orders pairs by caller node, then callee node.
func (p Pair) Compare(o Pair) int {
	if c := p.From.Compare(o.From); c != 0 {
		return c
	}
	return p.To.Compare(o.To)
}

// EdgeStats counts the calls seen on one edge. Every field is a count, so
// stats add, subtract and merge in any order: a trace's contribution can be
// removed again when late spans re-open it.
type EdgeStats struct {
	Calls    int64 `json:"calls"` // logical calls
	Attempts int64 `json:"attempts"`
	Retried  int64 `json:"retried"` // calls with two attempts or more
	Failed   int64 `json:"failed"`  // calls whose last attempt failed
	// FailedBy counts failed calls by the claim of their last response,
	// indexed by Claim.
	FailedBy [4]int64 `json:"failed_by"`
	// CallerFailed counts failed calls whose calling hop failed too: the
	// failure memory's evidence that the dependency is fail-close.
	CallerFailed int64 `json:"caller_failed"`
	// Suppressed counts calls with an attempt marked retry.suppressed.
	Suppressed int64 `json:"suppressed"`
	// DeclaredOpen and DeclaredClose count calls that declared
	// dependency.fail_open true or false.
	DeclaredOpen  int64 `json:"declared_open"`
	DeclaredClose int64 `json:"declared_close"`
	// ByAttempts[i] counts calls with i+1 attempts (the last bucket: or more).
	ByAttempts [MaxAttemptBuckets]int64 `json:"by_attempts"`
}

// MaxAttempts returns the most attempts seen on one call, 0 without calls.
func (e *EdgeStats) MaxAttempts() int {
	for i := MaxAttemptBuckets - 1; i >= 0; i-- {
		if e.ByAttempts[i] > 0 {
			return i + 1
		}
	}
	return 0
}

// RetryEnabled reports whether a call on the edge was seen retried, or an
// attempt said a retry was suppressed (docs/SPEC.md §4.5).
func (e *EdgeStats) RetryEnabled() bool { return e.Retried > 0 || e.Suppressed > 0 }

// Merge adds sign × o to e (sign is +1 or -1).
func (e *EdgeStats) Merge(o *EdgeStats, sign int64) {
	e.Calls += sign * o.Calls
	e.Attempts += sign * o.Attempts
	e.Retried += sign * o.Retried
	e.Failed += sign * o.Failed
	for i := range e.FailedBy {
		e.FailedBy[i] += sign * o.FailedBy[i]
	}
	e.CallerFailed += sign * o.CallerFailed
	e.Suppressed += sign * o.Suppressed
	e.DeclaredOpen += sign * o.DeclaredOpen
	e.DeclaredClose += sign * o.DeclaredClose
	for i := range e.ByAttempts {
		e.ByAttempts[i] += sign * o.ByAttempts[i]
	}
}

// IsZero reports whether every count is zero.
func (e *EdgeStats) IsZero() bool { return *e == EdgeStats{} }

// Observe adds sign × call c of t to e.
func (e *EdgeStats) Observe(t *Trace, c *Call, sign int64) {
	n := int64(c.Attempts())
	e.Calls += sign
	e.Attempts += sign * n
	if n >= 2 {
		e.Retried += sign
	}
	if c.Failed {
		e.Failed += sign
		e.FailedBy[c.Claim&3] += sign
		if t.Hops[c.Caller].Failed {
			e.CallerFailed += sign
		}
	}
	if c.Suppressed {
		e.Suppressed += sign
	}
	switch c.FailOpen {
	case True:
		e.DeclaredOpen += sign
	case False:
		e.DeclaredClose += sign
	}
	e.ByAttempts[min(n, MaxAttemptBuckets)-1] += sign
}

// NodeStats counts the hops of one node and the claims its failures
// answered.
type NodeStats struct {
	Hops   int64 `json:"hops"`
	Failed int64 `json:"failed"`
	// FailedBy counts failed hops by the claim they were seen to answer.
	FailedBy [4]int64 `json:"failed_by"`
}

// Merge adds sign × o to n.
func (n *NodeStats) Merge(o *NodeStats, sign int64) {
	n.Hops += sign * o.Hops
	n.Failed += sign * o.Failed
	for i := range n.FailedBy {
		n.FailedBy[i] += sign * o.FailedBy[i]
	}
}

// ValidClaims returns how many failed hops answered a valid claim.
func (n *NodeStats) ValidClaims() int64 {
	return n.FailedBy[ClaimClaimed] + n.FailedBy[ClaimUnclaimed]
}

// APIGraph is the call graph of one root API: every node and edge seen in
// its traces, with counts.
type APIGraph struct {
	API    string
	Traces int64
	Nodes  map[Node]*NodeStats
	Edges  map[Pair]*EdgeStats

	// cache, when not nil (Growing), finds the nodes and edges Add adds
	// to by where their names are. Entries leave the maps only in prune,
	// which drops it.
	cache *graphCache
}

// Growing tells g that traces will mostly be added to it (a batch): it
// then keeps a cache that saves Add most of its map lookups. Removing a
// trace drops the cache.
func (g *APIGraph) Growing() {
	if g.cache == nil {
		g.cache = &graphCache{}
	}
}

// graphCache is an APIGraph's cache of node and edge stats by where their
// names' bytes are (AddrCache).
type graphCache struct {
	nodes NodeCache
	edges AddrCache[*EdgeStats]
	// What the last trace's hops and calls found, by position.
	hops  Memo[*NodeStats]
	calls Memo[*EdgeStats]
}

// NodeCache finds the stats of nodes in a map by where their names are
// (AddrCache), creating the stats of a node new to the map.
type NodeCache struct{ c AddrCache[*NodeStats] }

// Stats returns the stats of node k in m, created when new.
func (c *NodeCache) Stats(m map[Node]*NodeStats, k Node) *NodeStats {
	a := AddrOf(k.Service, k.Operation, "", "")
	if ns, ok := c.c.Get(&a); ok {
		return ns
	}
	ns := m[k]
	if ns == nil {
		ns = &NodeStats{}
		m[k] = ns
	}
	c.c.Put(&a, ns, len(m))
	return ns
}

// edge returns the stats of edge p, created when new.
func (c *graphCache) edge(g *APIGraph, p Pair) *EdgeStats {
	a := AddrOf(p.From.Service, p.From.Operation, p.To.Service, p.To.Operation)
	if es, ok := c.edges.Get(&a); ok {
		return es
	}
	es := g.Edges[p]
	if es == nil {
		es = &EdgeStats{}
		g.Edges[p] = es
	}
	c.edges.Put(&a, es, len(g.Edges))
	return es
}

// NewAPIGraph returns an empty graph for api.
func NewAPIGraph(api string) *APIGraph {
	return &APIGraph{API: api, Nodes: map[Node]*NodeStats{}, Edges: map[Pair]*EdgeStats{}}
}

// Add adds (sign=+1) or removes (sign=-1) trace t, whose root API must be
// g.API.
func (g *APIGraph) Add(t *Trace, sign int64) {
	g.Traces += sign
	cache := g.cache
	if sign < 0 {
		cache = nil
	}
	for i := range t.Hops {
		h := &t.Hops[i]
		var ns *NodeStats
		if cache != nil {
			k := AddrOf(h.Service, h.Operation, "", "")
			var ok bool
			if ns, ok = cache.hops.Get(i, &k); !ok {
				ns = cache.nodes.Stats(g.Nodes, h.Key())
				cache.hops.Put(i, &k, ns)
			}
		} else if ns = g.Nodes[h.Key()]; ns == nil {
			ns = &NodeStats{}
			g.Nodes[h.Key()] = ns
		}
		ns.Hops += sign
		if h.Failed {
			ns.Failed += sign
			ns.FailedBy[t.ObservedClaim(int32(i))&3] += sign
		}
	}
	for i := range t.Calls {
		c := &t.Calls[i]
		p := Pair{From: t.Hops[c.Caller].Key(), To: Node{c.CalleeService, c.CalleeOperation}}
		var es *EdgeStats
		if cache != nil {
			k := AddrOf(p.From.Service, p.From.Operation, p.To.Service, p.To.Operation)
			var ok bool
			if es, ok = cache.calls.Get(i, &k); !ok {
				es = cache.edge(g, p)
				cache.calls.Put(i, &k, es)
			}
		} else if es = g.Edges[p]; es == nil {
			es = &EdgeStats{}
			g.Edges[p] = es
		}
		es.Observe(t, c, sign)
	}
	if sign < 0 {
		g.prune()
	}
}

// Merge adds sign × o to g.
func (g *APIGraph) Merge(o *APIGraph, sign int64) {
	g.Traces += sign * o.Traces
	for k, v := range o.Nodes {
		ns := g.Nodes[k]
		if ns == nil {
			ns = &NodeStats{}
			g.Nodes[k] = ns
		}
		ns.Merge(v, sign)
	}
	for k, v := range o.Edges {
		es := g.Edges[k]
		if es == nil {
			es = &EdgeStats{}
			g.Edges[k] = es
		}
		es.Merge(v, sign)
	}
	if sign < 0 {
		g.prune()
	}
}

// prune drops nodes and edges whose counts all went back to zero.
func (g *APIGraph) prune() {
	g.cache = nil // it may hold what is deleted
	for k, v := range g.Nodes {
		if *v == (NodeStats{}) {
			delete(g.Nodes, k)
		}
	}
	for k, v := range g.Edges {
		if v.IsZero() {
			delete(g.Edges, k)
		}
	}
}
