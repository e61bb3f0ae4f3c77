package analysis

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
)

// Report aggregates trace results. Every aggregate is a sum or a histogram
// (largest values are read off histograms), so reports merge in any order
// and a trace's result can be subtracted again exactly: Add(r, +1) then
// Add(r, -1) leaves the report as it was. Stores keep per-minute reports
// as rollups. Figures defines every figure it holds (how each merges and
// where the stores keep it). The zero value is not ready: use NewReport.
type Report struct {
	// Spans, Traces and Fragments are estimates of the traffic's
	// (weighted, docs/SPEC.md §4.9).
	Spans, Traces, Fragments int64
	// TracesExcess and SpansExcess are what weighting added to Traces and
	// Spans: Σ(W−1) over the traces, and times their spans (so that
	// traces and spans received are Traces − TracesExcess, Spans −
	// SpansExcess, and both are zero for unsampled traces: stores that
	// kept no such figure hold what was received); TracesVar sums
	// W(W−1) over the traces, what the variance of Traces is estimated
	// from.
	TracesExcess, SpansExcess, TracesVar int64
	// SamplingConflicts counts traces whose spans recorded different
	// sampling probabilities (the root's counted); SamplingUnusable
	// those whose probability was recorded but unusable (counted once).
	SamplingConflicts, SamplingUnusable int64
	// TracesSplit counts the traces set aside because their spans reached
	// more than one partition (TraceResult.Split): they add to nothing
	// else.
	TracesSplit int64
	// APIs aggregates the traces of each root API.
	APIs map[string]*APIAgg
	// Services aggregates what traces said about each service.
	Services map[string]*ServiceResult
	// Nodes aggregates each node's hops and owned failures.
	Nodes map[graph.Node]*NodeAgg
	// Versions aggregates, per root API, service and version, the traces
	// that service ran that version in.
	Versions map[VersionKey]*VersionAgg

	// cache finds the aggregates of the services and nodes seen last by
	// where their names are (names are interned: most lookups then cost
	// no hashing). Aggregates leave their maps only in Prune, which
	// empties it.
	cache *reportCache
}

// reportCache is a Report's cache of aggregates by where their names'
// bytes are (graph.AddrCache).
type reportCache struct {
	services graph.AddrCache[*ServiceResult]
	nodes    graph.AddrCache[*NodeAgg]
	versions graph.AddrCache[*VersionAgg]
	// The aggregates by the slots of the evaluator whose results are
	// added (slots.go); versions by root API.
	serviceSlots slotTable[*ServiceResult]
	nodeSlots    slotTable[*NodeAgg]
	versionSlots map[string]*slotTable[*VersionAgg]
}

// caches returns r's cache, made if needed.
func (r *Report) caches() *reportCache {
	if r.cache == nil {
		r.cache = &reportCache{}
	}
	return r.cache
}

// serviceOf returns the aggregate of the i-th service of tr.
func (r *Report) serviceOf(tr *TraceResult, i int) *ServiceResult {
	if tr.ids == nil {
		return r.Service(tr.Services[i].Service)
	}
	return bySlot(&r.caches().serviceSlots, tr.ids.svc, tr.ids.services[i], tr.Services[i].Service, r.Service)
}

// nodeOf returns the aggregate of the i-th node of tr.
func (r *Report) nodeOf(tr *TraceResult, i int) *NodeAgg {
	if tr.ids == nil {
		return r.Node(tr.Nodes[i].Node)
	}
	return bySlot(&r.caches().nodeSlots, tr.ids.node, tr.ids.nodes[i], tr.Nodes[i].Node, r.Node)
}

// versionOf returns the aggregate of a version of tr (of slot, of
// tr.ids.ver, when tr has ids; vt is its API's table then, from
// versionTable).
func (r *Report) versionOf(tr *TraceResult, vt *slotTable[*VersionAgg], slot int32, sv ServiceVersion) *VersionAgg {
	k := VersionKey{API: tr.API, Service: sv.Service, Version: sv.Version}
	if vt == nil {
		return r.Version(k)
	}
	return bySlot(vt, tr.ids.ver, slot, k, r.Version)
}

// bySlot returns the aggregate t holds for slot of epoch ep, else finds
// it by its key (find) and keeps it.
func bySlot[K any, V comparable](t *slotTable[V], ep *slotEpoch, slot int32, k K, find func(K) V) V {
	v, ok := t.get(ep, slot)
	if !ok {
		v = find(k)
		t.put(slot, v)
	}
	return v
}

