package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stormradius/stormradius/radius"
)

// none is "no second service" in a candidate, and "no candidate" in eval.
var none = [2]int32{-1, -1}

// speaksWith returns what service s does with the services of x adopted
// on top of the plan so far.
func (e *engine) speaksWith(s int32, x [2]int32) radius.Speaks {
	if s == x[0] || s == x[1] {
		return radius.Speaks{Claims: true, Honours: true}
	}
	return e.speaks[s]
}

// factor returns the factor of hot edge k of sc's API, with x adopted too.
func (e *engine) factor(sc *scenario, k int32, x [2]int32) float64 {
	a := sc.api
	ed := &a.edges[k]
	return radius.Factor(ed.r, e.b, ed.to == sc.f, e.speaksWith(a.svc[ed.from], x), e.speaksWith(a.svc[ed.to], x))
}

// eval returns the requests f serves and the requests every node serves,
// per root request, while sc's node fails, with x adopted too. e.f holds
// the requests by node afterwards.
func (e *engine) eval(sc *scenario, x [2]int32) (l, t float64) {
	a := sc.api
	f := e.f[:len(a.nodes)]
	clear(f)
	f[a.root] = 1
	for _, v := range a.order {
		t += f[v]
		for _, k := range a.out[v] {
			ed := &a.edges[k]
			m := 1.0
			if sc.fails[ed.to] && ed.r > 0 {
				m = e.factor(sc, k, x)
			}
			f[ed.to] += f[v] * ed.calls * m
		}
	}
	return f[sc.f], t
}

// radiusOf returns sc's storm radius with x adopted too: the highest
// level of a hot edge that retries.
func (e *engine) radiusOf(sc *scenario, x [2]int32) int32 {
	var r int32
	for i, k := range sc.hot {
		if sc.level[i] > r && e.factor(sc, k, x) > 1 {
			r = sc.level[i]
		}
	}
	return r
}

// candidates returns the steps that could change sc: every service of
// its hot edges not yet adopted, and the pairs along a hot edge into a
// node that propagates the failure whose caller does not honour claims
// and whose callee does not send them (only both together stop it).
func (e *engine) candidates(sc *scenario, dst [][2]int32) [][2]int32 {
	for _, s := range sc.touch {
		if !e.adopted[s] && !e.virtual(s) {
			dst = append(dst, [2]int32{s, -1})
		}
	}
	a := sc.api
	for _, k := range sc.hot {
		ed := &a.edges[k]
		u, v := a.svc[ed.from], a.svc[ed.to]
		if ed.to == sc.f || u == v || e.adopted[u] || e.adopted[v] || e.speaks[u].Honours || e.speaks[v].Claims || e.virtual(u) || e.virtual(v) {
			continue
		}
		dst = append(dst, [2]int32{min(u, v), max(u, v)})
	}
	return dst
}

// virtual reports whether service s is an uninstrumented callee.
func (e *engine) virtual(s int32) bool { return e.m.Virtual != nil && e.m.Virtual[s] }

// refresh evaluates sc again under the plan so far, and what every
// candidate would gain in it.
func (e *engine) refresh(sc *scenario) {
	for _, c := range sc.contrib {
		cd := e.cands[c.cand]
		cd.g -= c.d
		if cd.n--; cd.n == 0 {
			cd.g = 0
		}
	}
	sc.contrib = sc.contrib[:0]
	sc.l, sc.t = e.eval(sc, none)
	sc.radius = e.radiusOf(sc, none)
	c0 := sc.l + sc.t
	var buf [32][2]int32
	xs := e.candidates(sc, buf[:0])
	slices.SortFunc(xs, func(x, y [2]int32) int {
		if x[0] != y[0] {
			return int(x[0] - y[0])
		}
		return int(x[1] - y[1])
	})
	for _, x := range slices.Compact(xs) {
		i, ok := e.candIdx[x]
		l, t := e.eval(sc, x)
		d := c0 - (l + t)
		if !(d > 1e-12*c0) || sc.p == 0 {
			continue
		}
		if !ok {
			i = int32(len(e.cands))
			e.candIdx[x] = i
			e.cands = append(e.cands, &cand{a: x[0], b: x[1], name: e.candName(x)})
		}
		cd := e.cands[i]
		cd.g += sc.p * d
		cd.n++
		sc.contrib = append(sc.contrib, contrib{cand: i, d: sc.p * d})
	}
}

