package analysis

import (
	"fmt"
	"math"

	"github.com/stormradius/stormradius/graph"
)

// Tail sampling that records no probability (docs/SPEC.md §4.9): the
// collector's tail_sampling processor keeps every trace a policy
// samples; its usual configuration keeps every trace with an error
// (status_code) and a fraction q of the rest (probabilistic, which keeps
// a trace when the FNV-1a hash of its salt and id is at most q of the
// hash's range). Nothing it writes on the spans says which policy kept a
// trace or with what probability, so the traces received over-represent
// failures, and every count and rate is skewed. The tell-tale is in the
// ids: the traces without a failure were kept by their hash, so their
// hashes lie below q, while the failed ones (kept whatever their hash)
// and the traces of any other sampler (which reads other bits of the id,
// or none) spread evenly over the range.

// tailSalt is the hash salt the tail_sampling probabilistic policy uses
// when its configuration gives none (contrib
// processor/tailsamplingprocessor/internal/sampling/probabilistic.go:
// defaultHashSalt).
const tailSalt = "default-hash-seed"

// TailHash returns where id falls in [0, 1) under the tail_sampling
// probabilistic policy's hash: FNV-1a 64 of the salt then the id's 16
// bytes, over 2^64. The policy keeps a trace when TailHash ≤ q.
func TailHash(id graph.TraceID) float64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(tailSalt); i++ {
		h ^= uint64(tailSalt[i])
		h *= prime
	}
	for _, b := range id {
		h ^= uint64(b)
		h *= prime
	}
	return float64(h>>11) * (1.0 / (1 << 53))
}

// tailBounds are where the Tail counts of APIAgg cut the hash's range.
var tailBounds = [2]float64{1.0 / 16, 1.0 / 2}

// addTail counts (sign) a trace with id, failed or not, in a's Tail
// counts.
func (a *APIAgg) addTail(id graph.TraceID, failed bool, sign int64) {
	u := TailHash(id)
	if failed {
		a.TailFailed += sign
		if u < tailBounds[1] {
			a.TailFailed2 += sign
		}
		return
	}
	a.TailClean += sign
	if u < tailBounds[1] {
		a.TailClean2 += sign
		if u < tailBounds[0] {
			a.TailClean16 += sign
		}
	}
}

// TailCounts are an API's (or the fleet's, summed) Tail counts:
// [below 1/16, below 1/2, all] of the traces without a failure (Clean)
// and with one (Failed, whose first is not kept).
type TailCounts struct {
	Clean, Failed [3]int64
}

// TailCounts returns a's Tail counts.
func (a *APIAgg) TailCounts() TailCounts {
	return TailCounts{Clean: [3]int64{a.TailClean16, a.TailClean2, a.TailClean}, Failed: [3]int64{0, a.TailFailed2, a.TailFailed}}
}

// Thresholds of the detection: a half of the hash range holding more
// than its share by minZ standard deviations (under even spread, the
// lower half's count is binomial with p = ½), among at least minClean
// traces; the failed traces must not show it (below maxFailedZ).
const (
	tailMinClean   = 30
	tailMinZ       = 6
	tailMaxFailedZ = 3
)

// halfZ returns how many standard deviations the lower half of c holds
// more than half of its traces.
func halfZ(c *[3]int64) float64 {
	n := c[2]
	if n <= 0 {
		return 0
	}
	return float64(2*c[1]-n) / math.Sqrt(float64(n))
}

// TailSuspect is what DetectTailSampling found.
type TailSuspect struct {
	// Tail: traces without a failure were kept by their hash, the
	// failed ones whatever it was (tail sampling that keeps errors).
	// Sampled: every trace was kept by its hash (a probabilistic policy
	// alone: counts are of the sample, rates are not skewed).
	Tail, Sampled bool
	// Bound: the fraction kept by hash is at most about this (1/16 or
	// 1/2).
	Bound float64
	// Clean, Concentrated: the traces without a failure, and those of
	// them below Bound.
	Clean, Concentrated int64
}

// DetectTailSampling looks for the tell-tale of a hash-based sampler
// that recorded no probability in t.
func DetectTailSampling(t *TailCounts) (TailSuspect, bool) {
	c := &t.Clean
	if c[2] < tailMinClean || halfZ(c) < tailMinZ {
		return TailSuspect{}, false
	}
	s := TailSuspect{Clean: c[2], Bound: tailBounds[1], Concentrated: c[1]}
	// The hash-kept traces are the lower half's excess over the upper
	// half's; when nine tenths of that excess lie below 1/16 (above what
	// an even spread puts there), q is at most about 1/16.
	upper := c[2] - c[1]
	excess := float64(c[1] - upper)
	if float64(c[0])-2*tailBounds[0]*float64(upper) >= 0.9*excess {
		s.Bound, s.Concentrated = tailBounds[0], c[0]
	}
	if t.Failed[2] >= tailMinClean && halfZ(&t.Failed) >= tailMaxFailedZ {
		s.Sampled = true
	} else {
		s.Tail = true
	}
	return s, true
}

// Warning says what s means and how to fix it.
func (s TailSuspect) Warning() string {
	pct := fmt.Sprintf("%.3g %%", 100*s.Bound)
	if s.Sampled {
		return fmt.Sprintf("traces seem sampled by a tail_sampling probabilistic policy at about %s or less, with no probability recorded "+
			"(%d of %d traces have ids that policy keeps there; half would by chance): counts are of the sample, not of the traffic. "+
			"Record each trace's probability (an adjusted-count attribute, deploy/collector/tail-sampling.yaml) or give it with --sampling-probability",
			pct, s.Concentrated, s.Clean)
	}
	return fmt.Sprintf("tail sampling without recorded probabilities suspected: of %d traces without a failure, %d have ids the collector's "+
		"tail_sampling probabilistic policy keeps at about %s or less (half would by chance), while the failed traces are spread evenly: every failed "+
		"trace seems kept and few of the others, so failure counts and rates are overstated. Record each kept trace's probability "+
		"(deploy/collector/tail-sampling.yaml sets sampling.adjusted_count) or analyse the traces before tail sampling",
		s.Clean, s.Concentrated, pct)
}