// versionTable returns the table of tr's API's versions by slot, nil when
// tr has no ids.
func (r *Report) versionTable(tr *TraceResult) *slotTable[*VersionAgg] {
	if tr.ids == nil {
		return nil
	}
	c := r.caches()
	t := c.versionSlots[tr.API]
	if t == nil {
		if c.versionSlots == nil {
			c.versionSlots = map[string]*slotTable[*VersionAgg]{}
		}
		t = &slotTable[*VersionAgg]{}
		c.versionSlots[tr.API] = t
	}
	return t
}

// APIAgg aggregates the traces of one root API.
type APIAgg struct {
	Traces int64
	// Failed counts traces with a failure event; RootErrors those whose
	// root hop failed; RemoteParent those whose root hop's caller is outside
	// the trace.
	Failed, RootErrors, RemoteParent int64
	// RadiusSum sums the radius of failed traces; Radius counts failed
	// traces by radius.
	RadiusSum int64
	Radius    map[int]int64
	// Amplification counts failed traces by the largest amplification of
	// any of their owners.
	Amplification map[float64]int64
	// Suppressed retries; Hops and Counterfactual requests.
	Suppressed, Hops, Counterfactual int64
	// Misattributed, Naive and Eligible sum the services' misattribution
	// counts (see ServiceResult).
	Misattributed, Naive, Eligible int64
	// Fragments counts fragment roots; Events failure events.
	Fragments, Events int64
	// Owners aggregates the failure events of every owner.
	Owners map[graph.Node]*OwnerAgg

	// Excess is what weighting added to Traces, Σ(W−1): the traces
	// received are Traces − Excess (ReceivedTraces). The Var sums
	// are what the variances of the API's estimates are computed from
	// (docs/SPEC.md §4.9): over its traces, c = W(W−1) (Var), times the
	// failed flag (VarFailed), the root-error flag (VarRoot), the radius
	// of a failed trace (VarRadius) and its square (VarRadius2), the
	// trace's misattributed errors m and eligible hops e as m² (VarMis2),
	// m·e (VarMisElig) and e² (VarElig2). All zero when unsampled.
	Excess, Var, VarFailed, VarRoot, VarRadius, VarRadius2 int64
	VarMis2, VarMisElig, VarElig2                          int64

	// The Tail counts count the traces that stood for themselves alone
	// (W = 1) by where their id falls under the hash of the collector's
	// tail sampling policy (TailHash): without a failure event below
	// 1/16, below 1/2 and all, with one below 1/2 and all. They tell tail
	// sampling that recorded no probability (docs/SPEC.md §4.9;
	// DetectTailSampling).
	TailClean16, TailClean2, TailClean, TailFailed2, TailFailed int64
}

// OwnerAgg counts an owner's failure events and its share of the spurious
// requests prevented.
type OwnerAgg struct {
	Events, Spurious int64
	// Traces counts the traces the owner had a failure event in;
	// Suppressed the suppressed retries of those traces.
	Traces, Suppressed int64
	// RadiusSum sums the radius of its failure events and Radius counts
	// them by radius; Amplification counts its traces by its
	// amplification in them. An incident's figures are read from these.
	RadiusSum     int64
	Radius        map[int]int64
	Amplification map[float64]int64
}

// NodeAgg counts a node's hops and the failure events it owned: its
// owned-failure rate is Owned / Requests (docs/SPEC.md §4.8).
type NodeAgg struct {
	Requests, Owned int64
}

// VersionKey is a service.version of one service in one root API's
// traces.
type VersionKey struct {
	API, Service, Version string
}

// VersionAgg aggregates the traces of a root API in which a service ran a
// version: what the rollout gate compares between versions.
type VersionAgg struct {
	Traces, Failed, RootErrors, RadiusSum int64
	// Excess is Σ(W−1) over its traces (received: Traces − Excess); Var
	// sums W(W−1) (the rollout gate's effective sample size,
	// docs/SPEC.md §4.9).
	Excess, Var   int64
	Radius        map[int]int64
	Amplification map[float64]int64
	// How the version's hops answered claims and honoured those they
	// received, summed over its traces (VersionClaims): failed hops and
	// those that answered a valid claim; unclaimed answers received on
	// retry-enabled calls and those retried; calls that declined a retry
	// of an unclaimed answer. The rollout gate's claim checks compare
	// them (docs/ANALYSIS.md, "Rollout gate").
	FailedHops, ClaimedHops, UnclaimedAnswers, RetriedUnclaimed, Suppressed int64
}