func (e *engine) candName(x [2]int32) string {
	if x[1] < 0 {
		return e.m.Services[x[0]]
	}
	return e.m.Services[x[0]] + " + " + e.m.Services[x[1]]
}

// normalise sets the figure weights of a's scenarios: their cost weights
// as shares of the API's total.
func (e *engine) normalise(a *api) {
	var sum float64
	for _, sc := range a.scs {
		sum += sc.p
	}
	for _, sc := range a.scs {
		if sum > 0 {
			sc.pn = sc.p / sum
		}
	}
}

// figures returns a's figures under the plan so far.
func (e *engine) figures(a *api) Figures {
	var f Figures
	for _, sc := range a.scs {
		if sc.pn == 0 {
			continue
		}
		f.MaxRadius = max(f.MaxRadius, int(sc.radius))
		f.MeanRadius += sc.pn * float64(sc.radius)
		f.Load += sc.pn * sc.l
		f.Spurious += sc.pn * (sc.t - a.tBase)
	}
	f.MeanRadius = radius.Round9(f.MeanRadius)
	f.Load = radius.Round9(f.Load)
	f.Spurious = radius.Round9(max(f.Spurious, 0))
	return f
}

// cost returns the plan's cost so far, in the weights it is judged by.
func (e *engine) cost() float64 {
	var c float64
	for _, a := range e.apis {
		for _, sc := range a.scs {
			c += sc.p * (sc.l + sc.t - a.tBase)
		}
	}
	return radius.Round9(c)
}

// near reports whether x and y are equal but for rounding.
func near(x, y float64) bool {
	return math.Abs(x-y) <= 1e-9*max(math.Abs(x), math.Abs(y))
}

// better reports whether candidate c beats d: more gain per service
// adopted, then the name.
func better(c, d *cand) bool {
	if cg, dg := c.g/c.size(), d.g/d.size(); !near(cg, dg) {
		return cg > dg
	}
	return c.name < d.name
}

// best returns the candidate to adopt next, nil when none helps.
func (e *engine) best() *cand {
	var b *cand
	for _, c := range e.cands {
		if c.dead || c.n == 0 || e.adopted[c.a] || (c.b >= 0 && e.adopted[c.b]) {
			continue
		}
		if b == nil || better(c, b) {
			b = c
		}
	}
	return b
}

// adopt takes step c: its services adopt ownership; the scenarios they
// touch are evaluated again.
func (e *engine) adopt(c *cand, n int) Step {
	e.step++
	x := [2]int32{c.a, c.b}
	st := Step{Step: n, Services: []string{e.m.Services[c.a]}, Together: c.b >= 0, APIs: []APIChange{}}
	if c.b >= 0 {
		st.Services = append(st.Services, e.m.Services[c.b])
	}
	why := e.whyScenario(c)
	var path *StormPath
	if why != nil {
		st.Why, path = e.explain(why, x, c.b >= 0), e.path(why, x)
	}
	var touched []*scenario
	var apis []*api
	for _, s := range x {
		if s < 0 {
			continue
		}
		for _, sc := range e.touch[s] {
			if sc.mark != e.step {
				sc.mark = e.step
				touched = append(touched, sc)
			}
			if sc.api.mark != e.step {
				sc.api.mark = e.step
				apis = append(apis, sc.api)
			}
		}
	}
	before := e.cost()
	for _, s := range x {
		if s >= 0 {
			e.adopted[s] = true
			e.speaks[s] = radius.Speaks{Claims: true, Honours: true}
		}
	}
	c.dead = true
	for _, sc := range touched {
		e.refresh(sc)
	}
	for _, a := range apis {
		f := e.figures(a)
		if f != a.fig {
			st.APIs = append(st.APIs, APIChange{API: a.name, Before: a.fig, After: f})
			a.fig = f
		}
	}
	sortChanges(st.APIs)
	st.Cost = e.cost()
	st.Gain = radius.Round9(before - st.Cost)
	st.Path = path
	return st
}

