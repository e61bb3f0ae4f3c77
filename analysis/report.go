package analysis

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/radius"
)

// Report aggregates trace results. Aggregation is made of sums and maxima,
// so reports merge in any order. The zero value is not ready: use
// NewReport.
type Report struct {
	Spans, Traces, Fragments int64
	apis                     map[string]*apiAgg
	services                 map[string]*ServiceResult
}

type apiAgg struct {
	traces, failed    int64
	rootErrors        int64
	remoteParent      int64
	radiusSum         int64
	maxRadius         int
	hist              map[int]int64
	maxAmp            float64
	suppressed        int64
	hops, cf          int64
	misattributed     int64
	naive, eligible   int64
	fragments, events int64
	owners            map[graph.Node]ownerAgg
}

type ownerAgg struct{ events, spurious int64 }

// NewReport returns an empty Report.
func NewReport() *Report {
	return &Report{apis: map[string]*apiAgg{}, services: map[string]*ServiceResult{}}
}

func (r *Report) api(name string) *apiAgg {
	a := r.apis[name]
	if a == nil {
		a = &apiAgg{hist: map[int]int64{}, owners: map[graph.Node]ownerAgg{}}
		r.apis[name] = a
	}
	return a
}

func (r *Report) service(name string, virtual bool) *ServiceResult {
	s := r.services[name]
	if s == nil {
		s = &ServiceResult{Service: name, Virtual: virtual}
		r.services[name] = s
	}
	return s
}

// Add adds one trace result.
func (r *Report) Add(tr *TraceResult) {
	r.Spans += int64(tr.Spans)
	r.Traces++
	r.Fragments += int64(tr.Fragments)
	for i := range tr.Services {
		ts := &tr.Services[i]
		s := r.service(ts.Service, ts.Virtual)
		addService(s, ts)
	}
	if tr.API == "" {
		return
	}
	a := r.api(tr.API)
	a.traces++
	if tr.RootFailed {
		a.rootErrors++
	}
	if tr.RemoteParent {
		a.remoteParent++
	}
	a.fragments += int64(tr.Fragments)
	a.suppressed += tr.Suppressed
	a.hops += tr.Hops
	a.cf += tr.Counterfactual
	for i := range tr.Services {
		a.misattributed += tr.Services[i].Misattributed
		a.naive += tr.Services[i].NaiveMisattributed
		a.eligible += tr.Services[i].Eligible
	}
	if !tr.Failed() {
		return
	}
	a.failed++
	a.radiusSum += int64(tr.Radius)
	a.maxRadius = max(a.maxRadius, tr.Radius)
	a.hist[tr.Radius]++
	a.events += int64(len(tr.Events))
	for _, o := range tr.Owners {
		ag := a.owners[o.Node]
		a.owners[o.Node] = ownerAgg{ag.events + o.Hops, ag.spurious + o.Spurious}
		a.maxAmp = max(a.maxAmp, o.Amplification())
	}
}

func addService(s, o *ServiceResult) {
	s.Virtual = s.Virtual && o.Virtual
	for i := range s.Claims {
		s.Claims[i] += o.Claims[i]
	}
	s.Misattributed += o.Misattributed
	s.NaiveMisattributed += o.NaiveMisattributed
	s.Eligible += o.Eligible
	s.Mismatches += o.Mismatches
	s.ContextDrops += o.ContextDrops
	s.OwnedFailures += o.OwnedFailures
	s.Requests += o.Requests
	s.Counterfactual += o.Counterfactual
	s.Spurious += o.Spurious
}

// Merge adds the results aggregated in o.
func (r *Report) Merge(o *Report) {
	r.Spans += o.Spans
	r.Traces += o.Traces
	r.Fragments += o.Fragments
	for k, v := range o.services {
		addService(r.service(k, v.Virtual), v)
	}
	for k, v := range o.apis {
		a := r.api(k)
		a.traces += v.traces
		a.failed += v.failed
		a.rootErrors += v.rootErrors
		a.remoteParent += v.remoteParent
		a.radiusSum += v.radiusSum
		a.maxRadius = max(a.maxRadius, v.maxRadius)
		for rad, n := range v.hist {
			a.hist[rad] += n
		}
		a.maxAmp = max(a.maxAmp, v.maxAmp)
		a.suppressed += v.suppressed
		a.hops += v.hops
		a.cf += v.cf
		a.misattributed += v.misattributed
		a.naive += v.naive
		a.eligible += v.eligible
		a.fragments += v.fragments
		a.events += v.events
		for n, c := range v.owners {
			ag := a.owners[n]
			a.owners[n] = ownerAgg{ag.events + c.events, ag.spurious + c.spurious}
		}
	}
}

// Document is the analysis output of SPEC §5.2. Fields beyond the spec's
// are extras the spec allows.
type Document struct {
	Spans     int64        `json:"spans"`
	Traces    int64        `json:"traces"`
	Fragments int64        `json:"fragments"`
	Fleet     Fleet        `json:"fleet"`
	APIs      []APIDoc     `json:"apis"`
	Services  []ServiceDoc `json:"services"`
	Edges     []EdgeDoc    `json:"edges"`
}