// NewReport returns an empty Report.
func NewReport() *Report {
	return &Report{APIs: map[string]*APIAgg{}, Services: map[string]*ServiceResult{},
		Nodes: map[graph.Node]*NodeAgg{}, Versions: map[VersionKey]*VersionAgg{}}
}

// API returns the aggregate of api, created empty if needed.
func (r *Report) API(name string) *APIAgg {
	a := r.APIs[name]
	if a == nil {
		a = &APIAgg{Radius: map[int]int64{}, Amplification: map[float64]int64{}, Owners: map[graph.Node]*OwnerAgg{}}
		r.APIs[name] = a
	}
	return a
}

// Service returns the aggregate of a service, created empty if needed.
func (r *Report) Service(name string) *ServiceResult {
	r.caches()
	k := graph.AddrOf(name, "", "", "")
	if s, ok := r.cache.services.Get(&k); ok {
		return s
	}
	s := r.Services[name]
	if s == nil {
		s = &ServiceResult{Service: name}
		r.Services[name] = s
	}
	r.cache.services.Put(&k, s, len(r.Services))
	return s
}

// Owner returns the aggregate of an owner, created empty if needed.
func (a *APIAgg) Owner(n graph.Node) *OwnerAgg {
	o := a.Owners[n]
	if o == nil {
		o = &OwnerAgg{Radius: map[int]int64{}, Amplification: map[float64]int64{}}
		a.Owners[n] = o
	}
	return o
}

// Node returns the aggregate of a node, created empty if needed.
func (r *Report) Node(n graph.Node) *NodeAgg {
	r.caches()
	k := graph.AddrOf(n.Service, n.Operation, "", "")
	if a, ok := r.cache.nodes.Get(&k); ok {
		return a
	}
	a := r.Nodes[n]
	if a == nil {
		a = &NodeAgg{}
		r.Nodes[n] = a
	}
	r.cache.nodes.Put(&k, a, len(r.Nodes))
	return a
}

// Version returns the aggregate of a version, created empty if needed.
func (r *Report) Version(k VersionKey) *VersionAgg {
	r.caches()
	a := graph.AddrOf(k.API, k.Service, k.Version, "")
	if v, ok := r.cache.versions.Get(&a); ok {
		return v
	}
	v := r.Versions[k]
	if v == nil {
		v = &VersionAgg{Radius: map[int]int64{}, Amplification: map[float64]int64{}}
		r.Versions[k] = v
	}
	r.cache.versions.Put(&a, v, len(r.Versions))
	return v
}

