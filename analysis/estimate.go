package analysis

import (
	"fmt"
	"math"
)

// Sampled traffic (docs/SPEC.md §4.9). Every count of a Report is a
// Horvitz–Thompson estimate: each trace counted W times, W its adjusted
// count 1/p rounded without bias. The Var sums beside the counts give
// each rate's variance under Poisson sampling (every trace kept or not
// independently, with its own probability: head, probabilistic and tail
// samplers alike), by linearisation of the ratio of two estimates:
//
//	R = Σ W·y / Σ W·x,  v(R) = Σ W(W−1)·(y − R·x)² / (Σ W·x)²
//
// — W(W−1) the unbiased estimate of (1−p)/p² for a kept trace, so a
// trace kept with certainty adds nothing. Expanded, v(R) needs Σc·y²,
// Σc·x·y and Σc·x² (c = W(W−1)), which the report keeps per API.

// Confidence is the confidence level of every interval (95 %).
const Confidence = 0.95

// z is the standard normal quantile of (1 + Confidence)/2.
const z = 1.959963984540054

// Interval is an estimate with its confidence interval (Confidence).
// Unsampled figures are exact: Low and High equal the estimate.
type Interval struct {
	Estimate float64 `json:"estimate"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
}

// SamplingDoc says how sure the figures of an API (or the fleet) are:
// what was received, what it estimates, the effective sample size and
// the main rates with their intervals (docs/SPEC.md §4.9).
type SamplingDoc struct {
	// Estimated reports that some trace stood for more than itself: the
	// counts are estimates of the traffic, not counts of what was
	// received.
	Estimated bool `json:"estimated"`
	// TracesReceived counts the traces received; TracesEstimated is the
	// estimate of the traffic's (the traces figure).
	TracesReceived  int64 `json:"traces_received"`
	TracesEstimated int64 `json:"traces_estimated"`
	// EffectiveSampleSize is Kish's (ΣW)²/ΣW²: as many unweighted traces
	// would say as much. It equals TracesReceived when unsampled.
	EffectiveSampleSize float64 `json:"effective_sample_size"`
	// FailedTraceRate is failed_traces / traces; RootErrorRate
	// root_errors / traces.
	FailedTraceRate Interval `json:"failed_trace_rate"`
	RootErrorRate   Interval `json:"root_error_rate"`
	// MeanRadius is the mean radius of failed traces; MisattributionRate
	// the misattribution rate (APIs only).
	MeanRadius         *Interval `json:"mean_radius,omitempty"`
	MisattributionRate *Interval `json:"misattribution_rate,omitempty"`
	// TailSamplingSuspected: the traces look tail-sampled by a policy
	// that recorded no probability (DetectTailSampling), so failures are
	// overstated; the warnings say why and how to fix it.
	TailSamplingSuspected bool     `json:"tail_sampling_suspected"`
	Warnings              []string `json:"warnings"`
}

// ratio returns the estimate num/den and its interval, from the sums
// Σc·y² (cyy), Σc·x·y (cxy) and Σc·x² (cxx). The ratio is of a quantity
// bounded by upper per unit of the denominator (1 for a proportion; the
// largest radius a storm could have for the mean radius): it gets a
// Wilson score interval on the effective number of units its variance
// implies, R(1−R)/v with R and v scaled to [0, 1], which stays within the
// bounds and does not collapse where the sample shows no variation
// (every sampled trace failed, or all had the same radius): there,
// fallbackN — the Kish size of the denominator's traces — stands for
// the number of units.
func ratio(num, den, cyy, cxy, cxx int64, sampled bool, upper, fallbackN float64) Interval {
	if den <= 0 {
		return Interval{}
	}
	r := float64(num) / float64(den)
	if !sampled {
		return Interval{Estimate: r, Low: r, High: r}
	}
	d := float64(den)
	v := (float64(cyy) - 2*r*float64(cxy) + r*r*float64(cxx)) / (d * d)
	if !(v > 0) || math.IsInf(v, 0) {
		v = 0
	}
	upper = max(upper, r, 1e-300)
	u, vu := r/upper, v/(upper*upper)
	n := fallbackN
	if vu > 0 && u > 0 && u < 1 {
		n = u * (1 - u) / vu
	}
	l, h := wilson(u, n)
	return Interval{Estimate: r, Low: l * upper, High: h * upper}
}

// wilson returns the Wilson score interval of a proportion p observed on
// n (effective) units; p itself when n is not positive.
func wilson(p, n float64) (float64, float64) {
	if !(n > 0) || math.IsInf(n, 0) {
		return p, p
	}
	z2 := z * z
	den := 1 + z2/n
	center := (p + z2/(2*n)) / den
	half := z / den * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return max(0, center-half), min(1, center+half)
}

// EffectiveSampleSize returns Kish's effective sample size of units
// whose weights sum to sum, with Σ W(W−1) = c: (ΣW)² / ΣW² — the units
// themselves when unweighted (c = 0).
func EffectiveSampleSize(sum, c int64) float64 {
	if sum <= 0 {
		return 0
	}
	s := float64(sum)
	return s * s / (s + float64(c))
}

// newSamplingDoc returns what traces (estimated), what weighting added to
// them (excess) and Σ W(W−1) over them (varSum) say: received, estimated,
// the effective sample size; estimated when some trace stood for more
// than itself.
func newSamplingDoc(traces, excess, varSum int64) SamplingDoc {
	return SamplingDoc{
		Estimated:           varSum != 0 || excess != 0,
		TracesReceived:      traces - excess,
		TracesEstimated:     traces,
		EffectiveSampleSize: EffectiveSampleSize(traces, varSum),
		Warnings:            []string{},
	}
}

// shares sets d's failed-trace and root-error rates from a's sums (an
// API's, or every API's summed).
func (d *SamplingDoc) shares(a *APIAgg) {
	n := EffectiveSampleSize(a.Traces, a.Var)
	d.FailedTraceRate = ratio(a.Failed, a.Traces, a.VarFailed, a.VarFailed, a.Var, d.Estimated, 1, n)
	d.RootErrorRate = ratio(a.RootErrors, a.Traces, a.VarRoot, a.VarRoot, a.Var, d.Estimated, 1, n)
}

// Sampling returns how sure the API's figures are (docs/SPEC.md §4.9);
// maxRadius bounds the radius a storm of the API could have (its
// potential radius without ownership, at least its max radius).
func (a *APIAgg) Sampling(maxRadius int) SamplingDoc {
	d := newSamplingDoc(a.Traces, a.Excess, a.Var)
	d.suspect(a.TailCounts())
	d.shares(a)
	if a.Failed > 0 {
		m := ratio(a.RadiusSum, a.Failed, a.VarRadius2, a.VarRadius, a.VarFailed, d.Estimated,
			float64(max(maxRadius, a.MaxRadius(), 1)), EffectiveSampleSize(a.Failed, a.VarFailed))
		d.MeanRadius = &m
	}
	if a.Eligible > 0 {
		m := ratio(a.Misattributed, a.Eligible, a.VarMis2, a.VarMisElig, a.VarElig2, d.Estimated, 1,
			EffectiveSampleSize(a.Eligible, a.VarElig2))
		d.MisattributionRate = &m
	}
	return d
}

// FleetSamplingDoc is the fleet's SamplingDoc, with the spans received
// and what was wrong with the sampling information received.
type FleetSamplingDoc struct {
	SamplingDoc
	SpansReceived int64 `json:"spans_received"`
	// ConflictingTraces counts traces whose spans recorded different
	// sampling probabilities (the root's counted); UnusableTraces those
	// whose recorded probability could not be used (counted once).
	ConflictingTraces int64 `json:"conflicting_traces"`
	UnusableTraces    int64 `json:"unusable_traces"`
}

// FleetSampling returns how sure the fleet's figures are: every trace
// received and estimated, and the failed-trace and root-error rates of
// the traces of every API.
func (r *Report) FleetSampling() FleetSamplingDoc {
	d := FleetSamplingDoc{SamplingDoc: newSamplingDoc(r.Traces, r.TracesExcess, r.TracesVar),
		SpansReceived: r.Spans - r.SpansExcess, ConflictingTraces: r.SamplingConflicts, UnusableTraces: r.SamplingUnusable}
	var all APIAgg
	for _, a := range r.APIs {
		all.Traces += a.Traces
		all.Failed += a.Failed
		all.RootErrors += a.RootErrors
		all.Var += a.Var
		all.VarFailed += a.VarFailed
		all.VarRoot += a.VarRoot
		all.TailClean16 += a.TailClean16
		all.TailClean2 += a.TailClean2
		all.TailClean += a.TailClean
		all.TailFailed2 += a.TailFailed2
		all.TailFailed += a.TailFailed
	}
	d.shares(&all)
	d.suspect(all.TailCounts())
	if r.SamplingConflicts > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%d trace(s) whose spans recorded different sampling probabilities: the root span's counted", r.SamplingConflicts))
	}
	if r.SamplingUnusable > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%d trace(s) whose sampling probability was recorded but unusable (malformed, zero, negative or above 1): each counted once", r.SamplingUnusable))
	}
	return d
}

// suspect adds what DetectTailSampling finds in t to d.
func (d *SamplingDoc) suspect(t TailCounts) {
	if s, ok := DetectTailSampling(&t); ok {
		d.TailSamplingSuspected = true
		d.Warnings = append(d.Warnings, s.Warning())
	}
}
