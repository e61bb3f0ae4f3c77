package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// Service answers questions from a store: rollups and window summaries
// for everything but a trace, which is read from its spans and record.
type Service struct {
	Store store.Store
	// Config holds the analysis rules; its Window must be the store's.
	Config analysis.Config
}

// New returns a Service over st.
func New(st store.Store) *Service {
	return &Service{Store: st, Config: analysis.Config{Window: st.Window()}}
}

// MaxPoints bounds a series: a step that would give more is refused.
const MaxPoints = 2000

// Document returns the docs/SPEC.md §5.2 document of the traces q selects, with
// its incidents.
func (s *Service) Document(ctx context.Context, q store.Query) (*analysis.Document, error) {
	return Document(ctx, s.Store, q, s.Config)
}

// Figures returns the document without its incidents: what /apis, /fleet
// and /services show.
func (s *Service) Figures(ctx context.Context, q store.Query) (*analysis.Document, error) {
	return DocumentWithout(ctx, s.Store, q, s.Config)
}

// API returns the document row of one root API, ErrNotFound when the range
// holds none of its traces.
func (s *Service) API(ctx context.Context, api string, q store.Query) (*analysis.APIDoc, error) {
	q.API = api
	d, err := s.Figures(ctx, q)
	if err != nil {
		return nil, err
	}
	for i := range d.APIs {
		if d.APIs[i].API == api {
			return &d.APIs[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no traces of root API %q in the range", ErrNotFound, api)
}

// Point is one step of a radius series.
type Point struct {
	Time             time.Time `json:"time"`
	Traces           int64     `json:"traces"`
	FailedTraces     int64     `json:"failed_traces"`
	RootErrors       int64     `json:"root_errors"`
	MaxRadius        int       `json:"max_radius"`
	MeanRadius       float64   `json:"mean_radius"`
	MaxAmplification float64   `json:"max_amplification"`
	Suppressed       int64     `json:"suppressed_retries"`
	Spurious         int64     `json:"spurious_requests_prevented"`
}

// Series is a root API's radius over time.
type Series struct {
	API    string  `json:"api"`
	Step   int64   `json:"step_seconds"`
	Points []Point `json:"points"`
}

// Series returns api's figures per step over q's range (a step of whole
// minutes, from the first whole minute of the range). Steps with no trace
// are points of zeros: a root API the store knows but the range does not
// hold is a series of zeros. One the store holds no trace of at all (in
// what it keeps) is ErrNotFound, as a typo must not look like a quiet API.
// Read in one pass where the store can (SeriesReader), step by step
// otherwise.
func (s *Service) Series(ctx context.Context, api string, q store.Query, step time.Duration) (*Series, error) {
	if q.From == 0 || q.To == 0 {
		return nil, fmt.Errorf("%w: a series needs from and to", ErrBadRequest)
	}
	if step < time.Minute || step%time.Minute != 0 {
		return nil, fmt.Errorf("%w: step %v: want whole minutes, at least 1m", ErrBadRequest, step)
	}
	if q.To <= q.From {
		return nil, fmt.Errorf("%w: the range ends before it starts", ErrBadRequest)
	}
	n := Span(q) / uint64(step)
	if Span(q)%uint64(step) != 0 {
		n++
	}
	if n > MaxPoints {
		return nil, fmt.Errorf("%w: %d points (at most %d): use a larger step", ErrBadRequest, n, MaxPoints)
	}
	// A step counts the traces that started in its minutes (a minute that
	// began before from is not in the range): from is the range's first
	// whole minute.
	lo, hi := q.MinuteRange()
	if lo >= hi {
		return nil, fmt.Errorf("%w: the range holds no whole minute", ErrBadRequest)
	}
	q.From = lo * int64(time.Minute) // lo < hi: its start is an int64
	out := &Series{API: api, Step: int64(step / time.Second), Points: []Point{}}
	var aggs []*analysis.APIAgg
	if sr, ok := s.Store.(store.SeriesReader); ok {
		var err error
		if aggs, err = sr.APISeries(ctx, store.Query{From: store.Bound(q.From), To: q.To, API: api}, int64(step/time.Minute)); err != nil {
			return nil, err
		}
	}
	traces := int64(0)
	// Steps are counted, not added up to To: near the end of int64 time
	// t+step would wrap around.
	for i, t := 0, q.From; ; i++ {
		end := q.To
		if uint64(q.To-t) > uint64(step) {
			end = t + int64(step)
		}
		var a *analysis.APIAgg
		if aggs != nil {
			if i < len(aggs) {
				a = aggs[i]
			}
		} else {
			rep, err := s.Store.Report(ctx, store.Query{From: store.Bound(t), To: store.Bound(end), API: api})
			if err != nil {
				return nil, err
			}
			a = rep.APIs[api]
		}
		p := Point{Time: time.Unix(0, t).UTC()}
		if a != nil {
			p.Traces, p.FailedTraces, p.RootErrors = a.Traces, a.Failed, a.RootErrors
			p.MaxRadius, p.MaxAmplification = a.MaxRadius(), a.MaxAmplification()
			if a.Failed > 0 {
				p.MeanRadius = float64(a.RadiusSum) / float64(a.Failed)
			}
			p.Suppressed, p.Spurious = a.Suppressed, a.Counterfactual-a.Hops
			traces += a.Traces
		}
		out.Points = append(out.Points, p)
		if end == q.To {
			break
		}
		t = end
	}
	if traces == 0 {
		// Only then: asking the whole store costs more than the range.
		if err := s.known(ctx, api); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// known returns ErrNotFound when the store holds no trace of root API api
// in any range it keeps.
func (s *Service) known(ctx context.Context, api string) error {
	rep, err := s.Store.Report(ctx, store.Query{API: api})
	if err != nil {
		return err
	}
	if rep.APIs[api] == nil {
		return fmt.Errorf("%w: no traces of root API %q in the store", ErrNotFound, api)
	}
	return nil
}

// Span returns the length of q's range in nanoseconds, To after From: as
// an uint64, since from the first to the last instant of int64 time it is
// more than an int64 holds.
func Span(q store.Query) uint64 { return uint64(q.To - q.From) }

// GraphAnswer is a root API's call graph over a range, with the owners of
// its failures (the UI highlights them and the storm path above them).
type GraphAnswer struct {
	*analysis.GraphDoc
	Owners []analysis.OwnerDoc `json:"owners"`
}

// merged returns the sum of the summaries of the windows q overlaps.
func (s *Service) merged(ctx context.Context, q store.Query) (*analysis.State, error) {
	lo, hi := store.WindowRange(q, s.Config.Window)
	if lo > hi {
		return analysis.NewState(), nil
	}
	sums, err := s.Store.Summaries(ctx, lo, hi)
	if err != nil {
		return nil, err
	}
	return analysis.MergeSummaries(sums), nil
}

// Graph returns api's call graph over the windows q overlaps.
func (s *Service) Graph(ctx context.Context, api string, q store.Query) (*GraphAnswer, error) {
	st, err := s.merged(ctx, q)
	if err != nil {
		return nil, err
	}
	g, err := st.Graph(api, s.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	out := &GraphAnswer{GraphDoc: g, Owners: []analysis.OwnerDoc{}}
	if a, err := s.API(ctx, api, q); err == nil {
		out.Owners = a.Owners
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	return out, nil
}

// WhatIfOver answers a what-if question; for an API, over the call graph
// learned in the windows q overlaps.
func (s *Service) WhatIfOver(ctx context.Context, r WhatIfRequest, q store.Query) (*WhatIfAnswer, error) {
	var st *analysis.State
	if r.API != "" {
		var err error
		if st, err = s.merged(ctx, q); err != nil {
			return nil, err
		}
	}
	return WhatIf(r, st, s.Config)
}

// TraceView is one trace as the UI draws it: its hops (a tree, parents
// first), the attempts each hop made, and what the analysis said.
type TraceView struct {
	TraceID      string                    `json:"trace_id"`
	API          string                    `json:"api"`
	Start        time.Time                 `json:"start"`
	Spans        int                       `json:"spans"`
	Fragments    int                       `json:"fragments"`
	RemoteParent bool                      `json:"remote_parent"`
	Hops         []HopView                 `json:"hops"`
	Result       *analysis.TraceResult     `json:"result,omitempty"`
	Pending      bool                      `json:"pending"`
	Events       []EventView               `json:"events"`
	Versions     []analysis.ServiceVersion `json:"versions"`
}

// HopView is a service handling a request.
type HopView struct {
	Index     int32      `json:"index"`
	Parent    int32      `json:"parent"` // the calling hop, -1 for a root
	Service   string     `json:"service"`
	Operation string     `json:"operation"`
	Version   string     `json:"version,omitempty"`
	Start     int64      `json:"start_ns"`
	End       int64      `json:"end_ns"`
	Failed    bool       `json:"failed"`
	Claim     string     `json:"claim"` // what it was seen to answer
	Virtual   bool       `json:"virtual,omitempty"`
	Fragment  bool       `json:"fragment,omitempty"`
	Depth     int32      `json:"depth"`
	Attempt   int32      `json:"attempt"` // position in its call: 0 first, 1 the first retry…
	Retried   bool       `json:"retried"` // its call made more than one attempt
	Owner     bool       `json:"owner,omitempty"`
	Calls     []CallView `json:"calls"`
}

// CallView is the attempts a hop made to one callee for one request.
type CallView struct {
	Callee     string  `json:"callee"`
	Attempts   []int32 `json:"attempts"` // the callee hops, in order
	Failed     bool    `json:"failed"`
	Claim      string  `json:"claim"`
	Suppressed bool    `json:"suppressed,omitempty"`
}

// EventView is a failure event.
type EventView struct {
	Owner  string `json:"owner"`
	Hop    int32  `json:"hop"`
	Radius int    `json:"radius"`
}

// Trace returns trace id as stored: its spans assembled, its record's
// result (Pending when the trace waits for its analysis). ErrNotFound when
// no span of it is stored.
func (s *Service) Trace(ctx context.Context, id graph.TraceID) (*TraceView, error) {
	// Its spans and its record at once: two round trips to a server
	// overlapped.
	var recs map[graph.TraceID]*store.Record
	rerr := make(chan error, 1)
	go func() {
		var err error
		recs, err = s.Store.Records(ctx, []graph.TraceID{id})
		rerr <- err
	}()
	spans, err := s.Store.TraceSpans(ctx, id, nil)
	if err2 := <-rerr; err == nil {
		err = err2
	}
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("%w: no trace %s", ErrNotFound, id)
	}
	var asm graph.Assembler
	t := asm.Assemble(spans)
	v := &TraceView{TraceID: id.String(), API: t.APIName, Start: time.Unix(0, t.Start()).UTC(), Spans: t.SpanCount,
		Fragments: t.Fragments, RemoteParent: t.RemoteParent, Hops: make([]HopView, len(t.Hops)), Events: []EventView{}}
	rec := recs[id]
	if rec != nil {
		v.Result = rec.Result
		v.Versions = rec.Result.Versions
		for _, e := range rec.Result.Events {
			v.Events = append(v.Events, EventView{Owner: e.Owner.String(), Hop: e.Hop, Radius: e.Radius})
		}
	} else {
		v.Pending = true
	}
	owners := map[int32]bool{}
	for _, e := range v.Events {
		owners[e.Hop] = true
	}
	for i := range t.Hops {
		h := &t.Hops[i]
		hv := HopView{Index: int32(i), Parent: t.Caller(int32(i)), Service: h.Service, Operation: h.Operation,
			Version: h.Version, Start: h.Start, End: h.End, Failed: h.Failed, Claim: t.ObservedClaim(int32(i)).String(),
			Virtual: h.Virtual, Fragment: h.Fragment, Depth: h.Depth, Owner: owners[int32(i)], Calls: []CallView{}}
		if h.In >= 0 {
			at := &t.Attempts[h.In]
			hv.Attempt = at.Index
			hv.Retried = t.Calls[at.Call].Retried()
		}
		for c := h.CallStart; c < h.CallEnd; c++ {
			call := &t.Calls[c]
			cv := CallView{Callee: graph.Node{Service: call.CalleeService, Operation: call.CalleeOperation}.String(),
				Failed: call.Failed, Claim: call.Claim.String(), Suppressed: call.Suppressed}
			for a := call.AttemptStart; a < call.AttemptEnd; a++ {
				cv.Attempts = append(cv.Attempts, t.Attempts[a].Callee)
			}
			hv.Calls = append(hv.Calls, cv)
		}
		v.Hops[i] = hv
	}
	slices.SortStableFunc(v.Events, func(a, b EventView) int { return int(b.Radius - a.Radius) })
	return v, nil
}