// Add adds one trace result (sign +1) or removes it again (sign -1). What
// a trace contributes to each figure is the figure's own logic, written
// here by hand: a figure added to Figures adds its contribution (sign ×
// the trace's value) here.
//
// Every count is a Horvitz–Thompson estimate (docs/SPEC.md §4.9): the
// trace's value times its weight, tr.W(), the traces of the traffic it
// stands for; the histograms count weighted traces too, and the largest
// value a histogram counts stays the largest observed. Beside them the
// report keeps what was received (Received: traces, unweighted) and the
// sums the estimates' variances are computed from (the Var* figures:
// c = W(W−1) times the trace's values and their products), all zero
// for unsampled traces.
func (r *Report) Add(tr *TraceResult, sign int64) {
	if tr.Split {
		r.TracesSplit += sign
		return
	}
	w := sign * tr.W()
	c := sign * tr.W() * (tr.W() - 1)
	r.Spans += w * int64(tr.Spans)
	r.Traces += w
	r.Fragments += w * int64(tr.Fragments)
	r.TracesExcess += w - sign
	r.SpansExcess += (w - sign) * int64(tr.Spans)
	r.TracesVar += c
	if tr.SamplingFlags&graph.SamplingConflict != 0 {
		r.SamplingConflicts += sign
	}
	if tr.SamplingFlags&graph.SamplingUnusable != 0 {
		r.SamplingUnusable += sign
	}
	for i := range tr.Services {
		r.serviceOf(tr, i).merge(&tr.Services[i], w)
	}
	for i := range tr.Nodes {
		n := r.nodeOf(tr, i)
		n.Requests += w * tr.Nodes[i].Requests
		n.Owned += w * tr.Nodes[i].Owned
	}
	if tr.API != "" {
		a := r.API(tr.API)
		a.Traces += w
		a.Excess += w - sign
		a.Var += c
		if tr.RootFailed {
			a.RootErrors += w
			a.VarRoot += c
		}
		if tr.RemoteParent {
			a.RemoteParent += w
		}
		a.Fragments += w * int64(tr.Fragments)
		a.Suppressed += w * tr.Suppressed
		a.Hops += w * tr.Hops
		a.Counterfactual += satMul(w, tr.Counterfactual)
		var mis, elig int64
		for i := range tr.Services {
			mis += tr.Services[i].Misattributed
			a.Naive += w * tr.Services[i].NaiveMisattributed
			elig += tr.Services[i].Eligible
		}
		a.Misattributed += w * mis
		a.Eligible += w * elig
		if c != 0 {
			a.VarMis2 += satMul(c, satMul(mis, mis))
			a.VarMisElig += satMul(c, satMul(mis, elig))
			a.VarElig2 += satMul(c, satMul(elig, elig))
		}
		if tr.W() == 1 {
			a.addTail(tr.TraceID, tr.Failed(), sign)
		}
		if tr.Failed() {
			a.Failed += w
			a.VarFailed += c
			a.RadiusSum += w * int64(tr.Radius)
			a.VarRadius += c * int64(tr.Radius)
			a.VarRadius2 += c * int64(tr.Radius) * int64(tr.Radius)
			a.Radius[tr.Radius] += w
			a.Amplification[tr.MaxAmplification()] += w
			a.Events += w * int64(len(tr.Events))
			for _, o := range tr.Owners {
				ag := a.Owner(o.Node)
				ag.Events += w * o.Hops
				ag.Spurious += satMul(w, o.Spurious)
				ag.Traces += w
				ag.Suppressed += w * tr.Suppressed
				ag.Amplification[o.Amplification()] += w
			}
			for i := range tr.Events {
				ev := &tr.Events[i]
				ag := a.Owner(ev.Owner)
				ag.RadiusSum += w * int64(ev.Radius)
				ag.Radius[ev.Radius] += w
			}
		}
		r.addVersions(tr, sign, w, c)
	}
	if sign < 0 {
		r.Prune()
	}
}

// addVersions adds what trace tr (of an API) adds to the aggregates of
// its services' versions: w its weighted sign, c its variance term.
func (r *Report) addVersions(tr *TraceResult, sign, w, c int64) {
	vt := r.versionTable(tr)
	for i, v := range tr.Versions {
		var slot int32
		if vt != nil {
			slot = tr.ids.versions[i]
		}
		va := r.versionOf(tr, vt, slot, v)
		va.Traces += w
		va.Excess += w - sign
		va.Var += c
		if tr.RootFailed {
			va.RootErrors += w
		}
		if tr.Failed() {
			va.Failed += w
			va.RadiusSum += w * int64(tr.Radius)
			va.Radius[tr.Radius] += w
			va.Amplification[tr.MaxAmplification()] += w
		}
	}
	for i := range tr.VersionClaims {
		vc := &tr.VersionClaims[i]
		var slot int32
		if vt != nil {
			slot = tr.ids.claims[i]
		}
		va := r.versionOf(tr, vt, slot, vc.ServiceVersion)
		va.FailedHops += w * vc.FailedHops
		va.ClaimedHops += w * vc.ClaimedHops
		va.UnclaimedAnswers += w * vc.UnclaimedAnswers
		va.RetriedUnclaimed += w * vc.RetriedUnclaimed
		va.Suppressed += w * vc.Suppressed
	}
}

// countLimit bounds what one trace adds to a count that can be
// astronomically large (the requests of a naive replay, radius.SatAdd's
// 2^62) once weighted: the product saturates instead of overflowing.
const countLimit = int64(1) << 62

// satMul returns a × b, saturated at ±countLimit; a of ±1 (an
// unsampled trace, a merge) leaves b as it is.
func satMul(a, b int64) int64 {
	if a == 1 || a == -1 || (a < 1<<31 && a > -1<<31 && b < 1<<31 && b > -1<<31) {
		return a * b
	}
	if a == 0 || b == 0 {
		return 0
	}
	p := a * b
	if p/b != a || p > countLimit || p < -countLimit {
		if (a < 0) != (b < 0) {
			return -countLimit
		}
		return countLimit
	}
	return p
}