// whyScenario returns the scenario where c gains most.
func (e *engine) whyScenario(c *cand) *scenario {
	i := e.candIdx[[2]int32{c.a, c.b}]
	var best *scenario
	var bd float64
	for _, s := range []int32{c.a, c.b} {
		if s < 0 {
			continue
		}
		for _, sc := range e.touch[s] {
			for _, ct := range sc.contrib {
				if ct.cand != i {
					continue
				}
				if best == nil || ct.d > bd && !near(ct.d, bd) {
					best, bd = sc, ct.d
				}
			}
		}
	}
	return best
}

// explain says in one line why adopting x helps in sc: the edge whose
// retries change most, and the load on the failing node before and after.
func (e *engine) explain(sc *scenario, x [2]int32, together bool) string {
	a := sc.api
	l0, _ := e.eval(sc, none)
	req := append([]float64(nil), e.f[:len(a.nodes)]...)
	l1, _ := e.eval(sc, x)
	var what string
	var most float64
	for _, k := range sc.hot {
		f0, f1 := e.factor(sc, k, none), e.factor(sc, k, x)
		ed := &a.edges[k]
		if d := req[ed.from] * ed.calls * (f0 - f1); f1 < f0 && d > most {
			most = d
			if f1 == 1 {
				what = fmt.Sprintf("%s stops retrying %s: %s answers unclaimed and %s honours it", e.m.Services[a.svc[ed.from]], a.nodes[ed.to], e.m.Services[a.svc[ed.to]], e.m.Services[a.svc[ed.from]])
			} else {
				what = fmt.Sprintf("%s retries %s within the budget (%s → %s attempts per call)", e.m.Services[a.svc[ed.from]], a.nodes[ed.to], fmtNum(f0), fmtNum(f1))
			}
		}
	}
	if together {
		what += " (neither helps alone)"
	}
	return fmt.Sprintf("%s, while %s fails: %s; %s serves %s → %s requests per root request",
		a.name, a.nodes[sc.f], what, a.nodes[sc.f], fmtNum(radius.Round9(l0)), fmtNum(radius.Round9(l1)))
}

// path returns sc's heaviest path from the root to the failing node (at
// every node, the call that brings it most requests), before and after x.
func (e *engine) path(sc *scenario, x [2]int32) *StormPath {
	a := sc.api
	p := &StormPath{API: a.name, Failing: a.nodes[sc.f]}
	e.eval(sc, none)
	req := append([]float64(nil), e.f[:len(a.nodes)]...)
	nodes := []int32{sc.f}
	into := []int32{-1}
	for v := sc.f; v != a.root; {
		best, bw := int32(-1), -1.0
		for _, k := range a.in[v] {
			ed := &a.edges[k]
			if w := req[ed.from] * ed.calls * e.edgeFactor(sc, k, none); w > bw {
				best, bw = k, w
			}
		}
		if best < 0 || len(nodes) > len(a.nodes) {
			break
		}
		into[len(into)-1] = best
		v = a.edges[best].from
		nodes, into = append(nodes, v), append(into, -1)
	}
	for _, y := range [][2]int32{none, x} {
		e.eval(sc, y)
		hops := make([]PathHop, 0, len(nodes))
		for i := len(nodes) - 1; i >= 0; i-- {
			h := PathHop{Node: a.nodes[nodes[i]], Requests: radius.Round9(e.f[nodes[i]])}
			if k := into[i]; k >= 0 {
				f := e.edgeFactor(sc, k, y)
				h.Retried, h.Attempts = f > 1, radius.Round9(f)
			}
			hops = append(hops, h)
		}
		if y == none {
			p.Before = hops
		} else {
			p.After = hops
		}
	}
	return p
}

// edgeFactor is factor for any kept edge: 1 where the callee does not
// fail or the edge does not retry.
func (e *engine) edgeFactor(sc *scenario, k int32, x [2]int32) float64 {
	ed := &sc.api.edges[k]
	if !sc.fails[ed.to] || ed.r == 0 {
		return 1
	}
	return e.factor(sc, k, x)
}

func sortChanges(c []APIChange) {
	slices.SortFunc(c, func(x, y APIChange) int { return strings.Compare(x.API, y.API) })
}

// fmtNum prints a figure with up to 4 significant digits.
func fmtNum(x float64) string { return fmt.Sprintf("%.4g", x) }
