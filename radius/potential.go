package radius

import (
	"slices"

	"github.com/stormradius/stormradius/graph"
)

// PotentialNode is a node of a per-API call graph as the potential radius
// sees it: how it answers errors, and the edges its callers reach it by.
type PotentialNode struct {
	// Speaks: at least half of the node's failed responses carried a valid
	// claim.
	Speaks bool
	// SeenPropagating: the node was seen propagating errors, and Propagated
	// is how it answered them (the majority; invalid counts as missing).
	SeenPropagating bool
	Propagated      graph.Claim
	// Callers are the edges into the node.
	Callers []PotentialEdge
}

// PotentialEdge is an edge from a caller node.
type PotentialEdge struct {
	From         int32
	RetryEnabled bool
	FailOpen     bool
}

// PotentialBudget is the work Potential allows itself, per answer, on the
// part of the search that is exponential in the worst case: the caller
// edges its walks may look at after stepping to a caller in the same
// strongly connected component as the node they leave (see
// PotentialBounded). Call graphs seen in practice have small cycles
// (self-calls, a→b→a recursion) and use a handful; 2^22 take some tens of
// milliseconds.
const PotentialBudget = 1 << 22

// Potential computes the potential radius of a call graph (docs/SPEC.md §4.5):
// every node is taken as a failing owner and every simple path is walked up
// to a root; a fail-open edge is the last level walked, and an edge whose
// caller is already on the walk (it closes a cycle; a self-call is one) is
// not walked at all. A level would retry when its edge is retry-enabled
// and the answer its caller sees is claimed or missing. withOwnership
// applies the claims nodes are seen to answer; without counts every
// retry-enabled level.
//
// The result is a property of the call graph alone. Recursion through one
// node can reach deeper than its graph shows (a self-call retried once has
// radius 1 but potential 0 here), so a report must floor it with the
// observed max radius. It is exact unless the graph's cycles need more
// than PotentialBudget steps, in which case it is a lower bound: see
// PotentialBounded.
func Potential(nodes []PotentialNode) (withOwnership, without int) {
	withOwnership, without, _ = PotentialBounded(nodes, PotentialBudget)
	return withOwnership, without
}

// PotentialBounded is Potential with an explicit budget: the number of
// caller edges, per answer, that walks may look at after stepping to a
// caller in the same strongly connected component as the node they leave.
// complete reports that neither search ran out of budget; when one did,
// its answer is the largest level found before it stopped, a lower bound
// of the exact figure.
//
// The longest simple path is NP-hard in general, so some bound is needed.
// The search makes the hard part as small as real graphs allow: a walk can
// only come back to a node of the strongly connected component (SCC) it is
// in, so once it steps into another SCC what it finds there depends on the
// node and its state alone (the answer it gives and whether a level below
// retried), never on the path below; those results are memoised. Only the
// simple paths inside one SCC are enumerated, pruned by a bound on the
// levels the SCC and the SCCs above it can still add, and by whether any
// level above could retry at all. On a DAG, or on any graph whose cycles
// are self-calls, the whole search is O(nodes + edges) (each node is
// entered in at most 8 states); inside an SCC of s nodes it may take up to
// s! steps, which the budget bounds: the total work is
// O(nodes + edges + budget).
func PotentialBounded(nodes []PotentialNode, budget int) (withOwnership, without int, complete bool) {
	w, okw := search(nodes, false, budget)
	wo, okwo := search(nodes, true, budget)
	return w, wo, okw && okwo
}

// Memo sentinel, distinct from none and from any level.
const unknown = none + 1

// potential is one potential-radius search over a call graph.
type potential struct {
	nodes []PotentialNode
	naive bool // every retry-enabled level retries, whatever the answer

	comp []int32 // SCC of each node
	size []int32 // nodes per SCC
	// exitMax per SCC: an upper bound on the levels a walk adds once it
	// leaves the SCC by an edge to a caller outside it (the edge's own
	// level included); 0 when the SCC has no outside caller. ub per SCC:
	// an upper bound on the levels of a walk that starts in it.
	exitMax []int32
	ub      []int32
	// canRetry[below] per node: a walk that reaches the node in that state
	// could still find a retrying level above it (see retryReach).
	canRetry [2][]bool
	// A walk inside an SCC can only find another level on an edge whose
	// two ends are off the path, or above an exit. For each state below:
	// retryIn per node, the callers whose edges into it would retry (the
	// answer of a node reached in a given state is fixed); retryOut per
	// node, its callees in its SCC whose edges from it would retry; live
	// per SCC, how many such edges into its nodes have neither end on the
	// path (self-calls never count: they are never walked); exitCan per
	// SCC, whether a fail-close edge leaves it for a caller that could
	// retry above.
	retryIn  [2][][]int32
	retryOut [2][][]int32
	live     [2][]int32
	exitCan  [2][]bool

	memo   []int32 // per node × answer (4) × some level below retried (2)
	onPath []bool
	budget int
	cut    bool // the budget ran out
}