// merge adds sign × o to s: mergeAgg(ScopeService, …) written out, as
// Report.Add runs it for every service of every trace (a tenth of the
// time of the table's accessors). TestServiceMergeIsFigures checks it
// adds exactly the service figures of Figures.
func (s *ServiceResult) merge(o *ServiceResult, sign int64) {
	for _, i := range [...]attribution.Audit{attribution.AuditCorrect, attribution.AuditFalseClaim,
		attribution.AuditFalseUnclaim, attribution.AuditMissing, attribution.AuditInvalid} {
		s.Claims[i] += sign * o.Claims[i]
	}
	s.Mismatches += sign * o.Mismatches
	s.Misattributed += sign * o.Misattributed
	s.NaiveMisattributed += sign * o.NaiveMisattributed
	s.Eligible += sign * o.Eligible
	s.ContextDrops += sign * o.ContextDrops
	s.OwnedFailures += sign * o.OwnedFailures
	s.Requests += sign * o.Requests
	s.VirtualRequests += sign * o.VirtualRequests
	s.Counterfactual += sign * o.Counterfactual
	s.Spurious += sign * o.Spurious
}

// Merge adds sign × o to r (sign +1 merges, -1 subtracts): every figure
// of every aggregate, as Figures defines them.
func (r *Report) Merge(o *Report, sign int64) {
	// Each and At would do, but walking the maps here saves finding each
	// API again for its owners, and closures: reports merge on every
	// batch and every read.
	mergeAgg(ScopeTotals, Agg{Report: r}, Agg{Report: o}, sign)
	for k, v := range o.APIs {
		a := r.API(k)
		mergeAgg(ScopeAPI, Agg{API: a}, Agg{API: v}, sign)
		for n, c := range v.Owners {
			mergeAgg(ScopeOwner, Agg{Owner: a.Owner(n)}, Agg{Owner: c}, sign)
		}
	}
	for k, v := range o.Services {
		r.Service(k).merge(v, sign)
	}
	for k, v := range o.Nodes {
		mergeAgg(ScopeNode, Agg{Node: r.Node(k)}, Agg{Node: v}, sign)
	}
	for k, v := range o.Versions {
		mergeAgg(ScopeVersion, Agg{Version: r.Version(k)}, Agg{Version: v}, sign)
	}
	if sign < 0 {
		r.Prune()
	}
}

// addHist adds sign × src to dst.
func addHist[K comparable](dst, src map[K]int64, sign int64) {
	for k, n := range src {
		dst[k] += sign * n
	}
}

// dropZeros removes the keys whose count is zero.
func dropZeros[K comparable](m map[K]int64) {
	for k, n := range m {
		if n == 0 {
			delete(m, k)
		}
	}
}

// Prune drops what subtraction brought back to zero, so that a report
// that had a trace added and removed equals one that never saw it: the
// zero counts of histograms, and the aggregates whose every figure is
// zero (an API's, with no owner left).
func (r *Report) Prune() {
	r.cache = nil // it may hold what is deleted
	for k, s := range r.Services {
		if zeroAgg(ScopeService, Agg{Service: s}) {
			delete(r.Services, k)
		}
	}
	for k, a := range r.APIs {
		for n, o := range a.Owners {
			if zeroAgg(ScopeOwner, Agg{Owner: o}) {
				delete(a.Owners, n)
			}
		}
		if zeroAgg(ScopeAPI, Agg{API: a}) && len(a.Owners) == 0 {
			delete(r.APIs, k)
		}
	}
	for k, n := range r.Nodes {
		if zeroAgg(ScopeNode, Agg{Node: n}) {
			delete(r.Nodes, k)
		}
	}
	for k, v := range r.Versions {
		if zeroAgg(ScopeVersion, Agg{Version: v}) {
			delete(r.Versions, k)
		}
	}
}

// MaxRadius returns the largest radius of a failed trace, 0 without one.
func (a *APIAgg) MaxRadius() int { return MaxOf(a.Radius) }

// MaxAmplification returns the largest amplification of a failed trace.
func (a *APIAgg) MaxAmplification() float64 { return MaxOf(a.Amplification) }

// MaxOf returns the largest value a histogram counts (a positive count),
// 0 for none.
func MaxOf[K int | float64](hist map[K]int64) K {
	var m K
	for k, n := range hist {
		if n > 0 && k > m {
			m = k
		}
	}
	return m
}

