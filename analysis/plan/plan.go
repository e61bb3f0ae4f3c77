package plan

import (
	"fmt"
	"slices"

	"github.com/stormradius/stormradius/radius"
)

// Options shape a plan.
type Options struct {
	// Budget is B, the fraction of its requests an adopted service's
	// retries may add (the middleware's budget): between 0 and 1.
	Budget float64
	// Steps is the most steps to plan; 0 plans until no step helps.
	Steps int
	// Fail names the services or "service operation" nodes to plan for:
	// each fails in turn, and nothing else weighs. Empty: every node
	// weighs by its observed owned-failure rate.
	Fail []string
}

// Weights says how failing nodes were weighed.
const (
	// WeightsObserved: by observed owned-failure rate. In an API where
	// none was seen, every node weighs the same: the mean node rate of
	// the APIs where failures were seen.
	WeightsObserved = "observed"
	// WeightsUniform: no failure was seen anywhere: every node of an API
	// equally, the API's nodes weighing 1 together.
	WeightsUniform = "uniform"
	// WeightsFail: the nodes Options.Fail names, equally.
	WeightsFail = "fail"
)

// Plan is the adoption plan (docs/SPEC.md §5.2, "plan").
type Plan struct {
	Budget  float64  `json:"budget"`
	Weights string   `json:"weights"`
	Fail    []string `json:"fail,omitempty"`
	// Services counts the services of the plan's APIs; Speaking lists
	// those that already claim and honour claims (never a step).
	Services int      `json:"services"`
	Speaking []string `json:"speaking"`
	// Cost is the expected storm cost before any step: over every API and
	// failing node, the API's root requests × the node's weight × (the
	// requests reaching the failing node + the spurious requests), per
	// root request of the API.
	Cost  float64      `json:"cost"`
	APIs  []APIFigures `json:"apis"` // before any step
	Steps []Step       `json:"steps"`
}

// Figures are one API's storm figures, over its failing nodes (each
// weighed by its share of the API's failure weight).
type Figures struct {
	MaxRadius  int     `json:"max_radius"`
	MeanRadius float64 `json:"mean_radius"`
	// Load is the requests the failing node serves per root request.
	Load float64 `json:"load"`
	// Spurious is the requests retries add per root request.
	Spurious float64 `json:"spurious"`
}

// APIFigures are an API's figures with its name and weight.
type APIFigures struct {
	API    string  `json:"api"`
	Weight float64 `json:"weight"`
	Figures
}

// APIChange is an API a step changes.
type APIChange struct {
	API    string  `json:"api"`
	Before Figures `json:"before"`
	After  Figures `json:"after"`
}

// Step is one adoption step.
type Step struct {
	Step     int      `json:"step"`
	Services []string `json:"services"`
	// Together: the services help only together (neither alone).
	Together bool   `json:"together"`
	Why      string `json:"why"`
	// Gain is how much the step lowers the cost; Cost is the cost after.
	Gain float64     `json:"gain"`
	Cost float64     `json:"cost"`
	APIs []APIChange `json:"apis"`
	// Path is the storm path the step changes most: its API, failing
	// node, and the path's hops before and after.
	Path *StormPath `json:"path,omitempty"`
}

// StormPath is a path from a root to a failing node.
type StormPath struct {
	API     string    `json:"api"`
	Failing string    `json:"failing"`
	Before  []PathHop `json:"before"`
	After   []PathHop `json:"after"`
}

// PathHop is a node of a storm path: the requests it serves per root
// request, whether the call into it is retried, and its attempts per
// call (1 + R, 1 + min(R, B), or 1; none for the root).
type PathHop struct {
	Node     string  `json:"node"`
	Requests float64 `json:"requests"`
	Retried  bool    `json:"retried"`
	Attempts float64 `json:"attempts,omitempty"`
}

