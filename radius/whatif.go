package radius

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Policy is a retry policy of the what-if model (docs/SPEC.md §4.7).
type Policy uint8

// Retry policies.
const (
	// Naive: every level retries R times.
	Naive Policy = iota
	// Budget: every level retries, at most a fraction B of its requests.
	Budget
	// Ownership: only the edge into the failing node retries, within B.
	Ownership
)

var policyNames = [...]string{"naive", "budget", "ownership"}

// String returns the policy's name.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "naive"
}

// ParsePolicy parses "naive", "budget" or "ownership".
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if strings.EqualFold(s, n) {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown retry policy %q (want naive, budget or ownership)", s)
}

// Model is a call graph for the what-if model: nodes, the edges between
// them and the root that receives the requests.
type Model struct {
	Nodes []string
	Edges []ModelEdge
	Root  int
	// Service maps each node to its service, an index into Speaks and
	// Scenario.Adopted: the unit that adopts error ownership. Read only
	// by a per-service scenario (Scenario.Adopted set); nil there means
	// every node is a service of its own.
	Service []int
	// Speaks is what each service does with the claim protocol today
	// (learned from its spans); nil means none speaks it.
	Speaks []Speaks
}

// Speaks is what a service does with the claim protocol.
type Speaks struct {
	// Claims: it answers a failure it only propagates as unclaimed (and
	// one it originates as claimed or with no claim).
	Claims bool `json:"claims"`
	// Honours: it does not retry an unclaimed answer.
	Honours bool `json:"honours"`
}

// Owned reports whether the service speaks the protocol both ways: as
// the ownership middleware does, so its retries keep within the budget.
func (s Speaks) Owned() bool { return s.Claims && s.Honours }

// ModelEdge is a dependency in a Model.
type ModelEdge struct {
	From, To int
	// Calls is how many calls From makes to To per request it serves
	// (0 means 1); finite.
	Calls float64
	// Retries is the edge's own R; negative means "use the scenario's R".
	// Finite.
	Retries  float64
	FailOpen bool
}

// ChainModel returns the chain names[0] → names[1] → … with one call per
// request on every edge.
func ChainModel(names []string) *Model {
	m := &Model{Nodes: names}
	for i := 1; i < len(names); i++ {
		m.Edges = append(m.Edges, ModelEdge{From: i - 1, To: i, Retries: -1})
	}
	return m
}

// Scenario is a what-if question: which nodes fail persistently, and the
// retry behaviour.
type Scenario struct {
	Failing []bool // by node
	// Retries is R, the retries per hop: finite, ≥ 0.
	Retries float64
	// Budget is B, the fraction of its requests a level may retry: between
	// 0 and 1 (checked under every policy, used by budget and ownership).
	Budget float64
	Policy Policy
	// Adopted, when not nil, makes the scenario per service (Policy is
	// then not read): by service (Model.Service), whether the service
	// adopts error ownership. An adopted service claims and honours
	// claims; every other one does what Model.Speaks says it does today.
	// See Factor for what an edge then does.
	Adopted []bool
}

// Factor is the per-service what-if rule (docs/PLANNER.md): the factor by
// which an edge multiplies the requests it carries to a callee that fails,
// with r the edge's retries. The caller retries r times, or min(r, b)
// when it speaks the protocol both ways (the middleware's budget) — unless
// the callee only propagates the failure (origin false), answers it
// unclaimed and the caller honours that: then it does not retry. The edge
// into the node where the failure starts always retries: its answer is
// claimed, or carries no claim.
func Factor(r, b float64, origin bool, caller, callee Speaks) float64 {
	if !origin && callee.Claims && caller.Honours {
		return 1
	}
	if caller.Owned() {
		r = min(r, b)
	}
	return 1 + r
}

// ErrOverflow is the error Requests wraps when a node would serve more
// requests per root request than a float64 holds (about 1.8e308), as 1001
// attempts per level over 200 levels would.
var ErrOverflow = errors.New("requests overflow")