// Document is the analysis output of docs/SPEC.md §5.2. Fields beyond the spec's
// are extras the spec allows.
type Document struct {
	Spans     int64 `json:"spans"`
	Traces    int64 `json:"traces"`
	Fragments int64 `json:"fragments"`
	// SplitTraces counts the traces set aside because their spans reached
	// more than one partition (docs/SPEC.md §5.2): in no other figure.
	SplitTraces int64        `json:"split_traces"`
	Fleet       Fleet        `json:"fleet"`
	APIs        []APIDoc     `json:"apis"`
	Services    []ServiceDoc `json:"services"`
	Edges       []EdgeDoc    `json:"edges"`
	// Incidents are the incidents of the range (docs/SPEC.md §4.8), in order of
	// their first minute; their figures cover their minutes in the range.
	Incidents []IncidentDoc `json:"incidents"`
	// Sampling says how sure the figures are (docs/SPEC.md §4.9).
	Sampling FleetSamplingDoc `json:"sampling"`
}

// Fleet summarises all root APIs.
type Fleet struct {
	// MaxRadius and MeanMaxRadius are over the APIs with a failure event,
	// of each API's max_radius: the largest and the mean. MeanRadius is
	// MeanMaxRadius under its first name, kept because field names are
	// stable (docs/SPEC.md §5.2); it is not a mean over traces, as an
	// API's mean_radius is.
	MaxRadius     int     `json:"max_radius"`
	MeanRadius    float64 `json:"mean_radius"`
	MeanMaxRadius float64 `json:"mean_max_radius"`
	APIs          int     `json:"apis"`
	FailedAPIs    int     `json:"failed_apis"`
	// Potential radius over all APIs, with and without ownership.
	MaxPotentialRadius        int     `json:"max_potential_radius"`
	MeanPotentialRadius       float64 `json:"mean_potential_radius"`
	MaxPotentialWithout       int     `json:"max_potential_radius_without_ownership"`
	MeanPotentialWithout      float64 `json:"mean_potential_radius_without_ownership"`
	SpuriousRequestsPrevented int64   `json:"spurious_requests_prevented"`
}

// APIDoc is the per-root-API part of a Document.
type APIDoc struct {
	API                       string           `json:"api"`
	Traces                    int64            `json:"traces"`
	FailedTraces              int64            `json:"failed_traces"`
	RootErrors                int64            `json:"root_errors"`
	RemoteParentTraces        int64            `json:"remote_parent_traces"`
	MaxRadius                 int              `json:"max_radius"`
	MeanRadius                float64          `json:"mean_radius"`
	RadiusHistogram           map[string]int64 `json:"radius_histogram"`
	PotentialRadius           int              `json:"potential_radius"`
	PotentialWithout          int              `json:"potential_radius_without_ownership"`
	MaxAmplification          float64          `json:"max_amplification"`
	SuppressedRetries         int64            `json:"suppressed_retries"`
	SpuriousRequestsPrevented int64            `json:"spurious_requests_prevented"`
	Requests                  int64            `json:"requests"`
	CounterfactualRequests    int64            `json:"counterfactual_requests"`
	MisattributedErrors       int64            `json:"misattributed_errors"`
	NaiveMisattributedErrors  int64            `json:"naive_misattributed_errors"`
	MisattributionRate        float64          `json:"misattribution_rate"`
	NaiveMisattributionRate   float64          `json:"naive_misattribution_rate"`
	FailureEvents             int64            `json:"failure_events"`
	Owners                    []OwnerDoc       `json:"owners"`
	// Sampling says how sure its figures are (docs/SPEC.md §4.9).
	Sampling SamplingDoc `json:"sampling"`
}

// OwnerDoc is an owner of failure events.
type OwnerDoc struct {
	Service       string `json:"service"`
	Operation     string `json:"operation"`
	OwnedFailures int64  `json:"owned_failures"`
	// SpuriousRequestsPrevented: the spurious requests prevented in the
	// traces this owner failed in (shared evenly between the owners of a
	// trace).
	SpuriousRequestsPrevented int64 `json:"spurious_requests_prevented"`
}

// ClaimsDoc is a claim audit table row.
type ClaimsDoc struct {
	Correct      int64 `json:"correct"`
	FalseClaim   int64 `json:"false_claim"`
	FalseUnclaim int64 `json:"false_unclaim"`
	Missing      int64 `json:"missing"`
	Invalid      int64 `json:"invalid"`
}

