package analysis

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
)

// IncidentRules say when an owner's failures are an incident (docs/SPEC.md §4.8).
// The zero value means the SPEC's: a minute whose owned-failure rate is at
// least 5% with at least 10 owned failures opens one; 5 quiet minutes
// close it.
type IncidentRules struct {
	MinRate      float64
	MinOwned     int64
	QuietMinutes int64
}

func (r IncidentRules) minRate() float64 {
	if r.MinRate <= 0 {
		return 0.05
	}
	return r.MinRate
}

func (r IncidentRules) minOwned() int64 {
	if r.MinOwned <= 0 {
		return 10
	}
	return r.MinOwned
}

func (r IncidentRules) quiet() int64 {
	if r.QuietMinutes <= 0 {
		return 5
	}
	return r.QuietMinutes
}

// Resolved returns the rules with the SPEC's defaults filled in.
func (r IncidentRules) Resolved() IncidentRules {
	return IncidentRules{MinRate: r.minRate(), MinOwned: r.minOwned(), QuietMinutes: r.quiet()}
}

// Hot reports whether a minute with these counts opens or extends an
// incident of its owner.
func (r IncidentRules) Hot(a NodeAgg) bool {
	return a.Requests > 0 && a.Owned >= r.minOwned() && float64(a.Owned) >= r.minRate()*float64(a.Requests)
}

// IncidentSpan is when an owner was in an incident: its first and last
// hot minutes (unix minutes), and whether it is still open at the time of
// detection (fewer than QuietMinutes quiet minutes since the last hot
// one).
type IncidentSpan struct {
	Owner       graph.Node
	First, Last int64
	Open        bool
	// PeakRate is the highest owned-failure rate of its minutes.
	PeakRate float64
}

// ID returns a stable identifier of the incident, a URL path element:
// its first minute (unix minutes) and a hash of its owner, so that it
// stays the same while the incident goes on and can be found again from
// the minute alone.
func (s IncidentSpan) ID() string {
	h := sha256.Sum256([]byte(s.Owner.Service + "\x00" + s.Owner.Operation))
	return strconv.FormatInt(s.First, 10) + "-" + hex.EncodeToString(h[:6])
}

// ParseIncidentID returns the first minute an incident id names.
func ParseIncidentID(id string) (first int64, ok bool) {
	m, h, found := strings.Cut(id, "-")
	if !found || len(h) != 12 {
		return 0, false
	}
	if _, err := hex.DecodeString(h); err != nil {
		return 0, false
	}
	first, err := strconv.ParseInt(m, 10, 64)
	return first, err == nil && first > -1<<40 && first < 1<<40
}

// DetectIncidents finds the incidents in per-minute node counts (minute →
// node → counts), as of the minute now (exclusive: minutes before it have
// passed). An incident opens at the first hot minute of an owner and goes
// on through every hot minute that follows fewer than QuietMinutes quiet
// minutes after the previous one; it is open while fewer than QuietMinutes
// minutes have passed since its last hot minute. Incidents are ordered by
// first minute, then owner.
func DetectIncidents(minutes MinuteNodes, now int64, rules IncidentRules) []IncidentSpan {
	hot := map[graph.Node][]int64{}
	rate := map[graph.Node]map[int64]float64{}
	for m, nodes := range minutes {
		for n, a := range nodes {
			if rules.Hot(a) {
				hot[n] = append(hot[n], m)
				if rate[n] == nil {
					rate[n] = map[int64]float64{}
				}
				rate[n][m] = float64(a.Owned) / float64(a.Requests)
			}
		}
	}
	quiet := rules.quiet()
	var out []IncidentSpan
	for n, ms := range hot {
		slices.Sort(ms)
		cur := IncidentSpan{Owner: n, First: ms[0], Last: ms[0], PeakRate: rate[n][ms[0]]}
		for _, m := range ms[1:] {
			if m-cur.Last-1 >= quiet { // enough quiet minutes in between: a new incident
				out = append(out, cur)
				cur = IncidentSpan{Owner: n, First: m, Last: m}
			}
			cur.Last = m
			cur.PeakRate = max(cur.PeakRate, rate[n][m])
		}
		cur.Open = now-cur.Last-1 < quiet
		out = append(out, cur)
	}
	slices.SortFunc(out, func(a, b IncidentSpan) int {
		return cmp.Or(cmp.Compare(a.First, b.First), a.Owner.Compare(b.Owner))
	})
	return out
}

