package analysis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// DefaultWindow is the length of the failure memory's windows (docs/SPEC.md §4.3).
const DefaultWindow = time.Hour

// WindowOf returns the index of the window of length size, aligned to the
// Unix epoch, that holds the instant unixNano: floor(unixNano / size).
func WindowOf(unixNano int64, size time.Duration) int64 {
	if size <= 0 {
		size = DefaultWindow
	}
	w := unixNano / int64(size)
	if unixNano < 0 && unixNano%int64(size) != 0 {
		w--
	}
	return w
}

// Windows keeps one State per window, each the sum of the traces whose
// start falls in it. Add and Remove with the same trace are exact
// inverses. Not safe for concurrent use.
type Windows struct {
	// Size is the windows' length (DefaultWindow when zero).
	Size   time.Duration
	states map[int64]*State
	// growing: see Growing.
	growing bool
}

// Growing tells w that traces will mostly be added (a batch): the states
// it creates from now on keep a cache that saves Add most of its map
// lookups. Removing a trace from a state drops its cache.
func (w *Windows) Growing() { w.growing = true }

// NewWindows returns empty windows of the given length.
func NewWindows(size time.Duration) *Windows {
	return &Windows{Size: size, states: map[int64]*State{}}
}

// Of returns the index of trace t's window.
func (w *Windows) Of(t *graph.Trace) int64 { return WindowOf(t.Start(), w.Size) }

// Add adds trace t to its window's state and returns the window.
func (w *Windows) Add(t *graph.Trace) int64 { return w.add(t, 1) }

// Remove removes trace t, added earlier, from its window's state.
func (w *Windows) Remove(t *graph.Trace) int64 { return w.add(t, -1) }

func (w *Windows) add(t *graph.Trace, sign int64) int64 {
	if w.states == nil {
		w.states = map[int64]*State{}
	}
	k := w.Of(t)
	s := w.states[k]
	if s == nil {
		s = NewState()
		if w.growing {
			s.cache = &stateCache{}
		}
		w.states[k] = s
	}
	s.Add(t, sign)
	if s.Traces == 0 {
		delete(w.states, k)
	}
	return k
}

// State returns the state of window k, nil when it holds no trace. The
// state is shared, not copied.
func (w *Windows) State(k int64) *State { return w.states[k] }

// Put sets the state of window k (a state loaded from a store).
func (w *Windows) Put(k int64, s *State) {
	if w.states == nil {
		w.states = map[int64]*State{}
	}
	w.states[k] = s
}

// Drop forgets window k.
func (w *Windows) Drop(k int64) { delete(w.states, k) }

// Merge adds the states of o to w's.
func (w *Windows) Merge(o *Windows) {
	for k, s := range o.states {
		if w.states == nil {
			w.states = map[int64]*State{}
		}
		if mine := w.states[k]; mine != nil {
			mine.Merge(s, 1)
		} else {
			w.states[k] = s.Clone()
		}
	}
}

