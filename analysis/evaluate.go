package analysis

import (
	"cmp"
	"slices"
	"time"

	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// Config holds the analysis rules. The zero value means SPEC defaults.
type Config struct {
	Attribution attribution.Config
	// SpeaksClaims: a node speaks claims when at least this fraction of its
	// failed responses carried a valid claim (default 0.5).
	SpeaksClaims float64
	// Window is the length of the windows every multi-trace figure is
	// taken over (docs/SPEC.md §4.3; default DefaultWindow).
	Window time.Duration
	// Incidents say when an owner's failures are an incident (docs/SPEC.md §4.8).
	Incidents IncidentRules
	// Limits cap the distinct names a window admits (zero: the defaults).
	Limits Limits
}

func (c Config) speaks() float64 {
	if c.SpeaksClaims <= 0 {
		return 0.5
	}
	return c.SpeaksClaims
}

// TraceResult is everything the analysis says about one trace, given a
// window State.
type TraceResult struct {
	TraceID graph.TraceID
	// API is the trace's root API, "" for a fragment trace.
	API   string
	Start int64
	// Window is the index of the trace's window (WindowOf its start).
	Window int64
	Spans  int
	// Fragments counts the trace's fragment roots.
	Fragments int
	// RootFailed reports that the root hop failed: the request failed for
	// whoever sent it (docs/SPEC.md §5.2 root_errors).
	RootFailed bool
	// RemoteParent reports that the root hop's caller is outside the trace.
	RemoteParent bool
	// Versions lists the service.version of every instrumented service of
	// the trace that reported one, sorted.
	Versions []ServiceVersion
	// Nodes counts, per node of the trace, its hops and the failure events
	// it owns, sorted by node: incidents are detected from their
	// per-minute sums (docs/SPEC.md §4.8: the owned-failure rate of an owner).
	Nodes []NodeCount
	// Events are the failure events; Radius is their largest radius.
	Events []Event
	Radius int
	Owners []radius.OwnerStat
	// Suppressed counts suppressed retries.
	Suppressed int64
	// Hops and Counterfactual count requests as served and as a naive
	// replay would have served them.
	Hops, Counterfactual int64
	Services             []ServiceResult
}

// MaxAmplification returns the largest amplification of any owner of the
// trace, 0 without a failure event.
func (r *TraceResult) MaxAmplification() float64 {
	m := 0.0
	for _, o := range r.Owners {
		m = max(m, o.Amplification())
	}
	return m
}

// Failed reports whether the trace had a failure event.
func (r *TraceResult) Failed() bool { return len(r.Events) > 0 }

// Spurious returns the requests error ownership prevented.
func (r *TraceResult) Spurious() int64 { return r.Counterfactual - r.Hops }

// Event is one failure event.
type Event struct {
	Owner  graph.Node
	Hop    int32
	Radius int
	Chain  int
	Start  int64
}

// ServiceResult is what one trace says about one service.
type ServiceResult struct {
	Service string
	// Claims audits the service's failed hops.
	Claims attribution.Counts
	// Misattributed and NaiveMisattributed count misattributed errors with
	// and without failure memory; Eligible counts failed hops with a failed
	// fail-open call (the rate's denominator).
	Misattributed, NaiveMisattributed, Eligible int64
	// Mismatches counts responses whose claim differed between the
	// service's SERVER span and its caller's CLIENT span.
	Mismatches int64
	// ContextDrops counts fragment roots emitted by the service.
	ContextDrops int64
	// OwnedFailures counts failure events the service owns.
	OwnedFailures int64
	// Requests and Counterfactual count the service's hops as served and
	// under a naive replay; VirtualRequests those of its hops that were
	// virtual nodes (the service is uninstrumented when all were).
	Requests, VirtualRequests, Counterfactual int64
	// Spurious is the spurious requests prevented in the trace attributed
	// to the service as an owner (see radius.OwnerStat.Spurious).
	Spurious int64
}

// EdgeClass is everything a trace's result depends on from its window,
// for one dependency: whether it is fail-open, whether it is
// retry-enabled, and M_e, its max attempts (docs/SPEC.md §4.3, §4.5). A stored
// result is stale when the class of an edge it uses changed. Why an edge
// is fail-open (attribution.Source) is not part of it: the failure memory
// taking over from the default at an edge's 20th failed call changes no
// result unless it changes the state.
type EdgeClass struct {
	FailOpen     bool
	RetryEnabled bool
	// MaxAttempts is M_e: the most attempts seen on one call of the edge,
	// at least 2 when the edge is retry-enabled, 0 when unseen.
	MaxAttempts int32
}

// CallEdge returns the dependency call c of t is made on.
func CallEdge(t *graph.Trace, c *graph.Call) graph.Edge {
	return graph.Edge{Caller: t.Hops[c.Caller].Service, Callee: graph.Node{Service: c.CalleeService, Operation: c.CalleeOperation}}
}

// Class returns the class of edge e in the window whose state is s. A nil
// state is an empty window.
func (s *State) Class(e graph.Edge, cfg Config) EdgeClass {
	var es *graph.EdgeStats
	if s != nil {
		es = s.Edges[e]
	}
	var c EdgeClass
	c.FailOpen, _ = cfg.Attribution.FailOpen(es)
	if es != nil {
		c.RetryEnabled = es.RetryEnabled()
		c.MaxAttempts = int32(es.MaxAttempts())
		if c.RetryEnabled {
			c.MaxAttempts = max(c.MaxAttempts, 2)
		}
	}
	return c
}

// IsVirtual reports whether every hop of the service was a virtual node:
// an uninstrumented callee (a database, a cache) seen only through its
// callers' CLIENT spans.
func (s *ServiceResult) IsVirtual() bool { return s.Requests > 0 && s.VirtualRequests == s.Requests }

// NodeCount is a node's hops and owned failure events in one trace.
type NodeCount struct {
	Node     graph.Node `json:"node"`
	Requests int64      `json:"requests"`
	Owned    int64      `json:"owned"`
}

// ServiceVersion is a service.version a service ran in a trace.
type ServiceVersion struct {
	Service string `json:"service"`
	Version string `json:"version"`
}

// Compare orders versions by service, then version.
func (v ServiceVersion) Compare(o ServiceVersion) int {
	return cmp.Or(cmp.Compare(v.Service, o.Service), cmp.Compare(v.Version, o.Version))
}

// Evaluator evaluates traces against a State. It reuses scratch memory and
// is not safe for concurrent use; use one per goroutine.
type Evaluator struct {
	cfg      Config
	calls    []radius.CallInfo
	failOpen []bool
	owner    []bool
	verdicts []attribution.Verdict
	radius   radius.Analyzer

	// Service index: slot per service name, reset per trace by generation.
	slot    map[string]int32
	slots   []ServiceResult
	stamp   []uint64
	gen     uint64
	touched []int32
}

// NewEvaluator returns an Evaluator with the given rules.
func NewEvaluator(cfg Config) *Evaluator { return &Evaluator{cfg: cfg} }

// Evaluate analyses trace t against window state s.
func (e *Evaluator) Evaluate(t *graph.Trace, s *State) TraceResult {
	r := TraceResult{TraceID: t.ID, API: t.API(), Start: t.Start(), Spans: t.SpanCount, Fragments: t.Fragments,
		RemoteParent: t.RemoteParent}
	r.Window = WindowOf(r.Start, e.cfg.Window)
	if t.Root >= 0 {
		r.RootFailed = t.Hops[t.Root].Failed
	}
	e.calls = grow(e.calls, len(t.Calls))
	e.failOpen = grow(e.failOpen, len(t.Calls))
	for i := range t.Calls {
		c := &t.Calls[i]
		class := s.Class(CallEdge(t, c), e.cfg)
		open := class.FailOpen
		switch c.FailOpen { // the call's own declaration wins
		case graph.True:
			open = true
		case graph.False:
			open = false
		}
		info := radius.CallInfo{FailOpen: open, RetryEnabled: class.RetryEnabled, MaxAttempts: max(int32(c.Attempts()), class.MaxAttempts)}
		e.calls[i] = info
		e.failOpen[i] = open
	}
	e.verdicts = attribution.Attribute(t, e.failOpen, e.verdicts)
	e.owner = grow(e.owner, len(t.Hops))
	for i := range e.verdicts {
		e.owner[i] = e.verdicts[i].Owner
	}
	rr := e.radius.Analyze(t, e.calls, e.owner)
	r.Radius = int(rr.Radius)
	r.Owners = rr.Owners
	r.Suppressed = rr.Suppressed
	r.Hops, r.Counterfactual = rr.Hops, rr.Counterfactual
	r.Events = make([]Event, len(rr.Events))
	for i, ev := range rr.Events {
		h := &t.Hops[ev.Owner]
		r.Events[i] = Event{Owner: h.Key(), Hop: ev.Owner, Radius: int(ev.Radius), Chain: int(ev.Chain), Start: h.Start}
	}
	e.services(t, &r)
	r.Versions = versions(t, r.Versions)
	r.Nodes = e.nodes(t, &r)
	return r
}

// nodes counts the hops and owned events of every node of t.
func (e *Evaluator) nodes(t *graph.Trace, r *TraceResult) []NodeCount {
	out := make([]NodeCount, 0, 8)
	var index map[graph.Node]int // past a few nodes, a linear search costs more
	find := func(n graph.Node) *NodeCount {
		if index == nil {
			for i := range out {
				if out[i].Node == n {
					return &out[i]
				}
			}
		} else if i, ok := index[n]; ok {
			return &out[i]
		}
		out = append(out, NodeCount{Node: n})
		if index == nil && len(out) > 16 {
			index = make(map[graph.Node]int, 64)
			for i := range out {
				index[out[i].Node] = i
			}
		} else if index != nil {
			index[n] = len(out) - 1
		}
		return &out[len(out)-1]
	}
	for i := range t.Hops {
		find(t.Hops[i].Key()).Requests++
	}
	for _, ev := range r.Events {
		find(ev.Owner).Owned++
	}
	slices.SortFunc(out, func(x, y NodeCount) int { return x.Node.Compare(y.Node) })
	return out
}

// versions lists the (service, version) pairs of t's instrumented hops.
func versions(t *graph.Trace, out []ServiceVersion) []ServiceVersion {
	for i := range t.Hops {
		h := &t.Hops[i]
		if h.Virtual || h.Version == "" {
			continue
		}
		v := ServiceVersion{Service: h.Service, Version: h.Version}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, ServiceVersion.Compare)
	return out
}

// maxServiceSlots bounds the evaluator's service index; past it the index
// is rebuilt, so that a stream of ever-new service names cannot grow it.
const maxServiceSlots = 1 << 14

// services fills the per-service results of a trace. Services get a slot
// in a persistent index, so a hop costs one map lookup, and the trace's
// results are gathered from the slots it touched.
func (e *Evaluator) services(t *graph.Trace, r *TraceResult) {
	if e.slot == nil || len(e.slot) > maxServiceSlots {
		e.slot = make(map[string]int32, 64)
		e.slots, e.stamp = e.slots[:0], e.stamp[:0]
	}
	touched := e.touched[:0]
	svc := func(name string) *ServiceResult {
		i, ok := e.slot[name]
		if !ok {
			i = int32(len(e.slots))
			e.slot[name] = i
			e.slots = append(e.slots, ServiceResult{Service: name})
			e.stamp = append(e.stamp, 0)
		}
		if e.stamp[i] != e.gen {
			e.stamp[i] = e.gen
			e.slots[i] = ServiceResult{Service: name}
			touched = append(touched, i)
		}
		return &e.slots[i]
	}
	e.gen++
	copies := e.radius.Copies()
	for i := range t.Hops {
		h := &t.Hops[i]
		v := &e.verdicts[i]
		s := svc(h.Service)
		s.Requests++
		if h.Virtual {
			s.VirtualRequests++
		}
		s.Counterfactual = radius.SatAdd(s.Counterfactual, copies[i])
		if h.Root && h.Fragment {
			s.ContextDrops++
		}
		if v.Owner {
			s.OwnedFailures++
		}
		if !h.Failed || !h.Audited() {
			continue
		}
		s.Claims[v.Audit]++
		if v.FailedOpen > 0 {
			s.Eligible++
		}
		if v.Misattributed {
			s.Misattributed++
		}
		if v.NaiveMisattributed {
			s.NaiveMisattributed++
		}
	}
	for i := range t.Attempts {
		if at := &t.Attempts[i]; at.Mismatch {
			svc(t.Hops[at.Callee].Service).Mismatches++
		}
	}
	for _, o := range r.Owners {
		svc(o.Node.Service).Spurious += o.Spurious
	}
	r.Services = make([]ServiceResult, len(touched))
	for k, i := range touched {
		r.Services[k] = e.slots[i]
	}
	slices.SortFunc(r.Services, func(x, y ServiceResult) int { return cmp.Compare(x.Service, y.Service) })
	e.touched = touched
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