// Requests returns the requests each node serves per request at the root
// while the failing nodes fail persistently (docs/SPEC.md §4.7): every retrying
// level multiplies the requests below it by 1+R (naive), 1+min(R,B)
// (budget), and under ownership only edges into a failing node do, by
// 1+min(R,B). A node fails when it is failing or a fail-close callee of it
// fails; edges into failing nodes are retrying levels. Values are rounded
// to 9 decimal places, so that 1.1³ reads 1.331. Edges closing a cycle
// (see Kept) are ignored; nodes the root does not reach serve 0.
//
// Inputs that are NaN, infinite or out of range are errors that name them;
// a node whose requests exceed float64 is an error wrapping ErrOverflow
// that names the highest such node.
func (m *Model) Requests(s Scenario) ([]float64, error) {
	out, err := m.check()
	if err != nil {
		return nil, err
	}
	n := len(m.Nodes)
	if len(s.Failing) != n {
		return nil, fmt.Errorf("%d failing flags for %d nodes", len(s.Failing), n)
	}
	if math.IsNaN(s.Retries) || math.IsInf(s.Retries, 0) || s.Retries < 0 {
		return nil, fmt.Errorf("retries per hop R = %v: want a finite number ≥ 0", s.Retries)
	}
	if !(s.Budget >= 0 && s.Budget <= 1) { // NaN fails both
		return nil, fmt.Errorf("retry budget B = %v: want a fraction between 0 and 1", s.Budget)
	}
	speaks, err := m.speaks(s)
	if err != nil {
		return nil, err
	}
	order, dag := m.topo(out)
	fails := make([]bool, n)
	for k := len(order) - 1; k >= 0; k-- {
		v := order[k]
		fails[v] = s.Failing[v]
		for _, ei := range out[v] {
			e := m.Edges[ei]
			if dag[ei] && !e.FailOpen && fails[e.To] {
				fails[v] = true
			}
		}
	}
	req := make([]float64, n)
	req[m.Root] = 1
	for _, v := range order {
		for _, ei := range out[v] {
			if !dag[ei] {
				continue
			}
			e := m.Edges[ei]
			calls := e.Calls
			if calls == 0 {
				calls = 1
			}
			f := 1.0
			if speaks != nil {
				if fails[e.To] {
					f = Factor(m.retries(e, s), s.Budget, s.Failing[e.To], speaks[m.service(e.From)], speaks[m.service(e.To)])
				}
			} else {
				f = m.multiplier(e, s, fails)
			}
			req[e.To] += req[v] * calls * f
		}
	}
	for _, v := range order {
		if math.IsInf(req[v], 0) {
			return nil, fmt.Errorf("%w: more than %.2g requests per root request at %q", ErrOverflow, math.MaxFloat64, m.Nodes[v])
		}
	}
	for i := range req {
		req[i] = Round9(req[i])
	}
	return req, nil
}

// Round9 rounds x to 9 decimal places, as Requests rounds its figures. From 2^53/1e9 (about 9e6) up, a
// float64 holds nothing finer than that, and x·1e9 would only add rounding
// error (or overflow), so x is returned as it is.
func Round9(x float64) float64 {
	if math.Abs(x) >= (1<<53)/1e9 {
		return x
	}
	return math.Round(x*1e9) / 1e9
}

// check validates the model and returns the edges out of each node.
func (m *Model) check() ([][]int, error) {
	n := len(m.Nodes)
	if m.Root < 0 || m.Root >= n {
		return nil, fmt.Errorf("root %d out of range (%d nodes)", m.Root, n)
	}
	out := make([][]int, n)
	for i, e := range m.Edges {
		if e.From < 0 || e.From >= n || e.To < 0 || e.To >= n {
			return nil, fmt.Errorf("edge %d (%d → %d) out of range (%d nodes)", i, e.From, e.To, n)
		}
		if math.IsNaN(e.Calls) || math.IsInf(e.Calls, 0) || e.Calls < 0 {
			return nil, fmt.Errorf("edge %s → %s: calls per request %v: want a finite number ≥ 0", m.Nodes[e.From], m.Nodes[e.To], e.Calls)
		}
		if math.IsNaN(e.Retries) || math.IsInf(e.Retries, 0) {
			return nil, fmt.Errorf("edge %s → %s: retries %v: want a finite number", m.Nodes[e.From], m.Nodes[e.To], e.Retries)
		}
		out[e.From] = append(out[e.From], i)
	}
	return out, nil
}

// Kept reports, per edge, whether Requests follows it: the edges out of
// nodes the root reaches, except those that close a cycle on a
// depth-first walk from the root (each node's edges taken in order).
// Requests a node serves through an edge that is not kept (recursion, say)
// are not in the model, so callers that derive Calls from observed traffic
// count, for the caller, only the requests it serves as the root or
// through kept edges.
func (m *Model) Kept() ([]bool, error) {
	_, kept, err := m.Order()
	return kept, err
}