// ServiceDoc is the per-service part of a Document.
type ServiceDoc struct {
	Service                  string    `json:"service"`
	Virtual                  bool      `json:"virtual,omitempty"`
	Claims                   ClaimsDoc `json:"claims"`
	ClaimMismatches          int64     `json:"claim_mismatches"`
	MisattributedErrors      int64     `json:"misattributed_errors"`
	NaiveMisattributedErrors int64     `json:"naive_misattributed_errors"`
	MisattributionRate       float64   `json:"misattribution_rate"`
	ContextDrops             int64     `json:"context_drops"`
	OwnedFailures            int64     `json:"owned_failures"`
	// Requests and CounterfactualRequests count the service's own hops as
	// served and under naive retries; LoadIncreaseAvoided is their ratio −
	// 1: the extra traffic the service was spared.
	Requests               int64   `json:"requests"`
	CounterfactualRequests int64   `json:"counterfactual_requests"`
	LoadIncreaseAvoided    float64 `json:"load_increase_avoided"`
	// SpuriousRequestsPrevented: the spurious requests prevented in the
	// whole call trees of the failures this service owned.
	SpuriousRequestsPrevented int64 `json:"spurious_requests_prevented"`
}

// EdgeDoc is a dependency and its fail-open state.
type EdgeDoc struct {
	Caller          string  `json:"caller"`
	Callee          string  `json:"callee"`
	CalleeService   string  `json:"callee_service"`
	CalleeOperation string  `json:"callee_operation"`
	FailOpen        bool    `json:"fail_open"`
	FailOpenSource  string  `json:"fail_open_source"`
	Calls           int64   `json:"calls"`
	FailedCalls     int64   `json:"failed_calls"`
	RetriedCalls    int64   `json:"retried_calls"`
	CallerFailed    float64 `json:"caller_failed_fraction"`
	RetryEnabled    bool    `json:"retry_enabled"`
	MaxAttempts     int     `json:"max_attempts"`
	SuppressedCalls int64   `json:"suppressed_calls"`
}

// apiDoc renders the aggregate of root API name, whose windows' potential
// radius is p.
func apiDoc(name string, a *APIAgg, p APIPotential) APIDoc {
	maxRadius := a.MaxRadius()
	ad := APIDoc{
		API: name, Traces: a.Traces, FailedTraces: a.Failed, MaxRadius: maxRadius,
		RootErrors: a.RootErrors, RemoteParentTraces: a.RemoteParent,
		RadiusHistogram: map[string]int64{}, MaxAmplification: a.MaxAmplification(),
		SuppressedRetries: a.Suppressed, SpuriousRequestsPrevented: a.Counterfactual - a.Hops,
		Requests: a.Hops, CounterfactualRequests: a.Counterfactual,
		MisattributedErrors: a.Misattributed, NaiveMisattributedErrors: a.Naive,
		MisattributionRate:      attribution.MisattributionRate(a.Misattributed, a.Eligible),
		NaiveMisattributionRate: attribution.MisattributionRate(a.Naive, a.Eligible),
		FailureEvents:           a.Events, Owners: []OwnerDoc{},
	}
	if a.Failed > 0 {
		ad.MeanRadius = float64(a.RadiusSum) / float64(a.Failed)
	}
	for rad, n := range a.Radius {
		ad.RadiusHistogram[strconv.Itoa(rad)] = n
	}
	// Recursion through one node reaches deeper than the call graph
	// (whose cycle-closing edges are not walked) shows: the potential
	// radius is never below what was observed (docs/SPEC.md §4.5).
	ad.PotentialRadius = max(p.With, maxRadius)
	ad.PotentialWithout = max(p.Without, maxRadius)
	// The mean radius is bounded by the largest a storm could reach.
	ad.Sampling = a.Sampling(ad.PotentialWithout)
	for n, c := range a.Owners {
		ad.Owners = append(ad.Owners, OwnerDoc{Service: n.Service, Operation: n.Operation, OwnedFailures: c.Events, SpuriousRequestsPrevented: c.Spurious})
	}
	slices.SortFunc(ad.Owners, func(x, y OwnerDoc) int {
		return cmp.Or(cmp.Compare(y.OwnedFailures, x.OwnedFailures),
			cmp.Compare(x.Service, y.Service), cmp.Compare(x.Operation, y.Operation))
	})
	return ad
}