// IncidentDoc is an incident with its figures (docs/SPEC.md §4.8).
type IncidentDoc struct {
	ID        string    `json:"id"`
	Service   string    `json:"service"`
	Operation string    `json:"operation"`
	Start     time.Time `json:"start"`
	// End is the end of its last hot minute; ClosedAt, for a closed
	// incident, when the quiet minutes that closed it ended.
	End      time.Time  `json:"end"`
	Open     bool       `json:"open"`
	ClosedAt *time.Time `json:"closed_at,omitempty"`
	// PeakRate is its highest owned-failure rate in a minute;
	// OwnedFailures and Requests the owner's over the incident.
	PeakRate      float64  `json:"peak_owned_failure_rate"`
	OwnedFailures int64    `json:"owned_failures"`
	Requests      int64    `json:"requests"`
	AffectedAPIs  []string `json:"affected_apis"`
	// MaxRadius and MeanRadius are over the owner's failure events;
	// MaxAmplification over its traces.
	MaxRadius        int     `json:"max_radius"`
	MeanRadius       float64 `json:"mean_radius"`
	MaxAmplification float64 `json:"max_amplification"`
	// SuppressedRetries in the traces the owner failed in;
	// SpuriousRequestsPrevented its share; LoadIncreaseAvoided at its
	// service over the incident.
	SuppressedRetries         int64   `json:"suppressed_retries"`
	SpuriousRequestsPrevented int64   `json:"spurious_requests_prevented"`
	LoadIncreaseAvoided       float64 `json:"load_increase_avoided"`
	// MisattributedErrors of the services involved, whose claim integrity
	// Services gives (the owner's service and every service of the
	// affected APIs' call graphs).
	MisattributedErrors int64        `json:"misattributed_errors"`
	Services            []ServiceDoc `json:"services"`
	ExampleTraces       []string     `json:"example_traces"`
}

// Figures fills an incident's figures from the report of its minutes
// (rep covers [First, Last+1)) and the call graphs of its windows (which
// services are involved).
func (s IncidentSpan) Figures(rep *Report, graphs map[string]*graph.APIGraph, rules IncidentRules) IncidentDoc {
	d := IncidentDoc{ID: s.ID(), Service: s.Owner.Service, Operation: s.Owner.Operation,
		Start: time.Unix(s.First*60, 0).UTC(), End: time.Unix((s.Last+1)*60, 0).UTC(), Open: s.Open,
		PeakRate: s.PeakRate, AffectedAPIs: []string{}, Services: []ServiceDoc{}, ExampleTraces: []string{}}
	if !s.Open {
		c := time.Unix((s.Last+1+rules.quiet())*60, 0).UTC()
		d.ClosedAt = &c
	}
	if n := rep.Nodes[s.Owner]; n != nil {
		d.OwnedFailures, d.Requests = n.Owned, n.Requests
	}
	involved := map[string]bool{s.Owner.Service: true}
	var events, radiusSum int64
	for api, a := range rep.APIs {
		o := a.Owners[s.Owner]
		if o == nil || o.Events == 0 {
			continue
		}
		d.AffectedAPIs = append(d.AffectedAPIs, api)
		events += o.Events
		radiusSum += o.RadiusSum
		d.MaxRadius = max(d.MaxRadius, MaxOf(o.Radius))
		d.MaxAmplification = max(d.MaxAmplification, MaxOf(o.Amplification))
		d.SuppressedRetries += o.Suppressed
		d.SpuriousRequestsPrevented += o.Spurious
		if g := graphs[api]; g != nil {
			for n := range g.Nodes {
				involved[n.Service] = true
			}
		}
	}
	slices.Sort(d.AffectedAPIs)
	if events > 0 {
		d.MeanRadius = float64(radiusSum) / float64(events)
	}
	if sv := rep.Services[s.Owner.Service]; sv != nil && sv.Requests > 0 {
		d.LoadIncreaseAvoided = float64(sv.Counterfactual)/float64(sv.Requests) - 1
	}
	for name := range involved {
		sv := rep.Services[name]
		if sv == nil {
			continue
		}
		d.MisattributedErrors += sv.Misattributed
		d.Services = append(d.Services, serviceDoc(sv))
	}
	slices.SortFunc(d.Services, func(x, y ServiceDoc) int { return cmp.Compare(x.Service, y.Service) })
	return d
}