// Fleet summarises all root APIs.
type Fleet struct {
	// MaxRadius and MeanRadius are over the APIs with a failure event, of
	// each API's max_radius.
	MaxRadius  int     `json:"max_radius"`
	MeanRadius float64 `json:"mean_radius"`
	APIs       int     `json:"apis"`
	FailedAPIs int     `json:"failed_apis"`
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

// Document renders the report against window state s (for potential radius
// and edge states) with the given rules.
func (r *Report) Document(s *State, cfg Config) *Document {
	d := &Document{Spans: r.Spans, Traces: r.Traces, Fragments: r.Fragments,
		APIs: []APIDoc{}, Services: []ServiceDoc{}, Edges: []EdgeDoc{}}
	pot := newPotentialIndex(s, cfg)
	names := make([]string, 0, len(r.apis))
	for k := range r.apis {
		names = append(names, k)
	}
	for k := range s.APIs {
		if r.apis[k] == nil {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var radiusSum, potSum, pot0Sum int64
	for _, name := range names {
		a := r.apis[name]
		if a == nil {
			a = &apiAgg{}
		}
		ad := APIDoc{
			API: name, Traces: a.traces, FailedTraces: a.failed, MaxRadius: a.maxRadius,
			RootErrors: a.rootErrors, RemoteParentTraces: a.remoteParent,
			RadiusHistogram: map[string]int64{}, MaxAmplification: a.maxAmp,
			SuppressedRetries: a.suppressed, SpuriousRequestsPrevented: a.cf - a.hops,
			Requests: a.hops, CounterfactualRequests: a.cf,
			MisattributedErrors: a.misattributed, NaiveMisattributedErrors: a.naive,
			MisattributionRate:      attribution.MisattributionRate(a.misattributed, a.eligible),
			NaiveMisattributionRate: attribution.MisattributionRate(a.naive, a.eligible),
			FailureEvents:           a.events, Owners: []OwnerDoc{},
		}
		if a.failed > 0 {
			ad.MeanRadius = float64(a.radiusSum) / float64(a.failed)
			d.Fleet.FailedAPIs++
			radiusSum += int64(a.maxRadius)
			d.Fleet.MaxRadius = max(d.Fleet.MaxRadius, a.maxRadius)
		}
		for rad, n := range a.hist {
			ad.RadiusHistogram[strconv.Itoa(rad)] = n
		}
		if g := s.APIs[name]; g != nil {
			ad.PotentialRadius, ad.PotentialWithout = radius.Potential(pot.nodes(g))
		}
		// Recursion through one node reaches deeper than the call graph
		// (whose cycle-closing edges are not walked) shows: the potential
		// radius is never below what was observed (SPEC §4.5).
		ad.PotentialRadius = max(ad.PotentialRadius, a.maxRadius)
		ad.PotentialWithout = max(ad.PotentialWithout, a.maxRadius)
		potSum += int64(ad.PotentialRadius)
		pot0Sum += int64(ad.PotentialWithout)
		d.Fleet.MaxPotentialRadius = max(d.Fleet.MaxPotentialRadius, ad.PotentialRadius)
		d.Fleet.MaxPotentialWithout = max(d.Fleet.MaxPotentialWithout, ad.PotentialWithout)
		d.Fleet.SpuriousRequestsPrevented += ad.SpuriousRequestsPrevented
		for n, c := range a.owners {
			ad.Owners = append(ad.Owners, OwnerDoc{Service: n.Service, Operation: n.Operation, OwnedFailures: c.events, SpuriousRequestsPrevented: c.spurious})
		}
		slices.SortFunc(ad.Owners, func(x, y OwnerDoc) int {
			return cmp.Or(cmp.Compare(y.OwnedFailures, x.OwnedFailures),
				cmp.Compare(x.Service, y.Service), cmp.Compare(x.Operation, y.Operation))
		})
		d.APIs = append(d.APIs, ad)
	}
	d.Fleet.APIs = len(names)
	if d.Fleet.FailedAPIs > 0 {
		d.Fleet.MeanRadius = float64(radiusSum) / float64(d.Fleet.FailedAPIs)
	}
	if len(names) > 0 {
		d.Fleet.MeanPotentialRadius = float64(potSum) / float64(len(names))
		d.Fleet.MeanPotentialWithout = float64(pot0Sum) / float64(len(names))
	}
	for _, s := range r.services {
		sd := ServiceDoc{
			Service: s.Service, Virtual: s.Virtual,
			Claims: ClaimsDoc{
				Correct: s.Claims[attribution.AuditCorrect], FalseClaim: s.Claims[attribution.AuditFalseClaim],
				FalseUnclaim: s.Claims[attribution.AuditFalseUnclaim], Missing: s.Claims[attribution.AuditMissing],
				Invalid: s.Claims[attribution.AuditInvalid],
			},
			ClaimMismatches:           s.Mismatches,
			MisattributedErrors:       s.Misattributed,
			NaiveMisattributedErrors:  s.NaiveMisattributed,
			MisattributionRate:        attribution.MisattributionRate(s.Misattributed, s.Eligible),
			ContextDrops:              s.ContextDrops,
			OwnedFailures:             s.OwnedFailures,
			Requests:                  s.Requests,
			CounterfactualRequests:    s.Counterfactual,
			SpuriousRequestsPrevented: s.Spurious,
		}
		if s.Requests > 0 {
			sd.LoadIncreaseAvoided = float64(s.Counterfactual)/float64(s.Requests) - 1
		}
		d.Services = append(d.Services, sd)
	}
	slices.SortFunc(d.Services, func(x, y ServiceDoc) int { return cmp.Compare(x.Service, y.Service) })
	for k, e := range s.Edges {
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
		d.Edges = append(d.Edges, ed)
	}
	slices.SortFunc(d.Edges, func(x, y EdgeDoc) int {
		return cmp.Or(cmp.Compare(x.Caller, y.Caller), cmp.Compare(x.CalleeService, y.CalleeService),
			cmp.Compare(x.CalleeOperation, y.CalleeOperation))
	})
	return d
}