func search(nodes []PotentialNode, naive bool, budget int) (int, bool) {
	p := &potential{nodes: nodes, naive: naive, budget: budget,
		memo: make([]int32, len(nodes)*8), onPath: make([]bool, len(nodes))}
	for i := range p.memo {
		p.memo[i] = unknown
	}
	p.components()
	p.retryReach()
	// Each owner's walk starts from the best level found so far, so that
	// it only explores what could beat it; the owner's own result is not
	// memoised (it is not exact), what it finds above its SCC is.
	best := int32(0)
	for n := range nodes {
		if p.ub[p.comp[n]] <= best {
			continue
		}
		ans := graph.ClaimMissing
		if nodes[n].Speaks && !naive {
			ans = graph.ClaimClaimed // an owner that speaks claims claims
		}
		p.push(int32(n))
		best = p.walk(int32(n), ans, false, 0, 1, best)
		p.pop(int32(n))
	}
	// Reaching the most levels any walk could find makes the answer
	// exact whatever was cut.
	return int(best), !p.cut || best >= slices.Max(append(p.ub, 0))
}

// enter returns the largest level above node n that would retry (level 1
// is the edge into n), given the answer n gives its callers and whether
// some level below already retried, over the simple walks that start at n
// with no other node of n's SCC on the path; none when no level would.
// Nodes of other SCCs below n can never be reached from n, so the result
// does not depend on the path below and is memoised.
func (p *potential) enter(n int32, answer graph.Claim, below bool) int32 {
	k := int(n)*8 + int(answer&3)*2
	if below {
		k++
	}
	if p.memo[k] != unknown {
		return p.memo[k]
	}
	p.push(n)
	best := p.walk(n, answer, below, 0, 1, none)
	p.pop(n)
	p.memo[k] = best
	return best
}

// walk extends a walk that reached node v at depth d (the edge into v is
// level d+1) with k nodes of v's SCC on the path, and returns the largest
// retrying level found, at least best.
func (p *potential) walk(v int32, answer graph.Claim, below bool, d, k, best int32) int32 {
	s := p.comp[v]
	for _, e := range p.nodes[v].Callers {
		// Each level from here on needs a new caller: one of the SCC's
		// nodes not yet on the path, or a way out of the SCC.
		if d+(p.size[s]-k)+p.exitMax[s] <= best {
			return best
		}
		if p.onPath[e.From] {
			continue // closes a cycle (a self-call included): not walked
		}
		retry := e.RetryEnabled && (p.naive || answer == graph.ClaimClaimed || answer == graph.ClaimMissing)
		if retry {
			best = max(best, d+1)
		}
		if e.FailOpen {
			continue // the caller absorbs the error: last level walked
		}
		b := below || retry
		bi := b2i(b)
		if !p.canRetry[bi][e.From] {
			continue // nothing above would retry
		}
		ans := p.answer(e.From, b)
		if p.comp[e.From] != s {
			if g := p.enter(e.From, ans, b); g != none {
				best = max(best, d+1+g)
			}
			continue
		}
		if p.live[bi][s] == 0 && !p.exitCan[bi][s] {
			continue // every level left in the SCC is behind the walk
		}
		// Charge the edges the step will look at before taking it.
		x := e.From
		if cost := 1 + len(p.nodes[x].Callers) + len(p.retryOut[0][x]) + len(p.retryOut[1][x]); p.budget >= cost {
			p.budget -= cost
		} else {
			p.cut = true
			continue
		}
		p.push(e.From)
		best = p.walk(e.From, ans, b, d+1, k+1, best)
		p.pop(e.From)
	}
	return best
}

// push puts node v on the walk: the retrying edges into and out of it
// whose other end is off the path are no longer live. A caller outside
// v's SCC is never on the path (it cannot reach down to the path).
func (p *potential) push(v int32) {
	p.onPath[v] = true
	p.relive(v, -1)
}

// pop takes node v off the walk again.
func (p *potential) pop(v int32) {
	p.onPath[v] = false
	p.relive(v, +1)
}

