package analysis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/stormradius/stormradius/graph"
)

// stateJSON is the serialised form of a State: maps with struct keys become
// sorted lists, so the encoding is deterministic.
type stateJSON struct {
	Version    int              `json:"version"`
	Traces     int64            `json:"traces"`
	Edges      []edgeJSON       `json:"edges"`
	Nodes      []nodeJSON       `json:"nodes"`
	Propagated []propagatedJSON `json:"propagated"`
	APIs       []apiJSON        `json:"apis"`
	// Admitted lists the names the window admitted that the counts do not
	// hold (Limits): absent unless some are.
	Admitted *admittedJSON `json:"admitted,omitempty"`
}

type edgeJSON struct {
	Caller string          `json:"caller"`
	Callee graph.Node      `json:"callee"`
	Stats  graph.EdgeStats `json:"stats"`
}

type nodeJSON struct {
	Node  graph.Node      `json:"node"`
	Stats graph.NodeStats `json:"stats"`
}

type propagatedJSON struct {
	Pair   graph.Pair `json:"pair"`
	Claims [4]int64   `json:"claims"`
}

type pairJSON struct {
	Pair  graph.Pair      `json:"pair"`
	Stats graph.EdgeStats `json:"stats"`
}

type apiJSON struct {
	API    string     `json:"api"`
	Traces int64      `json:"traces"`
	Nodes  []nodeJSON `json:"nodes"`
	Edges  []pairJSON `json:"edges"`
}

const stateVersion = 1

// MarshalJSON encodes the state deterministically.
func (s *State) MarshalJSON() ([]byte, error) {
	out := stateJSON{Version: stateVersion, Traces: s.Traces}
	for k, v := range s.Edges {
		out.Edges = append(out.Edges, edgeJSON{Caller: k.Caller, Callee: k.Callee, Stats: *v})
	}
	slices.SortFunc(out.Edges, func(x, y edgeJSON) int {
		return cmp.Or(cmp.Compare(x.Caller, y.Caller), x.Callee.Compare(y.Callee))
	})
	out.Nodes = nodesJSON(s.Nodes)
	for k, v := range s.Propagated {
		out.Propagated = append(out.Propagated, propagatedJSON{Pair: k, Claims: *v})
	}
	slices.SortFunc(out.Propagated, func(x, y propagatedJSON) int { return x.Pair.Compare(y.Pair) })
	out.APIs = graphsJSON(s.APIs)
	out.Admitted = s.admitted.extras(s).toJSON()
	return json.Marshal(out)
}

// graphsJSON encodes call graphs as a sorted list.
func graphsJSON(m map[string]*graph.APIGraph) []apiJSON {
	out := make([]apiJSON, 0, len(m))
	for k, g := range m {
		a := apiJSON{API: k, Traces: g.Traces, Nodes: nodesJSON(g.Nodes)}
		for p, v := range g.Edges {
			a.Edges = append(a.Edges, pairJSON{Pair: p, Stats: *v})
		}
		slices.SortFunc(a.Edges, func(x, y pairJSON) int { return x.Pair.Compare(y.Pair) })
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y apiJSON) int { return cmp.Compare(x.API, y.API) })
	return out
}

// graph decodes one call graph.
func (a apiJSON) graph() *graph.APIGraph {
	g := graph.NewAPIGraph(a.API)
	g.Traces = a.Traces
	for _, n := range a.Nodes {
		st := n.Stats
		g.Nodes[n.Node] = &st
	}
	for _, e := range a.Edges {
		st := e.Stats
		g.Edges[e.Pair] = &st
	}
	return g
}

func nodesJSON(m map[graph.Node]*graph.NodeStats) []nodeJSON {
	out := make([]nodeJSON, 0, len(m))
	for k, v := range m {
		out = append(out, nodeJSON{Node: k, Stats: *v})
	}
	slices.SortFunc(out, func(x, y nodeJSON) int { return x.Node.Compare(y.Node) })
	return out
}

// UnmarshalJSON decodes a state encoded by MarshalJSON, replacing s.
func (s *State) UnmarshalJSON(b []byte) error {
	var in stateJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("analysis: decode state: %w", err)
	}
	if in.Version != stateVersion {
		return fmt.Errorf("analysis: decode state: version %d, want %d", in.Version, stateVersion)
	}
	*s = *NewState()
	s.Traces = in.Traces
	for _, e := range in.Edges {
		st := e.Stats
		s.Edges[graph.Edge{Caller: e.Caller, Callee: e.Callee}] = &st
	}
	for _, n := range in.Nodes {
		st := n.Stats
		s.Nodes[n.Node] = &st
	}
	for _, p := range in.Propagated {
		c := p.Claims
		s.Propagated[p.Pair] = &c
	}
	for _, a := range in.APIs {
		s.APIs[a.API] = a.graph()
	}
	s.admitted = in.Admitted.admitted()
	return nil
}
