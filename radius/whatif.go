package radius

import (
	"fmt"
	"math"
	"strings"
)

// Policy is a retry policy of the what-if model (SPEC §4.7).
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
}

// ModelEdge is a dependency in a Model.
type ModelEdge struct {
	From, To int
	// Calls is how many calls From makes to To per request it serves
	// (0 means 1).
	Calls float64
	// Retries is the edge's own R; negative means "use the scenario's R".
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
	Retries float64
	Budget  float64
	Policy  Policy
}

// Requests returns the requests each node serves per request at the root
// while the failing nodes fail persistently (SPEC §4.7): every retrying
// level multiplies the requests below it by 1+R (naive), 1+min(R,B)
// (budget), and under ownership only edges into a failing node do, by
// 1+min(R,B). A node fails when it is failing or a fail-close callee of it
// fails; edges into failing nodes are retrying levels. Values are rounded
// to 9 decimal places, so that 1.1³ reads 1.331. Edges closing a cycle are
// ignored.
func (m *Model) Requests(s Scenario) ([]float64, error) {
	n := len(m.Nodes)
	if m.Root < 0 || m.Root >= n {
		return nil, fmt.Errorf("whatif: root %d out of range", m.Root)
	}
	if len(s.Failing) != n {
		return nil, fmt.Errorf("whatif: %d failing flags for %d nodes", len(s.Failing), n)
	}
	if s.Retries < 0 || s.Budget < 0 || math.IsNaN(s.Retries) || math.IsNaN(s.Budget) {
		return nil, fmt.Errorf("whatif: retries and budget must be non-negative")
	}
	out := make([][]int, n)
	for i, e := range m.Edges {
		if e.From < 0 || e.From >= n || e.To < 0 || e.To >= n {
			return nil, fmt.Errorf("whatif: edge %d out of range", i)
		}
		out[e.From] = append(out[e.From], i)
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
			req[e.To] += req[v] * calls * m.multiplier(e, s, fails)
		}
	}
	for i := range req {
		req[i] = math.Round(req[i]*1e9) / 1e9
	}
	return req, nil
}

func (m *Model) multiplier(e ModelEdge, s Scenario, fails []bool) float64 {
	r := e.Retries
	if r < 0 {
		r = s.Retries
	}
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
// edges are kept (those that do not close a cycle).
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
// (SPEC §4.7): p − min(p, b) + min(p, b)·p.
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