func (p *potential) relive(v int32, delta int32) {
	c := p.comp[v]
	for b := range p.live {
		for _, u := range p.retryIn[b][v] {
			if !p.onPath[u] {
				p.live[b][c] += delta
			}
		}
		for _, w := range p.retryOut[b][v] {
			if !p.onPath[w] {
				p.live[b][c] += delta
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// answer returns how node n answers an error it propagates.
func (p *potential) answer(n int32, below bool) graph.Claim {
	if p.naive {
		return graph.ClaimMissing
	}
	node := &p.nodes[n]
	switch {
	case !node.Speaks:
		return graph.ClaimMissing
	case node.SeenPropagating && node.Propagated == graph.ClaimInvalid:
		return graph.ClaimMissing // an invalid claim is treated as missing (docs/SPEC.md §2)
	case node.SeenPropagating:
		return node.Propagated
	case below:
		return graph.ClaimUnclaimed
	}
	return graph.ClaimClaimed
}

// components finds the strongly connected components of the graph
// (Tarjan's algorithm, over caller edges) and the exitMax bound of each.
// Tarjan's algorithm completes an SCC only after every SCC it reaches, so
// the SCCs of a component's callers are complete, with their bounds, when
// it is.
func (p *potential) components() {
	n := len(p.nodes)
	p.comp = make([]int32, n)
	index := make([]int32, n) // 0: not visited; else visit order + 1
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	next := int32(1)
	var visit func(v int32)
	visit = func(v int32) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range p.nodes[v].Callers {
			switch w := e.From; {
			case index[w] == 0:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		// v roots an SCC: its members are v and the nodes above v on the
		// stack.
		c := int32(len(p.size))
		at := len(stack) - 1
		for stack[at] != v {
			at--
		}
		members := stack[at:]
		for _, w := range members {
			onStack[w] = false
			p.comp[w] = c
		}
		var exit int32
		for _, w := range members {
			for _, e := range p.nodes[w].Callers {
				if oc := p.comp[e.From]; oc != c {
					exit = max(exit, 1+p.ub[oc])
				}
			}
		}
		size := int32(len(members))
		stack = stack[:at]
		p.size = append(p.size, size)
		p.exitMax = append(p.exitMax, exit)
		p.ub = append(p.ub, size-1+exit)
	}
	for v := range p.nodes {
		if index[v] == 0 {
			visit(int32(v))
		}
	}
}

// retryReach sets canRetry, retryIn, retryOut, live and exitCan. Along a walk, the state below only ever
// turns from false to true, and for a given below the answer of every node
// but the owner is fixed, so whether the edge into a node would retry does
// not depend on the path. A node can find a retrying level above it when
// such an edge is into it or into a node it reaches by walked (fail-close)
// edges in the same state; a walk in state false that meets a retrying
// edge has found its level already, so the two states need no mixing. The
// simple-path rule is ignored: canRetry only prunes walks that cannot find
// a retrying level.
func (p *potential) retryReach() {
	n := len(p.nodes)
	callees := make([][]int32, n)
	for v := range p.nodes {
		for _, e := range p.nodes[v].Callers {
			if !e.FailOpen {
				callees[e.From] = append(callees[e.From], int32(v))
			}
		}
	}
	var queue []int32
	for b, below := range [2]bool{false, true} {
		can := make([]bool, n)
		in, out := make([][]int32, n), make([][]int32, n)
		live := make([]int32, len(p.size))
		for v := range p.nodes {
			ans := p.answer(int32(v), below)
			for _, e := range p.nodes[v].Callers {
				if !e.RetryEnabled || !(p.naive || ans == graph.ClaimClaimed || ans == graph.ClaimMissing) {
					continue
				}
				if !can[v] {
					can[v] = true
					queue = append(queue, int32(v))
				}
				if e.From == int32(v) {
					continue
				}
				in[v] = append(in[v], e.From)
				live[p.comp[v]]++
				if p.comp[e.From] == p.comp[v] {
					out[e.From] = append(out[e.From], int32(v))
				}
			}
		}
		p.retryIn[b], p.retryOut[b], p.live[b] = in, out, live
		for len(queue) > 0 {
			u := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			for _, v := range callees[u] {
				if !can[v] {
					can[v] = true
					queue = append(queue, v)
				}
			}
		}
		p.canRetry[b] = can
		exit := make([]bool, len(p.size))
		for v := range p.nodes {
			for _, e := range p.nodes[v].Callers {
				if c := p.comp[v]; !e.FailOpen && p.comp[e.From] != c && can[e.From] {
					exit[c] = true
				}
			}
		}
		p.exitCan[b] = exit
	}
}