// Indexes returns the windows held, oldest first.
func (w *Windows) Indexes() []int64 {
	keys := make([]int64, 0, len(w.states))
	for k := range w.states {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Merged returns the sum of every window's state: the call graphs as seen
// over the whole input (the what-if model learns from it).
func (w *Windows) Merged() *State {
	out := NewState()
	for _, k := range w.Indexes() {
		out.Merge(w.states[k], 1)
	}
	return out
}

// Summaries returns the summary of every window, oldest first.
func (w *Windows) Summaries(cfg Config) []*WindowSummary {
	out := make([]*WindowSummary, 0, len(w.states))
	for _, k := range w.Indexes() {
		out = append(out, w.states[k].Summary(k, cfg))
	}
	return out
}

// APIPotential is the potential radius of one root API's call graph in a
// window (docs/SPEC.md §4.5), with and without error ownership, before the floor
// at the observed max radius that reports apply.
type APIPotential struct {
	With    int `json:"with"`
	Without int `json:"without"`
}

// WindowSummary is what a report needs from a window besides its traces'
// results: the dependencies seen (with their counts) and the potential
// radius of every root API. Stores keep one per window.
type WindowSummary struct {
	Window int64
	Edges  map[graph.Edge]*graph.EdgeStats
	APIs   map[string]APIPotential
	// Graphs are the call graphs of the root APIs (the REST API's
	// /graph, the UI's DAG, what-if over a learned graph).
	Graphs map[string]*graph.APIGraph
}

// Summary summarises window k's state s.
func (s *State) Summary(k int64, cfg Config) *WindowSummary {
	sum := &WindowSummary{Window: k, Edges: make(map[graph.Edge]*graph.EdgeStats, len(s.Edges)), APIs: make(map[string]APIPotential, len(s.APIs))}
	for e, st := range s.Edges {
		c := *st
		sum.Edges[e] = &c
	}
	pot := newPotentialIndex(s, cfg)
	sum.Graphs = make(map[string]*graph.APIGraph, len(s.APIs))
	for api, g := range s.APIs {
		with, without := radius.Potential(pot.nodes(g))
		sum.APIs[api] = APIPotential{With: with, Without: without}
		c := graph.NewAPIGraph(api)
		c.Merge(g, 1)
		sum.Graphs[api] = c
	}
	return sum
}

// MergeSummaries returns a State holding the sum of the summaries' edges
// and call graphs — what a range of windows says about dependencies and
// call graphs (Graph and WhatIfModel read it; the claims tallies a State
// also keeps are not in summaries and stay empty).
func MergeSummaries(sums []*WindowSummary) *State {
	s := NewState()
	for _, w := range sums {
		for e, st := range w.Edges {
			cur := s.Edges[e]
			if cur == nil {
				cur = &graph.EdgeStats{}
				s.Edges[e] = cur
			}
			cur.Merge(st, 1)
		}
		for api, g := range w.Graphs {
			cur := s.APIs[api]
			if cur == nil {
				cur = graph.NewAPIGraph(api)
				s.APIs[api] = cur
			}
			cur.Merge(g, 1)
		}
	}
	return s
}

type summaryJSON struct {
	Version int        `json:"version"`
	Window  int64      `json:"window"`
	Edges   []edgeJSON `json:"edges"`
	Graphs  []apiJSON  `json:"graphs,omitempty"`
	APIs    []struct {
		API string `json:"api"`
		APIPotential
	} `json:"apis"`
}

const summaryVersion = 1

// MarshalJSON encodes the summary deterministically, for reading and
// comparing summaries; stores keep the binary form (AppendBinary).
func (w *WindowSummary) MarshalJSON() ([]byte, error) {
	out := summaryJSON{Version: summaryVersion, Window: w.Window, Edges: []edgeJSON{}}
	for k, v := range w.Edges {
		out.Edges = append(out.Edges, edgeJSON{Caller: k.Caller, Callee: k.Callee, Stats: *v})
	}
	slices.SortFunc(out.Edges, func(x, y edgeJSON) int {
		return cmp.Or(cmp.Compare(x.Caller, y.Caller), x.Callee.Compare(y.Callee))
	})
	for api, p := range w.APIs {
		out.APIs = append(out.APIs, struct {
			API string `json:"api"`
			APIPotential
		}{api, p})
	}
	slices.SortFunc(out.APIs, func(x, y struct {
		API string `json:"api"`
		APIPotential
	}) int {
		return cmp.Compare(x.API, y.API)
	})
	out.Graphs = graphsJSON(w.Graphs)
	return json.Marshal(out)
}

// UnmarshalJSON decodes a summary encoded by MarshalJSON. DecodeSummary,
// which stores read with, takes the binary form only.
func (w *WindowSummary) UnmarshalJSON(b []byte) error {
	var in summaryJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("analysis: decode window summary: %w", err)
	}
	if in.Version != summaryVersion {
		return fmt.Errorf("analysis: decode window summary: version %d, want %d", in.Version, summaryVersion)
	}
	*w = WindowSummary{Window: in.Window, Edges: make(map[graph.Edge]*graph.EdgeStats, len(in.Edges)), APIs: make(map[string]APIPotential, len(in.APIs))}
	for _, e := range in.Edges {
		st := e.Stats
		w.Edges[graph.Edge{Caller: e.Caller, Callee: e.Callee}] = &st
	}
	for _, a := range in.APIs {
		w.APIs[a.API] = a.APIPotential
	}
	w.Graphs = make(map[string]*graph.APIGraph, len(in.Graphs))
	for _, a := range in.Graphs {
		w.Graphs[a.API] = a.graph()
	}
	return nil
}