// Make plans the adoption of error ownership over mesh m.
func Make(m *Mesh, o Options) (*Plan, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	if !(o.Budget >= 0 && o.Budget <= 1) {
		return nil, fmt.Errorf("plan: retry budget B = %v: want a fraction between 0 and 1", o.Budget)
	}
	if o.Steps < 0 {
		return nil, fmt.Errorf("plan: steps %d: want 0 (all) or more", o.Steps)
	}
	e, err := newEngine(m, o)
	if err != nil {
		return nil, err
	}
	p := &Plan{Budget: o.Budget, Weights: e.weights, Fail: o.Fail, Services: len(m.Services), Speaking: []string{}, APIs: []APIFigures{}, Steps: []Step{}}
	for i, s := range e.speaks {
		if s.Owned() {
			p.Speaking = append(p.Speaking, m.Services[i])
		}
	}
	p.Cost = e.cost()
	for _, a := range e.apis {
		if len(a.scs) > 0 {
			p.APIs = append(p.APIs, APIFigures{API: a.name, Weight: a.w, Figures: a.fig})
		}
	}
	for o.Steps == 0 || len(p.Steps) < o.Steps {
		c := e.best()
		if c == nil {
			break
		}
		p.Steps = append(p.Steps, e.adopt(c, len(p.Steps)+1))
	}
	return p, nil
}

// edge is a kept edge of an API's model.
type edge struct {
	from, to int32
	calls, r float64
	open     bool // fail-open: its callee's failure does not fail its caller
}

// api is one API under evaluation.
type api struct {
	name    string
	w       float64
	nodes   []string
	svc     []int32
	root    int32
	order   []int32 // reachable nodes, parents first
	edges   []edge
	out, in [][]int32 // kept edges by node
	scs     []*scenario
	tBase   float64 // requests per root request with no retry
	fig     Figures
	mark    int // the step that last touched it
}

// scenario is one node of an API failing.
type scenario struct {
	api     *api
	f       int32
	p       float64 // cost weight (the API's weight included)
	pn      float64 // figure weight within the API
	fails   []bool  // the nodes that fail while f does
	hot     []int32 // retrying edges into failing nodes
	level   []int32 // by hot edge: its level above f
	touch   []int32 // the services of hot edges' ends
	l, t    float64
	radius  int32
	contrib []contrib
	mark    int
}

type contrib struct {
	cand int32
	d    float64
}

// cand is a candidate step: one service, or a pair along an edge.
type cand struct {
	a, b int32 // b < 0: a single service
	name string
	g    float64
	n    int32 // scenarios where it helps
	dead bool
}

func (c *cand) size() float64 {
	if c.b < 0 {
		return 1
	}
	return 2
}

type engine struct {
	m       *Mesh
	b       float64
	weights string
	adopted []bool
	speaks  []radius.Speaks
	apis    []*api
	cands   []*cand
	candIdx map[[2]int32]int32
	touch   [][]*scenario // by service
	f       []float64     // scratch
	step    int
}

func newEngine(m *Mesh, o Options) (*engine, error) {
	e := &engine{m: m, b: o.Budget, adopted: make([]bool, len(m.Services)), speaks: make([]radius.Speaks, len(m.Services)),
		candIdx: map[[2]int32]int32{}, touch: make([][]*scenario, len(m.Services))}
	copy(e.speaks, m.Speaks)
	for i, s := range e.speaks {
		if s.Owned() {
			e.adopted[i] = true
		}
	}
	var failSet map[string]bool
	if len(o.Fail) > 0 {
		failSet = map[string]bool{}
		for _, f := range o.Fail {
			failSet[f] = true
		}
	}
	for i := range m.APIs {
		e.apis = append(e.apis, e.newAPI(&m.APIs[i]))
	}
	if failSet != nil {
		e.weights = WeightsFail
		seen := map[string]bool{}
		for _, a := range e.apis {
			for _, v := range a.order {
				name, svc := a.nodes[v], m.Services[a.svc[v]]
				if failSet[name] || failSet[svc] {
					seen[name], seen[svc] = true, true
					e.addScenario(a, v, a.w)
				}
			}
		}
		for _, f := range o.Fail {
			if !seen[f] {
				return nil, fmt.Errorf("plan: fail %q is not a service or node of the plan's APIs", f)
			}
		}
	} else {
		e.weighObserved()
	}
	for _, a := range e.apis {
		e.normalise(a)
	}
	for _, a := range e.apis {
		for _, sc := range a.scs {
			e.refresh(sc)
		}
		a.fig = e.figures(a)
	}
	return e, nil
}