// edgeDoc renders dependency k with its counts summed over the windows,
// its fail-open state read from the sums.
func edgeDoc(k graph.Edge, e *graph.EdgeStats, cfg Config) EdgeDoc {
	open, src := cfg.Attribution.FailOpen(e)
	ed := EdgeDoc{
		Caller: k.Caller, Callee: k.Callee.String(), CalleeService: k.Callee.Service, CalleeOperation: k.Callee.Operation,
		FailOpen: open, FailOpenSource: src.String(),
		Calls: e.Calls, FailedCalls: e.Failed, RetriedCalls: e.Retried,
		RetryEnabled: e.RetryEnabled(), MaxAttempts: e.MaxAttempts(), SuppressedCalls: e.Suppressed,
	}
	if e.Failed > 0 {
		ed.CallerFailed = float64(e.CallerFailed) / float64(e.Failed)
	}
	return ed
}

// Document renders the report with the summaries of the windows its
// traces belong to (docs/SPEC.md §4.3): per API, the potential radius is the
// largest of its windows' (never below its observed max radius); per edge,
// counts are summed over the windows and the fail-open state is read from
// the sums.
func (r *Report) Document(windows []*WindowSummary, cfg Config) *Document {
	d := &Document{Spans: r.Spans, Traces: r.Traces, Fragments: r.Fragments, SplitTraces: r.TracesSplit,
		APIs: []APIDoc{}, Services: []ServiceDoc{}, Edges: []EdgeDoc{}, Incidents: []IncidentDoc{},
		Sampling: r.FleetSampling()}
	potential := map[string]APIPotential{}
	edges := map[graph.Edge]*graph.EdgeStats{}
	for _, w := range windows {
		for api, p := range w.APIs {
			q := potential[api]
			potential[api] = APIPotential{With: max(q.With, p.With), Without: max(q.Without, p.Without)}
		}
		for k, e := range w.Edges {
			sum := edges[k]
			if sum == nil {
				sum = &graph.EdgeStats{}
				edges[k] = sum
			}
			sum.Merge(e, 1)
		}
	}
	names := make([]string, 0, len(r.APIs))
	for k, a := range r.APIs {
		if a.Traces > 0 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var radiusSum, potSum, pot0Sum int64
	for _, name := range names {
		ad := apiDoc(name, r.APIs[name], potential[name])
		if ad.FailedTraces > 0 {
			d.Fleet.FailedAPIs++
			radiusSum += int64(ad.MaxRadius)
			d.Fleet.MaxRadius = max(d.Fleet.MaxRadius, ad.MaxRadius)
		}
		potSum += int64(ad.PotentialRadius)
		pot0Sum += int64(ad.PotentialWithout)
		d.Fleet.MaxPotentialRadius = max(d.Fleet.MaxPotentialRadius, ad.PotentialRadius)
		d.Fleet.MaxPotentialWithout = max(d.Fleet.MaxPotentialWithout, ad.PotentialWithout)
		d.Fleet.SpuriousRequestsPrevented += ad.SpuriousRequestsPrevented
		d.APIs = append(d.APIs, ad)
	}
	d.Fleet.APIs = len(names)
	if d.Fleet.FailedAPIs > 0 {
		d.Fleet.MeanMaxRadius = float64(radiusSum) / float64(d.Fleet.FailedAPIs)
		d.Fleet.MeanRadius = d.Fleet.MeanMaxRadius
	}
	if len(names) > 0 {
		d.Fleet.MeanPotentialRadius = float64(potSum) / float64(len(names))
		d.Fleet.MeanPotentialWithout = float64(pot0Sum) / float64(len(names))
	}
	for _, s := range r.Services {
		d.Services = append(d.Services, serviceDoc(s))
	}
	slices.SortFunc(d.Services, func(x, y ServiceDoc) int { return cmp.Compare(x.Service, y.Service) })
	for k, e := range edges {
		d.Edges = append(d.Edges, edgeDoc(k, e, cfg))
	}
	slices.SortFunc(d.Edges, func(x, y EdgeDoc) int {
		return cmp.Or(cmp.Compare(x.Caller, y.Caller), cmp.Compare(x.CalleeService, y.CalleeService),
			cmp.Compare(x.CalleeOperation, y.CalleeOperation))
	})
	return d
}
