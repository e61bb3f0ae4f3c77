// Package plan is the adoption planner (docs/PLANNER.md): which services
// to move to error ownership first, predicted from the fleet's own call
// graphs. It orders adoption steps greedily, each lowering the expected
// storm cost most, with the per-service what-if rule of radius.Factor. It
// is pure: no I/O, no globals, deterministic.
package plan

import (
	"fmt"
	"math"
	"slices"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// Mesh is what a plan reads: the services, what each does with the claim
// protocol today, and every root API's call graph with its traffic and
// failure rates.
type Mesh struct {
	// Services names the services; radius.Model.Service indexes it.
	Services []string
	// Speaks is what each service does today (nil: none speaks it).
	Speaks []radius.Speaks
	// Virtual marks, by service, the uninstrumented callees (databases,
	// caches): they cannot adopt anything (nil: none).
	Virtual []bool
	APIs    []API
}

// API is one root API of a Mesh.
type API struct {
	Name string
	// Model is the API's call graph: its Service maps every node to a
	// service of the Mesh; an edge's Retries is its own R (≥ 0).
	Model *radius.Model
	// Weight is the API's root requests (observed traffic).
	Weight float64
	// Failures is, by node, its observed owned-failure rate (owned
	// failure events per hop); nil or all zero: none was seen.
	Failures []float64
}

// check validates the mesh, naming what is wrong.
func (m *Mesh) check() error {
	if m.Speaks != nil && len(m.Speaks) != len(m.Services) {
		return fmt.Errorf("plan: %d service behaviours for %d services", len(m.Speaks), len(m.Services))
	}
	if m.Virtual != nil && len(m.Virtual) != len(m.Services) {
		return fmt.Errorf("plan: %d virtual flags for %d services", len(m.Virtual), len(m.Services))
	}
	for i := range m.APIs {
		a := &m.APIs[i]
		if a.Model == nil {
			return fmt.Errorf("plan: API %q has no call graph", a.Name)
		}
		n := len(a.Model.Nodes)
		if len(a.Model.Service) != n {
			return fmt.Errorf("plan: API %q: %d node services for %d nodes", a.Name, len(a.Model.Service), n)
		}
		for v, s := range a.Model.Service {
			if s < 0 || s >= len(m.Services) {
				return fmt.Errorf("plan: API %q: node %q: service %d out of range", a.Name, a.Model.Nodes[v], s)
			}
		}
		if _, err := a.Model.Kept(); err != nil {
			return fmt.Errorf("plan: API %q: %v", a.Name, err)
		}
		for _, e := range a.Model.Edges {
			if e.Retries < 0 || math.IsNaN(e.Retries) || math.IsInf(e.Retries, 0) {
				return fmt.Errorf("plan: API %q: edge %s → %s: retries %v: want a finite number ≥ 0", a.Name, a.Model.Nodes[e.From], a.Model.Nodes[e.To], e.Retries)
			}
		}
		if !(a.Weight >= 0) || math.IsInf(a.Weight, 0) {
			return fmt.Errorf("plan: API %q: weight %v: want a finite number ≥ 0", a.Name, a.Weight)
		}
		if a.Failures != nil && len(a.Failures) != n {
			return fmt.Errorf("plan: API %q: %d failure rates for %d nodes", a.Name, len(a.Failures), n)
		}
		for v, p := range a.Failures {
			if !(p >= 0) || math.IsInf(p, 0) {
				return fmt.Errorf("plan: API %q: node %q: failure rate %v: want a finite number ≥ 0", a.Name, a.Model.Nodes[v], p)
			}
		}
	}
	return nil
}

// FromState builds the mesh of the root APIs in st (all of them when
// apis is empty): each API's learned call graph (State.WhatIfModel: calls
// per request, R per edge, fail-open edges), its traces as its weight,
// the owned-failure rate of each node (owners' failure events, from the
// API's document row, over the node's hops in the API), and what each
// service does with the claim protocol (Learn). virtual names the
// uninstrumented callees (a document's services marked virtual).
func FromState(st *analysis.State, owners map[string][]analysis.OwnerDoc, virtual map[string]bool, cfg analysis.Config, apis []string) (*Mesh, error) {
	if len(apis) == 0 {
		for api := range st.APIs {
			apis = append(apis, api)
		}
	}
	apis = slices.Clone(apis)
	slices.Sort(apis)
	apis = slices.Compact(apis)
	m := &Mesh{}
	svcIdx := map[string]int{}
	service := func(name string) int {
		i, ok := svcIdx[name]
		if !ok {
			i = len(m.Services)
			svcIdx[name] = i
			m.Services = append(m.Services, name)
		}
		return i
	}
	for _, api := range apis {
		if g := st.APIs[api]; g != nil && g.Traces <= 0 {
			continue // nothing to weigh (a partition's part may hold negative counts)
		}
		model, nodes, err := st.WhatIfModel(api, cfg)
		if err != nil {
			return nil, err
		}
		g := st.APIs[api]
		a := API{Name: api, Model: model, Weight: float64(g.Traces), Failures: make([]float64, len(nodes))}
		model.Service = make([]int, len(nodes))
		at := make(map[graph.Node]int, len(nodes))
		for v, n := range nodes {
			model.Service[v] = service(n.Service)
			at[n] = v
		}
		for _, o := range owners[api] {
			v, ok := at[graph.Node{Service: o.Service, Operation: o.Operation}]
			if ns := g.Nodes[graph.Node{Service: o.Service, Operation: o.Operation}]; ok && ns != nil && ns.Hops > 0 && o.OwnedFailures > 0 {
				a.Failures[v] = min(float64(o.OwnedFailures)/float64(ns.Hops), 1)
			}
		}
		m.APIs = append(m.APIs, a)
	}
	// Services in name order, the models' indexes following.
	order := slices.Clone(m.Services)
	slices.Sort(order)
	remap := make([]int, len(order))
	for i, name := range order {
		remap[svcIdx[name]] = i
	}
	for _, a := range m.APIs {
		for v, s := range a.Model.Service {
			a.Model.Service[v] = remap[s]
		}
	}
	m.Services = order
	m.Speaks = Learn(st, order)
	m.Virtual = make([]bool, len(order))
	for i, name := range order {
		m.Virtual[i] = virtual[name]
	}
	return m, nil
}

// Learn returns what each named service does with the claim protocol, as
// its spans in st show (docs/PLANNER.md), from what stored window
// summaries keep too (the API graphs and the dependencies' stats):
//
//   - it claims when its failed hops answered unclaimed (an error it
//     propagated), or answered valid claims and never failed with a
//     failing callee (so had nothing to unclaim);
//   - it honours claims when it suppressed a retry (retry.suppressed), or
//     when it claims: the middleware does both.
func Learn(st *analysis.State, services []string) []radius.Speaks {
	idx := make(map[string]int, len(services))
	for i, s := range services {
		idx[s] = i
	}
	by := make([][4]int64, len(services))
	propagated := make([]int64, len(services))
	suppressed := make([]int64, len(services))
	for _, g := range st.APIs {
		for n, ns := range g.Nodes {
			if i, ok := idx[n.Service]; ok {
				for c := range ns.FailedBy {
					by[i][c] += ns.FailedBy[c]
				}
			}
		}
	}
	for e, es := range st.Edges {
		if i, ok := idx[e.Caller]; ok {
			suppressed[i] += es.Suppressed
			propagated[i] += es.CallerFailed
		}
	}
	out := make([]radius.Speaks, len(services))
	for i := range services {
		valid := by[i][graph.ClaimClaimed] + by[i][graph.ClaimUnclaimed]
		out[i].Claims = by[i][graph.ClaimUnclaimed] > 0 || valid > 0 && propagated[i] == 0
		out[i].Honours = suppressed[i] > 0 || out[i].Claims
	}
	return out
}