// mergeIncident adds to r what IncidentSpan.Figures reads of o for an
// incident of owner: the owner's node, its aggregates in every API, and
// the services.
func (r *Report) mergeIncident(o *Report, owner graph.Node) {
	if n := o.Nodes[owner]; n != nil {
		mergeAgg(ScopeNode, Agg{Node: r.Node(owner)}, Agg{Node: n}, 1)
	}
	for k, v := range o.APIs {
		if c := v.Owners[owner]; c != nil {
			mergeAgg(ScopeOwner, Agg{Owner: r.API(k).Owner(owner)}, Agg{Owner: c}, 1)
		}
	}
	for k, v := range o.Services {
		r.Service(k).merge(v, 1)
	}
}

// serviceDoc renders one service's aggregate.
func serviceDoc(s *ServiceResult) ServiceDoc {
	sd := ServiceDoc{
		Service: s.Service, Virtual: s.IsVirtual(),
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
	return sd
}

// ExampleOrder orders candidate example traces of an incident: the widest
// storms first (radius of the owner's events in the trace), then by trace
// id, so that every front end picks the same ones.
func ExampleOrder(aRadius int, aID graph.TraceID, bRadius int, bID graph.TraceID) int {
	if aRadius != bRadius {
		return cmp.Compare(bRadius, aRadius)
	}
	return cmp.Compare(aID.String(), bID.String())
}

// MaxExamples is how many example trace ids an incident lists.
const MaxExamples = 5

// MinuteOf returns the unix minute of a time in unix nanoseconds.
func MinuteOf(unixNano int64) int64 { return WindowOf(unixNano, time.Minute) }

// MinuteNodes sums traces' node counts per minute of their start: what
// incidents are detected from.
type MinuteNodes map[int64]map[graph.Node]NodeAgg

// Put sets a node's counts in a minute.
func (m MinuteNodes) Put(min int64, n graph.Node, a NodeAgg) {
	nodes := m[min]
	if nodes == nil {
		nodes = map[graph.Node]NodeAgg{}
		m[min] = nodes
	}
	nodes[n] = a
}

// Add adds a result's node counts.
func (m MinuteNodes) Add(r *TraceResult) {
	if len(r.Nodes) == 0 {
		return
	}
	min := MinuteOf(r.Start)
	nodes := m[min]
	if nodes == nil {
		nodes = map[graph.Node]NodeAgg{}
		m[min] = nodes
	}
	w := r.W() // estimates of the traffic's, as every count (docs/SPEC.md §4.9)
	for _, n := range r.Nodes {
		a := nodes[n.Node]
		a.Requests += w * n.Requests
		a.Owned += w * n.Owned
		nodes[n.Node] = a
	}
}

// Merge adds o's counts.
func (m MinuteNodes) Merge(o MinuteNodes) {
	for min, nodes := range o {
		dst := m[min]
		if dst == nil {
			m[min] = nodes
			continue
		}
		for n, a := range nodes {
			b := dst[n]
			b.Requests += a.Requests
			b.Owned += a.Owned
			dst[n] = b
		}
	}
}

// Last returns the last minute with counts.
func (m MinuteNodes) Last() (int64, bool) {
	last, ok := int64(0), false
	for min := range m {
		if !ok || min > last {
			last, ok = min, true
		}
	}
	return last, ok
}

// IncidentCollector gathers the figures of detected incidents from the
// results of their minutes, for analyses that see every trace (a file):
// each result is added to the report of every incident whose minutes hold
// its start, and traces where the owner failed are kept as examples.
type IncidentCollector struct {
	Spans    []IncidentSpan
	Reports  []*Report
	examples [][]Example
}

// Example is a candidate example trace of an incident: the largest
// radius of the owner's failure events in it.
type Example struct {
	ID     graph.TraceID
	Radius int
}

// NewIncidentCollector returns a collector for spans.
func NewIncidentCollector(spans []IncidentSpan) *IncidentCollector {
	c := &IncidentCollector{Spans: spans, Reports: make([]*Report, len(spans)), examples: make([][]Example, len(spans))}
	for i := range spans {
		c.Reports[i] = NewReport()
	}
	return c
}

// Add adds one result.
func (c *IncidentCollector) Add(r *TraceResult) {
	min := MinuteOf(r.Start)
	for i, s := range c.Spans {
		if min < s.First || min > s.Last {
			continue
		}
		c.Reports[i].Add(r, 1)
		if rad, ok := OwnerRadius(r, s.Owner); ok {
			c.examples[i] = KeepExample(c.examples[i], r.TraceID, rad)
		}
	}
}

// MinuteResults sums results by the minute of their start — each
// minute's report, and per owner of a failure event its best example
// candidates — so that incident figures can be gathered without the
// results themselves (AddTo). A result is added once: the whole report
// is the merge of the minutes' (MergeInto: reports are integer sums,
// merged exactly in any order), and the node counts incidents are
// detected from are the minutes' reports' (Nodes). Memory grows with the
// minutes and what their reports hold, not with the traces.
type MinuteResults map[int64]*minuteResults

type minuteResults struct {
	rep      *Report
	examples map[graph.Node][]Example
}

// Add adds one result to its minute.
func (m MinuteResults) Add(r *TraceResult) {
	k := MinuteOf(r.Start)
	mr := m[k]
	if mr == nil {
		mr = &minuteResults{rep: NewReport(), examples: map[graph.Node][]Example{}}
		m[k] = mr
	}
	mr.rep.Add(r, 1)
	for i := range r.Events {
		o := r.Events[i].Owner
		if ownerBefore(r, i) {
			continue // its largest radius was kept at its first event
		}
		rad, _ := OwnerRadius(r, o)
		mr.examples[o] = KeepExample(mr.examples[o], r.TraceID, rad)
	}
}

// ownerBefore reports whether an event before the i-th has its owner.
func ownerBefore(r *TraceResult, i int) bool {
	for j := range i {
		if r.Events[j].Owner == r.Events[i].Owner {
			return true
		}
	}
	return false
}

// Has reports whether results of minute k were added.
func (m MinuteResults) Has(k int64) bool { return m[k] != nil }

// Merge adds o's minutes (o is not to be used after).
func (m MinuteResults) Merge(o MinuteResults) {
	for k, src := range o {
		dst := m[k]
		if dst == nil {
			m[k] = src
			continue
		}
		dst.rep.Merge(src.rep, 1)
		for n, ex := range src.examples {
			for _, e := range ex {
				dst.examples[n] = KeepExample(dst.examples[n], e.ID, e.Radius)
			}
		}
	}
}

// MergeInto adds every minute's report to rep.
func (m MinuteResults) MergeInto(rep *Report) {
	for _, mr := range m {
		rep.Merge(mr.rep, 1)
	}
}

// Nodes adds the minutes' node counts to out, as MinuteNodes.Add of
// every result would.
func (m MinuteResults) Nodes(out MinuteNodes) {
	for k, mr := range m {
		nodes := make(map[graph.Node]NodeAgg, len(mr.rep.Nodes))
		for n, a := range mr.rep.Nodes {
			nodes[n] = *a
		}
		out.Merge(MinuteNodes{k: nodes})
	}
}

// AddTo adds the minutes' sums to the incidents of c whose minutes hold
// them: of what c.Add of each of their results would add, what an
// incident's figures read (mergeIncident).
func (m MinuteResults) AddTo(c *IncidentCollector) {
	for k, mr := range m {
		for i, s := range c.Spans {
			if k < s.First || k > s.Last {
				continue
			}
			c.Reports[i].mergeIncident(mr.rep, s.Owner)
			for _, e := range mr.examples[s.Owner] {
				c.examples[i] = KeepExample(c.examples[i], e.ID, e.Radius)
			}
		}
	}
}

// Merge adds the results o collected (for the same spans).
func (c *IncidentCollector) Merge(o *IncidentCollector) {
	for i := range c.Spans {
		c.Reports[i].Merge(o.Reports[i], 1)
		for _, e := range o.examples[i] {
			c.examples[i] = KeepExample(c.examples[i], e.ID, e.Radius)
		}
	}
}

// Docs returns the incidents with their figures; graphs returns the call
// graphs of the windows an incident's minutes belong to.
func (c *IncidentCollector) Docs(graphs func(IncidentSpan) map[string]*graph.APIGraph, rules IncidentRules) []IncidentDoc {
	out := make([]IncidentDoc, len(c.Spans))
	for i, s := range c.Spans {
		out[i] = s.Figures(c.Reports[i], graphs(s), rules)
		for _, e := range c.examples[i] {
			out[i].ExampleTraces = append(out[i].ExampleTraces, e.ID.String())
		}
	}
	return out
}

// OwnerRadius returns the largest radius of owner's failure events in a
// result, false when it had none.
func OwnerRadius(r *TraceResult, owner graph.Node) (int, bool) {
	rad, ok := 0, false
	for _, e := range r.Events {
		if e.Owner == owner {
			rad, ok = max(rad, e.Radius), true
		}
	}
	return rad, ok
}

// KeepExample adds a candidate example to the best MaxExamples so far,
// in ExampleOrder.
func KeepExample(best []Example, id graph.TraceID, radius int) []Example {
	i, _ := slices.BinarySearchFunc(best, Example{id, radius}, func(a, b Example) int {
		return ExampleOrder(a.Radius, a.ID, b.Radius, b.ID)
	})
	if i >= MaxExamples || (i < len(best) && best[i].ID == id) {
		return best
	}
	best = slices.Insert(best, i, Example{id, radius})
	if len(best) > MaxExamples {
		best = best[:MaxExamples]
	}
	return best
}

// ExampleIDs returns the trace ids of the first n of best.
func ExampleIDs(best []Example, n int) []graph.TraceID {
	out := make([]graph.TraceID, 0, min(n, len(best)))
	for _, c := range best[:min(n, len(best))] {
		out = append(out, c.ID)
	}
	return out
}

// DetectIncidentsIn detects the incidents of a set of traces (a file),
// as of the minute after the last one holding a trace: an incident whose
// last hot minute is within QuietMinutes of the end of the data is open.
func DetectIncidentsIn(minutes MinuteNodes, rules IncidentRules) []IncidentSpan {
	last, ok := minutes.Last()
	if !ok {
		return nil
	}
	return DetectIncidents(minutes, last+1, rules)
}

// SummaryGraphs returns, for an incident, the call graphs of the windows
// among sums that its minutes belong to (to be read, not changed: the
// incidents of the same windows share them). Not for concurrent use.
func SummaryGraphs(sums []*WindowSummary, window time.Duration) func(IncidentSpan) map[string]*graph.APIGraph {
	type windows struct{ lo, hi int64 }
	merged := map[windows]map[string]*graph.APIGraph{}
	return func(s IncidentSpan) map[string]*graph.APIGraph {
		lo := WindowOf(s.First*int64(time.Minute), window)
		hi := WindowOf((s.Last+1)*int64(time.Minute)-1, window)
		if g, ok := merged[windows{lo, hi}]; ok {
			return g
		}
		var in []*WindowSummary
		for _, sum := range sums {
			if sum.Window >= lo && sum.Window <= hi {
				in = append(in, sum)
			}
		}
		g := MergeSummaries(in).APIs
		merged[windows{lo, hi}] = g
		return g
	}
}

// Covers reports whether a trace starting at unixNano is in a minute of
// any of the spans.
func (c *IncidentCollector) Covers(unixNano int64) bool {
	return c.CoversMinute(MinuteOf(unixNano))
}

// CoversMinute reports whether a unix minute is a minute of any of the
// spans.
func (c *IncidentCollector) CoversMinute(m int64) bool {
	for _, s := range c.Spans {
		if m >= s.First && m <= s.Last {
			return true
		}
	}
	return false
}