// weighObserved adds every reached node of every API as a failing node,
// weighed by the API's root requests × the node's observed owned-failure
// rate. In an API where no failure was seen, every node fails at the
// mean node rate of the APIs where failures were seen (1/nodes when none
// was seen anywhere): the plan still orders the adoption there, after the
// failures the fleet has.
func (e *engine) weighObserved() {
	rates := make([][]float64, len(e.apis))
	var sum float64
	var seen int
	for i, a := range e.apis {
		src := e.m.APIs[i].Failures
		if src == nil {
			continue
		}
		var s float64
		for _, v := range a.order {
			s += src[v]
		}
		if s > 0 {
			rates[i] = src
			sum += s / float64(len(a.order))
			seen++
		}
	}
	e.weights = WeightsObserved
	if seen == 0 {
		e.weights = WeightsUniform
	}
	for i, a := range e.apis {
		for _, v := range a.order {
			var p float64
			switch {
			case rates[i] != nil:
				p = rates[i][v]
			case seen > 0:
				p = sum / float64(seen)
			default:
				p = 1 / float64(len(a.order))
			}
			if p > 0 {
				e.addScenario(a, v, a.w*p)
			}
		}
	}
}

// newAPI prepares an API's model: its kept edges, in and out lists, and
// the order the root reaches its nodes in.
func (e *engine) newAPI(src *API) *api {
	m := src.Model
	order, kept, _ := m.Order() // checked
	n := len(m.Nodes)
	a := &api{name: src.Name, w: src.Weight, nodes: m.Nodes, svc: make([]int32, n), root: int32(m.Root),
		out: make([][]int32, n), in: make([][]int32, n)}
	for v, s := range m.Service {
		a.svc[v] = int32(s)
	}
	for i, me := range m.Edges {
		if !kept[i] {
			continue
		}
		c := me.Calls
		if c == 0 {
			c = 1
		}
		k := int32(len(a.edges))
		a.edges = append(a.edges, edge{from: int32(me.From), to: int32(me.To), calls: c, r: me.Retries, open: me.FailOpen})
		a.out[me.From] = append(a.out[me.From], k)
		a.in[me.To] = append(a.in[me.To], k)
	}
	a.order = make([]int32, len(order))
	for i, v := range order {
		a.order[i] = int32(v)
	}
	if len(e.f) < n {
		e.f = make([]float64, n)
	}
	f := e.f[:n]
	clear(f)
	f[a.root] = 1
	for _, v := range a.order {
		a.tBase += f[v]
		for _, k := range a.out[v] {
			f[a.edges[k].to] += f[v] * a.edges[k].calls
		}
	}
	return a
}

// addScenario adds node f of API a failing, with its cost weights.
func (e *engine) addScenario(a *api, f int32, p float64) {
	n := len(a.nodes)
	sc := &scenario{api: a, f: f, p: p, fails: make([]bool, n)}
	// The nodes that fail with f: f, and the callers of failing nodes over
	// fail-close edges. dist: the longest fail-close chain down to f.
	dist := make([]int32, n)
	for i := range dist {
		dist[i] = -1
	}
	sc.fails[f], dist[f] = true, 0
	for i := len(a.order) - 1; i >= 0; i-- {
		v := a.order[i]
		for _, k := range a.out[v] {
			ed := &a.edges[k]
			if sc.fails[ed.to] && !ed.open && dist[ed.to]+1 > dist[v] {
				sc.fails[v], dist[v] = true, dist[ed.to]+1
			}
		}
	}
	touched := map[int32]bool{}
	for k, ed := range a.edges {
		if sc.fails[ed.to] && ed.r > 0 {
			sc.hot = append(sc.hot, int32(k))
			sc.level = append(sc.level, dist[ed.to]+1)
			touched[a.svc[ed.from]], touched[a.svc[ed.to]] = true, true
		}
	}
	for s := range touched {
		sc.touch = append(sc.touch, s)
	}
	slices.Sort(sc.touch)
	for _, s := range sc.touch {
		e.touch[s] = append(e.touch[s], sc)
	}
	a.scs = append(a.scs, sc)
}
