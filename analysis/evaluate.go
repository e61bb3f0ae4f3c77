package analysis

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unsafe"

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
	// VersionClaims counts, per service.version of Versions whose hops
	// failed or received unclaimed answers, how they answered claims and
	// honoured the claims they received (what the rollout gate's claim
	// checks compare); sorted, only versions with a count.
	VersionClaims []VersionClaims
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
	// Weight is how many traces of the traffic the trace stands for
	// (graph.Trace.Weight: 1/p of its sampling probability, rounded
	// without bias; 0 means 1, see W): every count it adds to a report
	// is multiplied by it (docs/SPEC.md §4.9). SamplingFlags are the
	// trace's (graph.SamplingConflict, graph.SamplingUnusable).
	Weight        int64
	SamplingFlags uint8
	// Split marks a trace whose spans reached more than one partition (a
	// collector that does not route by trace id): it is not analysed, and
	// adds only to Report.TracesSplit. Of its result only TraceID, Start
	// and Window are set.
	Split bool

	// ids are the evaluator's slots of the entries of a transient result
	// (nil otherwise): a report finds their aggregates by them.
	ids *resultIDs
}

// W returns the result's weight, at least 1.
func (r *TraceResult) W() int64 {
	if r.Weight > 1 {
		return r.Weight
	}
	return 1
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

// VersionClaims is how the hops of one service.version in one trace
// answered claims and honoured the claims they received: what the
// rollout gate's claim checks compare between versions (docs/ANALYSIS.md,
// "Rollout gate").
type VersionClaims struct {
	ServiceVersion
	// FailedHops counts the version's failed hops that answer a caller
	// (audited: not virtual nodes, not CLIENT-span roots); ClaimedHops
	// those of them seen answering a valid claim, claimed or unclaimed
	// (graph.NodeStats.ValidClaims).
	FailedHops, ClaimedHops int64
	// UnclaimedAnswers counts the failed attempts answered unclaimed on
	// the retry-enabled calls the version's hops made (an edge's
	// EdgeStats.FailedBy[unclaimed], counted per attempt);
	// RetriedUnclaimed those of them that another attempt of the same
	// call followed: retries the protocol says never to make.
	UnclaimedAnswers, RetriedUnclaimed int64
	// Suppressed counts the version's calls on retry-enabled edges that
	// declined a retry of an unclaimed answer: an attempt carried
	// retry.suppressed, or the call failed at its first unclaimed answer
	// with fewer attempts than the edge's M_e (a call that gave up at M_e
	// may only have run out of attempts).
	Suppressed int64
}

// zero reports whether every count of v is zero.
func (v *VersionClaims) zero() bool {
	return v.FailedHops == 0 && v.ClaimedHops == 0 && v.UnclaimedAnswers == 0 && v.RetriedUnclaimed == 0 && v.Suppressed == 0
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

	// frozen: see FrozenStates; classes caches edge classes then.
	frozen  bool
	classes []classSlot

	// transient: see TransientResults; the results' slices are these
	// then.
	transient   bool
	outServices []ServiceResult
	outNodes    []NodeCount
	outVersions []ServiceVersion
	outClaims   []VersionClaims
	outEvents   []Event

	// Service index; the services' results by slot.
	serviceIdx pairIndex[string]
	slots      []ServiceResult
	// Node and version indexes; the nodes' counts by slot.
	nodeIdx    pairIndex[graph.Node]
	nodeSlots  []NodeCount
	versionIdx pairIndex[ServiceVersion]
	// ids are a transient result's slots; claimSlots those of its
	// VersionClaims.
	ids        resultIDs
	claimSlots []int32
	// vclaims are the claim counts of the trace's versions, by their
	// index in its Versions.
	vclaims []VersionClaims
}

// FrozenStates tells e that the states it is given no longer change (a
// batch evaluating its traces against final window states): it then
// remembers the class of the edges it looked up, by state and by where
// their names are, instead of finding them again.
func (e *Evaluator) FrozenStates() {
	e.frozen = true
	e.classes = make([]classSlot, classCacheSize)
}

// TransientResults tells e that each result is done with before the next
// Evaluate (added to a report, encoded): the slices of a result are then
// e's own memory, reused by its next call, not allocated for each trace.
func (e *Evaluator) TransientResults() { e.transient = true }

// resultSlice returns a slice of n elements for a result (every one to be
// written): new, or, when results are transient, *scratch grown.
func resultSlice[T any](e *Evaluator, scratch *[]T, n int) []T {
	if !e.transient {
		return make([]T, n)
	}
	*scratch = grow(*scratch, n)
	return *scratch
}

// classCacheSize is the size of an Evaluator's cache of edge classes (a
// power of two: 4,096 edges, 256 KiB).
const classCacheSize = 4096

// classSlot is the class of an edge in a state, by where its names are.
type classSlot struct {
	s                  *State
	caller, svc, op    *byte
	callerN, svcN, opN int
	class              EdgeClass
}

// class returns the class of the edge call c of t is made on, in state s.
func (e *Evaluator) class(s *State, t *graph.Trace, c *graph.Call) EdgeClass {
	if !e.frozen {
		return s.Class(CallEdge(t, c), e.cfg)
	}
	caller := t.Hops[c.Caller].Service
	cp, sp, op := unsafe.StringData(caller), unsafe.StringData(c.CalleeService), unsafe.StringData(c.CalleeOperation)
	h := uint64(uintptr(unsafe.Pointer(s)))*0x9e3779b97f4a7c15 ^ uint64(uintptr(unsafe.Pointer(cp)))*0xc2b2ae3d27d4eb4f ^
		uint64(uintptr(unsafe.Pointer(sp)))*0x165667b19e3779f9 ^ uint64(uintptr(unsafe.Pointer(op)))*0xbf58476d1ce4e5b9 ^
		uint64(len(caller))<<40 ^ uint64(len(c.CalleeService))<<20 ^ uint64(len(c.CalleeOperation))
	h ^= h >> 31
	k := &e.classes[(h*0x94d049bb133111eb>>40)&(classCacheSize-1)]
	if k.s == s && k.caller == cp && k.svc == sp && k.op == op && k.callerN == len(caller) &&
		k.svcN == len(c.CalleeService) && k.opN == len(c.CalleeOperation) && k.s != nil {
		return k.class
	}
	class := s.Class(CallEdge(t, c), e.cfg)
	*k = classSlot{s: s, caller: cp, svc: sp, op: op, callerN: len(caller), svcN: len(c.CalleeService), opN: len(c.CalleeOperation), class: class}
	return class
}

// NewEvaluator returns an Evaluator with the given rules.
func NewEvaluator(cfg Config) *Evaluator { return &Evaluator{cfg: cfg} }

// Evaluate analyses trace t against window state s.
func (e *Evaluator) Evaluate(t *graph.Trace, s *State) TraceResult {
	r := TraceResult{TraceID: t.ID, API: t.API(), Start: t.Start(), Spans: t.SpanCount, Fragments: t.Fragments,
		RemoteParent: t.RemoteParent, SamplingFlags: t.SamplingFlags}
	if w := t.W(); w > 1 {
		r.Weight = w
	}
	r.Window = WindowOf(r.Start, e.cfg.Window)
	if t.Root >= 0 {
		r.RootFailed = t.Hops[t.Root].Failed
	}
	e.calls = grow(e.calls, len(t.Calls))
	e.failOpen = grow(e.failOpen, len(t.Calls))
	for i := range t.Calls {
		c := &t.Calls[i]
		class := e.class(s, t, c)
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
	r.Events = resultSlice(e, &e.outEvents, len(rr.Events))
	for i, ev := range rr.Events {
		h := &t.Hops[ev.Owner]
		r.Events[i] = Event{Owner: h.Key(), Hop: ev.Owner, Radius: int(ev.Radius), Chain: int(ev.Chain), Start: h.Start}
	}
	e.services(t, &r)
	r.Versions = e.versions(t)
	r.VersionClaims = e.versionClaims(t, r.Versions)
	r.Nodes = e.nodes(t, &r)
	if e.transient {
		e.ids = resultIDs{services: e.serviceIdx.touched, nodes: e.nodeIdx.touched, versions: e.versionIdx.touched,
			claims: e.claimSlots, svc: e.serviceIdx.epoch, node: e.nodeIdx.epoch, ver: e.versionIdx.epoch}
		r.ids = &e.ids
	}
	return r
}

// nodes counts the hops and owned events of every node of t, gathered
// from the slots of the evaluator's node index it touched into one
// exact-size slice.
func (e *Evaluator) nodes(t *graph.Trace, r *TraceResult) []NodeCount {
	x := &e.nodeIdx
	if x.begin() {
		e.nodeSlots = e.nodeSlots[:0]
	}
	find := func(n graph.Node) *NodeCount {
		i, first := x.touch(n, n.Service, n.Operation)
		if int(i) == len(e.nodeSlots) {
			e.nodeSlots = append(e.nodeSlots, NodeCount{})
		}
		if first {
			e.nodeSlots[i] = NodeCount{Node: n}
		}
		return &e.nodeSlots[i]
	}
	for i := range t.Hops {
		find(t.Hops[i].Key()).Requests++
	}
	for _, ev := range r.Events {
		find(ev.Owner).Owned++
	}
	touched := x.sorted(func(a, b graph.Node) int { return a.Compare(b) })
	out := resultSlice(e, &e.outNodes, len(touched))
	for k, i := range touched {
		out[k] = e.nodeSlots[i]
	}
	return out
}

// versions lists the (service, version) pairs of t's instrumented hops,
// sorted.
func (e *Evaluator) versions(t *graph.Trace) []ServiceVersion {
	x := &e.versionIdx
	x.begin()
	for i := range t.Hops {
		h := &t.Hops[i]
		if h.Virtual || h.Version == "" {
			continue
		}
		x.touch(ServiceVersion{Service: h.Service, Version: h.Version}, h.Service, h.Version)
	}
	touched := x.sorted(ServiceVersion.Compare)
	if len(touched) == 0 {
		return nil
	}
	out := resultSlice(e, &e.outVersions, len(touched))
	for k, i := range touched {
		out[k] = x.keys[i]
	}
	return out
}

// versionClaims counts how the hops of each of t's versions answered
// claims and honoured the claims they received (VersionClaims), against
// the calls' classes in e.calls; only the versions with a count, in the
// order of versions.
func (e *Evaluator) versionClaims(t *graph.Trace, versions []ServiceVersion) []VersionClaims {
	e.claimSlots = e.claimSlots[:0]
	if len(versions) == 0 {
		return nil
	}
	e.vclaims = grow(e.vclaims, len(versions))
	clear(e.vclaims)
	of := func(h *graph.Hop) *VersionClaims {
		i, ok := slices.BinarySearchFunc(versions, ServiceVersion{Service: h.Service, Version: h.Version}, ServiceVersion.Compare)
		if !ok {
			return nil
		}
		return &e.vclaims[i]
	}
	found := false
	for i := range t.Hops {
		h := &t.Hops[i]
		if !h.Failed || !h.Audited() || h.Version == "" {
			continue
		}
		if v := of(h); v != nil {
			v.FailedHops++
			if t.ObservedClaim(int32(i)).Valid() {
				v.ClaimedHops++
			}
			found = true
		}
	}
	for i := range t.Calls {
		c := &t.Calls[i]
		h := &t.Hops[c.Caller]
		if !e.calls[i].RetryEnabled || h.Version == "" || h.Virtual {
			continue
		}
		var unclaimed, retried int64
		first := int32(-1) // the first attempt answered unclaimed
		for a := c.AttemptStart; a < c.AttemptEnd; a++ {
			if att := &t.Attempts[a]; att.Failed && att.Claim == graph.ClaimUnclaimed {
				unclaimed++
				if a < c.Last() {
					retried++
				}
				if first < 0 {
					first = a
				}
			}
		}
		// e.calls[i].MaxAttempts is the larger of the call's attempts and
		// the edge's M_e: fewer attempts than it is fewer than M_e.
		suppressed := c.Suppressed || (c.Failed && first == c.Last() && int32(c.Attempts()) < e.calls[i].MaxAttempts)
		if unclaimed == 0 && !suppressed {
			continue
		}
		if v := of(h); v != nil {
			v.UnclaimedAnswers += unclaimed
			v.RetriedUnclaimed += retried
			if suppressed {
				v.Suppressed++
			}
			found = true
		}
	}
	if !found {
		return nil
	}
	n := 0
	for i := range versions {
		if !e.vclaims[i].zero() {
			n++
		}
	}
	out := resultSlice(e, &e.outClaims, n)[:0]
	for i := range versions {
		if v := e.vclaims[i]; !v.zero() {
			v.ServiceVersion = versions[i]
			out = append(out, v)
			e.claimSlots = append(e.claimSlots, e.versionIdx.touched[i])
		}
	}
	return out
}

// pairIndex numbers keys made of two names (a node, a service's version)
// for an Evaluator: a persistent slot per key, found by where the names'
// bytes are (names are interned: a lookup mostly costs no hashing), and,
// per trace, the slots it touched. A stream of ever-new names cannot grow
// it past maxServiceSlots: it is rebuilt then.
type pairIndex[K comparable] struct {
	// epoch is the numbering of the slots: a new one when emptied.
	epoch   *slotEpoch
	slot    map[K]int32
	keys    []K
	stamp   []uint64
	gen     uint64
	touched []int32
	cache   []pairCacheSlot
	ranks   slotRanks
}

// A pairIndex's cache of slots by where their names are starts at
// pairCacheSize slots and grows (emptied) to four times its size when
// the index holds more than half as many keys, up to maxPairCache (powers
// of two).
const (
	pairCacheSize = 1024
	maxPairCache  = 8192
)

// pairCacheSlot is a key's slot, by where its names' bytes are.
type pairCacheSlot struct {
	a, b   *byte
	aN, bN int
	idx    int32
}

// begin starts a trace, and reports whether the index was emptied (its
// slots numbered from 0 again).
func (x *pairIndex[K]) begin() bool {
	x.gen++
	x.touched = x.touched[:0]
	if x.slot != nil && len(x.slot) <= maxServiceSlots {
		return false
	}
	x.slot = make(map[K]int32, 64)
	x.epoch = &slotEpoch{}
	x.keys, x.stamp = x.keys[:0], x.stamp[:0]
	x.cache = make([]pairCacheSlot, pairCacheSize)
	x.ranks.reset()
	return true
}

// touch returns the slot of key k (whose names are a and b), numbering
// it when new (slots are numbered in order: a new slot is len(keys)-1),
// and whether the trace touches it for the first time.
func (x *pairIndex[K]) touch(k K, a, b string) (int32, bool) {
	ap, bp := unsafe.StringData(a), unsafe.StringData(b)
	h := uint64(uintptr(unsafe.Pointer(ap)))*0x9e3779b97f4a7c15 ^ uint64(uintptr(unsafe.Pointer(bp)))*0xc2b2ae3d27d4eb4f ^
		uint64(len(a))<<32 ^ uint64(len(b))
	h ^= h >> 29
	// Two-way: a key is in either slot of its pair, the one put last
	// first.
	pair := x.cache[(h*0xbf58476d1ce4e5b9>>32)&uint64(len(x.cache)-2):][:2]
	i := int32(-1)
	if ap != nil || bp != nil {
		for j := range pair {
			if c := &pair[j]; c.a == ap && c.b == bp && c.aN == len(a) && c.bN == len(b) {
				i = c.idx
				break
			}
		}
	}
	if i < 0 {
		var ok bool
		if i, ok = x.slot[k]; !ok {
			i = int32(len(x.keys))
			x.slot[k] = i
			x.keys = append(x.keys, k)
			x.stamp = append(x.stamp, 0)
			if n := len(x.cache); 2*len(x.keys) > n && n < maxPairCache {
				x.cache = make([]pairCacheSlot, 4*n)
				pair = x.cache[(h*0xbf58476d1ce4e5b9>>32)&uint64(len(x.cache)-2):][:2]
			}
		}
		pair[1] = pair[0]
		pair[0] = pairCacheSlot{a: ap, b: bp, aN: len(a), bN: len(b), idx: i}
	}
	if x.stamp[i] == x.gen {
		return i, false
	}
	x.stamp[i] = x.gen
	x.touched = append(x.touched, i)
	return i, true
}

// sorted returns the slots the trace touched, sorted by their keys
// (compare); valid until the next begin.
func (x *pairIndex[K]) sorted(compare func(a, b K) int) []int32 {
	x.ranks.sort(x.touched, len(x.keys), func(a, b int32) int { return compare(x.keys[a], x.keys[b]) })
	return x.touched
}

// slotRanks orders the slots of an index (the evaluator's services,
// nodes) by their keys, so that the slots a trace touched sort by
// comparing integers, not names. Ranks are computed once the index has
// not grown for rankAfter traces (and again when it has grown since).
type slotRanks struct {
	rank  []int32
	n     int // the slots ranked; -1: none
	since int // traces since the index last changed size
	seen  int // its size then
	order []int32
	keys  []uint64 // sort's scratch
}

// rankAfter is how many traces an index must keep its size before it is
// ranked: a stream of new names costs a ranking per rankAfter traces at
// most.
const rankAfter = 64

// reset forgets the ranks (the index was rebuilt).
func (r *slotRanks) reset() { r.n, r.since, r.seen = -1, 0, 0 }

// sort sorts touched, slots of an index of n slots whose keys compare
// orders.
func (r *slotRanks) sort(touched []int32, n int, compare func(x, y int32) int) {
	if n != r.seen {
		r.seen, r.since = n, 0
	}
	if r.since++; r.n != n && r.since >= rankAfter {
		r.order = r.order[:0]
		for i := range int32(n) {
			r.order = append(r.order, i)
		}
		slices.SortFunc(r.order, compare)
		r.rank = grow(r.rank, n)
		for pos, i := range r.order {
			r.rank[i] = int32(pos)
		}
		r.n = n
	}
	if r.n == n {
		// By rank then slot, packed in one integer: a sort of integers,
		// no comparison function (ranks are distinct).
		keys := r.keys[:0]
		for _, s := range touched {
			keys = append(keys, uint64(r.rank[s])<<32|uint64(uint32(s)))
		}
		slices.Sort(keys)
		for i, k := range keys {
			touched[i] = int32(uint32(k))
		}
		r.keys = keys
	} else {
		slices.SortFunc(touched, compare)
	}
}

// maxServiceSlots bounds the evaluator's service index; past it the index
// is rebuilt, so that a stream of ever-new service names cannot grow it.
// A variable for the tests (a small bound rebuilds it often).
var maxServiceSlots = 1 << 14

// services fills the per-service results of a trace. Services get a slot
// in a persistent index, so a hop costs one map lookup, and the trace's
// results are gathered from the slots it touched.
func (e *Evaluator) services(t *graph.Trace, r *TraceResult) {
	x := &e.serviceIdx
	if x.begin() {
		e.slots = e.slots[:0]
	}
	svc := func(name string) *ServiceResult {
		i, first := x.touch(name, name, "")
		if int(i) == len(e.slots) {
			e.slots = append(e.slots, ServiceResult{})
		}
		if first {
			e.slots[i] = ServiceResult{Service: name}
		}
		return &e.slots[i]
	}
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
	touched := x.sorted(strings.Compare)
	r.Services = resultSlice(e, &e.outServices, len(touched))
	for k, i := range touched {
		r.Services[k] = e.slots[i]
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
