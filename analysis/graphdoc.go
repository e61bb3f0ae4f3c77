package analysis

import (
	"fmt"
	"slices"

	"github.com/stormradius/stormradius/graph"
)

// GraphDoc is the call graph of one root API over a window: every node and
// edge with its counts and the edge's fail-open state.
type GraphDoc struct {
	API   string      `json:"api"`
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
}

// GraphNode is a (service, operation) of a call graph.
type GraphNode struct {
	Service   string `json:"service"`
	Operation string `json:"operation"`
	Requests  int64  `json:"requests"`
	Failed    int64  `json:"failed"`
}

// ClaimCounts counts failed calls by the claim of their last response.
type ClaimCounts struct {
	Claimed   int64 `json:"claimed"`
	Unclaimed int64 `json:"unclaimed"`
	Missing   int64 `json:"missing"`
	Invalid   int64 `json:"invalid"`
}

// GraphEdge is an edge of a call graph.
type GraphEdge struct {
	From           graph.Node  `json:"from"`
	To             graph.Node  `json:"to"`
	Calls          int64       `json:"calls"`
	Attempts       int64       `json:"attempts"`
	Retried        int64       `json:"retried_calls"`
	Failed         int64       `json:"failed_calls"`
	FailedBy       ClaimCounts `json:"failed_by_claim"`
	MaxAttempts    int         `json:"max_attempts"`
	RetryEnabled   bool        `json:"retry_enabled"`
	Suppressed     int64       `json:"suppressed_calls"`
	FailOpen       bool        `json:"fail_open"`
	FailOpenSource string      `json:"fail_open_source"`
}

// Graph returns the call graph of api in the state. Retry-enabled and
// fail-open states are those of the dependency (caller service → callee) in
// the whole window, as the analyses use them.
func (s *State) Graph(api string, cfg Config) (*GraphDoc, error) {
	g := s.APIs[api]
	if g == nil {
		return nil, fmt.Errorf("no traces of root API %q", api)
	}
	d := &GraphDoc{API: api, Nodes: []GraphNode{}, Edges: []GraphEdge{}}
	for n, ns := range g.Nodes {
		d.Nodes = append(d.Nodes, GraphNode{Service: n.Service, Operation: n.Operation, Requests: ns.Hops, Failed: ns.Failed})
	}
	slices.SortFunc(d.Nodes, func(x, y GraphNode) int {
		return graph.Node{Service: x.Service, Operation: x.Operation}.Compare(graph.Node{Service: y.Service, Operation: y.Operation})
	})
	for p, es := range g.Edges {
		global := s.Edges[graph.Edge{Caller: p.From.Service, Callee: p.To}]
		open, src := cfg.Attribution.FailOpen(global)
		e := GraphEdge{
			From: p.From, To: p.To, Calls: es.Calls, Attempts: es.Attempts, Retried: es.Retried, Failed: es.Failed,
			FailedBy: ClaimCounts{
				Claimed: es.FailedBy[graph.ClaimClaimed], Unclaimed: es.FailedBy[graph.ClaimUnclaimed],
				Missing: es.FailedBy[graph.ClaimMissing], Invalid: es.FailedBy[graph.ClaimInvalid],
			},
			MaxAttempts: es.MaxAttempts(), Suppressed: es.Suppressed,
			FailOpen: open, FailOpenSource: src.String(),
		}
		if global != nil {
			e.RetryEnabled = global.RetryEnabled()
		}
		d.Edges = append(d.Edges, e)
	}
	slices.SortFunc(d.Edges, func(x, y GraphEdge) int {
		return graph.Pair{From: x.From, To: x.To}.Compare(graph.Pair{From: y.From, To: y.To})
	})
	return d, nil
}
