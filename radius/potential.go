package radius

import "github.com/stormradius/stormradius/graph"

// PotentialNode is a node of a per-API call graph as the potential radius
// sees it: how it answers errors, and the edges its callers reach it by.
type PotentialNode struct {
	// Speaks: at least half of the node's failed responses carried a valid
	// claim.
	Speaks bool
	// SeenPropagating: the node was seen propagating errors, and Propagated
	// is how it answered them (the majority).
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

// Potential computes the potential radius of a call graph (SPEC §4.5):
// every node is taken as a failing owner and every path is walked up to the
// root; a fail-open edge is the last level walked. A level would retry when
// its edge is retry-enabled and the answer its caller sees is claimed or
// missing. withOwnership applies the claims nodes are seen to answer;
// without counts every retry-enabled level. Cycles are not walked around:
// a node already on the walk ends it.
func Potential(nodes []PotentialNode) (withOwnership, without int) {
	return walkAll(nodes, false), walkAll(nodes, true)
}

func walkAll(nodes []PotentialNode, naive bool) int {
	p := potential{nodes: nodes, memo: make([]int32, len(nodes)*8), naive: naive}
	for i := range p.memo {
		p.memo[i] = unknown
	}
	best := int32(0)
	for n := range nodes {
		ans := graph.ClaimMissing
		if nodes[n].Speaks && !naive {
			ans = graph.ClaimClaimed // an owner that speaks claims claims
		}
		best = max(best, p.up(int32(n), ans, false))
	}
	return int(best)
}

// Memo sentinels, distinct from none and from any level.
const (
	unknown    = none + 1
	inProgress = none + 2
)

type potential struct {
	nodes []PotentialNode
	memo  []int32 // per node × answer (4) × some level below retried (2)
	naive bool    // every retry-enabled level retries, whatever the answer
}

// up returns the largest level above node n that would retry, given the
// answer n gives its callers and whether some level below already retried;
// none when no level would.
func (p *potential) up(n int32, answer graph.Claim, below bool) int32 {
	k := int(n)*8 + int(answer&3)*2
	if below {
		k++
	}
	switch p.memo[k] {
	case unknown:
	case inProgress:
		return none
	default:
		return p.memo[k]
	}
	p.memo[k] = inProgress
	best := int32(none)
	for _, e := range p.nodes[n].Callers {
		retry := e.RetryEnabled && (p.naive || answer == graph.ClaimClaimed || answer == graph.ClaimMissing)
		if retry {
			best = max(best, 1)
		}
		if e.FailOpen {
			continue // the caller absorbs the error: last level walked
		}
		b := below || retry
		if g := p.up(e.From, p.answer(e.From, b), b); g != none {
			best = max(best, g+1)
		}
	}
	p.memo[k] = best
	return best
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
	case node.SeenPropagating:
		return node.Propagated
	case below:
		return graph.ClaimUnclaimed
	}
	return graph.ClaimClaimed
}
