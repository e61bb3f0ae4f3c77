// Package radius measures how far retry storms reach: the observed storm
// radius of every failure event (docs/SPEC.md §4.5), amplification, suppressed
// retries and the spurious requests error ownership prevented (§4.6), the
// potential radius of a call graph, and the what-if model (§4.7). It is
// pure: no I/O, no globals.
package radius

import (
	"math"
	"slices"

	"github.com/stormradius/stormradius/graph"
)

// none marks "no retried level" in radius computations.
const none = math.MinInt32

// CallInfo is what the window says about the edge of one call.
type CallInfo struct {
	FailOpen     bool
	RetryEnabled bool
	// MaxAttempts is M_e, the most attempts seen on one call of the edge,
	// at least 2 when the edge is retry-enabled.
	MaxAttempts int32
}

// Event is one failure event: an owner hop and the chain of hops its error
// propagated to.
type Event struct {
	Owner  int32 // hop
	Radius int32 // largest retried level, 0 if none
	Chain  int32 // k: hops the error propagated to above the owner
}

// OwnerStat is the amplification of one owner in one trace.
type OwnerStat struct {
	Node graph.Node
	// Hops counts the owner's owner hops in the trace (its failure events);
	// First those reached through first attempts only at every level.
	Hops, First int64
	// Spurious is the owner's share of the trace's spurious requests
	// prevented: the trace's count split evenly over its owners (the
	// remainder to the first ones in order), so that shares add up.
	Spurious int64
}

// Amplification returns Hops / First (First counted as at least 1).
func (o OwnerStat) Amplification() float64 {
	return float64(o.Hops) / float64(max(o.First, 1))
}

// Result is the radius analysis of one trace.
type Result struct {
	Events []Event
	// Radius is the trace radius: the largest event radius. Meaningful only
	// when Events is not empty.
	Radius int32
	Owners []OwnerStat // sorted by node
	// Suppressed counts failed calls whose last response was unclaimed on
	// retry-enabled edges.
	Suppressed int64
	// Hops and Counterfactual count the trace's hops (virtual ones
	// included) as they were and as a naive replay would make them; the
	// Analyzer's Copies tells how they split over hops.
	Hops, Counterfactual int64
}

// Spurious returns the requests error ownership prevented in the trace.
func (r *Result) Spurious() int64 { return r.Counterfactual - r.Hops }

// Analyzer computes per-trace radius results, reusing scratch memory. It is
// not safe for concurrent use; the zero value is ready.
type Analyzer struct {
	up    []int32
	chain []int32
	mult  []int64
}

// Copies returns, for every hop of the trace last analysed, how many copies
// of it the naive replay makes (1 when the replay adds none). It is valid
// until the next Analyze.
func (a *Analyzer) Copies() []int64 { return a.mult }

// Analyze computes the radius result of t. calls[i] describes call i's
// edge; owner[h] tells whether hop h is a failed hop that owns its error.
func (a *Analyzer) Analyze(t *graph.Trace, calls []CallInfo, owner []bool) Result {
	var r Result
	a.events(t, calls, owner, &r)
	a.owners(t, owner, &r)
	for i := range t.Calls {
		c := &t.Calls[i]
		if c.Failed && c.Claim == graph.ClaimUnclaimed && calls[i].RetryEnabled {
			r.Suppressed++
		}
	}
	a.counterfactual(t, calls, &r)
	if k := int64(len(r.Owners)); k > 0 {
		q, rem := r.Spurious()/k, r.Spurious()%k
		for i := range r.Owners {
			r.Owners[i].Spurious = q
			if int64(i) < rem {
				r.Owners[i].Spurious++
			}
		}
	}
	return r
}

// events finds the failure events and their radius. up[h] is, for a hop on
// a failure chain, the largest level above h (level 1: the call into h) at
// which the error was retried, counting only levels the error reached;
// computed parents first, so each event costs O(1).
func (a *Analyzer) events(t *graph.Trace, calls []CallInfo, owner []bool, r *Result) {
	a.up = grow(a.up, len(t.Hops))
	a.chain = grow(a.chain, len(t.Hops))
	chain := a.chain
	for h := range t.Hops {
		a.up[h], chain[h] = none, 0
		hop := &t.Hops[h]
		if hop.In < 0 || !hop.Failed {
			continue
		}
		ci := t.Attempts[hop.In].Call
		c := &t.Calls[ci]
		best := int32(none)
		if c.Retried() {
			best = 1
		}
		if p := c.Caller; c.Failed && !calls[ci].FailOpen && t.Hops[p].Failed {
			chain[h] = chain[p] + 1
			if a.up[p] != none && a.up[p]+1 > best {
				best = a.up[p] + 1
			}
		}
		a.up[h] = best
	}
	for h := range t.Hops {
		if !owner[h] {
			continue
		}
		e := Event{Owner: int32(h), Radius: max(a.up[h], 0), Chain: chain[h]}
		if len(r.Events) == 0 || e.Radius > r.Radius {
			r.Radius = e.Radius
		}
		r.Events = append(r.Events, e)
	}
}

// owners counts each owner's owner hops and first-attempt owner hops.
func (a *Analyzer) owners(t *graph.Trace, owner []bool, r *Result) {
	for h := range t.Hops {
		if !owner[h] {
			continue
		}
		n := t.Hops[h].Key()
		i := slices.IndexFunc(r.Owners, func(o OwnerStat) bool { return o.Node == n })
		if i < 0 {
			r.Owners = append(r.Owners, OwnerStat{Node: n})
			i = len(r.Owners) - 1
		}
		r.Owners[i].Hops++
		if t.Hops[h].First {
			r.Owners[i].First++
		}
	}
	slices.SortFunc(r.Owners, func(x, y OwnerStat) int { return x.Node.Compare(y.Node) })
}

// counterfactual replays the trace with naive retries (docs/SPEC.md §4.6): every
// failed call on a retry-enabled edge gets M_e attempts, the missing ones
// copies of its last attempt's subtree, replayed the same way. mult[h] is
// how many copies of hop h the replay makes, computed parents first.
func (a *Analyzer) counterfactual(t *graph.Trace, calls []CallInfo, r *Result) {
	a.mult = grow(a.mult, len(t.Hops))
	for h := range t.Hops {
		a.mult[h] = 1
	}
	for h := range t.Hops {
		hop := &t.Hops[h]
		m := a.mult[h]
		for ci := hop.CallStart; ci < hop.CallEnd; ci++ {
			c := &t.Calls[ci]
			for at := c.AttemptStart; at < c.AttemptEnd; at++ {
				a.mult[t.Attempts[at].Callee] = m
			}
			n := int64(c.Attempts())
			if c.Failed && calls[ci].RetryEnabled && int64(calls[ci].MaxAttempts) > n {
				last := t.Attempts[c.Last()].Callee
				a.mult[last] = satMul(m, 1+int64(calls[ci].MaxAttempts)-n)
			}
		}
	}
	r.Hops = int64(len(t.Hops))
	for h := range t.Hops {
		r.Counterfactual = SatAdd(r.Counterfactual, a.mult[h])
	}
}

// limit caps counterfactual counts: a naive replay of a deep chain grows as
// M^depth and must not overflow.
const limit = int64(1) << 62

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > limit/b {
		return limit
	}
	return a * b
}

// SatAdd adds counterfactual counts, saturating at 2^62.
func SatAdd(a, b int64) int64 {
	if a > limit-b {
		return limit
	}
	return a + b
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