// Order returns the nodes the root reaches, every node after all its
// callers over kept edges (the order Requests evaluates them in), and
// which edges are kept (see Kept).
func (m *Model) Order() (order []int, kept []bool, err error) {
	out, err := m.check()
	if err != nil {
		return nil, nil, err
	}
	order, kept = m.topo(out)
	return order, kept, nil
}

// retries returns the edge's R: its own, or the scenario's.
func (m *Model) retries(e ModelEdge, s Scenario) float64 {
	if e.Retries < 0 {
		return s.Retries
	}
	return e.Retries
}

// service returns node v's service (Model.Service; v itself without).
func (m *Model) service(v int) int {
	if m.Service == nil {
		return v
	}
	return m.Service[v]
}

// speaks returns, for a per-service scenario, what every service does in
// it (adopted ones claim and honour), or nil for a whole-graph policy.
func (m *Model) speaks(s Scenario) ([]Speaks, error) {
	if s.Adopted == nil {
		return nil, nil
	}
	n := len(m.Nodes)
	services := n
	if m.Service != nil {
		if len(m.Service) != n {
			return nil, fmt.Errorf("%d node services for %d nodes", len(m.Service), n)
		}
		services = 0
		for i, x := range m.Service {
			if x < 0 {
				return nil, fmt.Errorf("node %q: service %d out of range", m.Nodes[i], x)
			}
			services = max(services, x+1)
		}
	}
	if len(s.Adopted) < services {
		return nil, fmt.Errorf("%d adoption flags for %d services", len(s.Adopted), services)
	}
	if m.Speaks != nil && len(m.Speaks) < services {
		return nil, fmt.Errorf("%d service behaviours for %d services", len(m.Speaks), services)
	}
	out := make([]Speaks, len(s.Adopted))
	for i, a := range s.Adopted {
		if a {
			out[i] = Speaks{Claims: true, Honours: true}
		} else if i < len(m.Speaks) {
			out[i] = m.Speaks[i]
		}
	}
	return out, nil
}

func (m *Model) multiplier(e ModelEdge, s Scenario, fails []bool) float64 {
	r := m.retries(e, s)
	switch s.Policy {
	case Naive:
		if fails[e.To] {
			return 1 + r
		}
	case Budget:
		if fails[e.To] {
			return 1 + min(r, s.Budget)
		}
	case Ownership:
		if s.Failing[e.To] {
			return 1 + min(r, s.Budget)
		}
	}
	return 1
}

// topo returns the nodes reachable from the root, parents first, and which
// edges are kept (those out of reachable nodes that do not close a cycle).
func (m *Model) topo(out [][]int) ([]int, []bool) {
	n := len(m.Nodes)
	dag := make([]bool, len(m.Edges))
	state := make([]uint8, n) // 0 new, 1 on stack, 2 done
	post := make([]int, 0, n)
	type frame struct{ v, next int }
	stack := []frame{{m.Root, 0}}
	state[m.Root] = 1
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next == len(out[f.v]) {
			state[f.v] = 2
			post = append(post, f.v)
			stack = stack[:len(stack)-1]
			continue
		}
		ei := out[f.v][f.next]
		f.next++
		to := m.Edges[ei].To
		switch state[to] {
		case 0:
			dag[ei] = true
			state[to] = 1
			stack = append(stack, frame{to, 0})
		case 2:
			dag[ei] = true // a cross or forward edge: no cycle
		}
	}
	for i, j := 0, len(post)-1; i < j; i, j = i+1, j-1 {
		post[i], post[j] = post[j], post[i]
	}
	return post, dag
}

// ErrorRateAfterRetries returns the error rate a caller sees after one
// retry within budget b, when the callee fails independently at rate p
// (docs/SPEC.md §4.7): p − min(p, b) + min(p, b)·p.
func ErrorRateAfterRetries(p, b float64) float64 {
	m := min(p, b)
	return p - m + m*p
}

// NaiveMisattribution returns the fraction of an owner's own errors that an
// attributor without failure memory blames on fail-open dependencies
// failing independently at rates q: 1 − Π(1 − q_i).
func NaiveMisattribution(q ...float64) float64 {
	ok := 1.0
	for _, x := range q {
		ok *= 1 - x
	}
	return 1 - ok
}
