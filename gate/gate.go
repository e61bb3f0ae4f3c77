// Package gate decides whether a rollout may proceed: it compares the storm
// radius figures of a candidate (a time window, or the traces a new
// service.version ran in) against absolute thresholds and, when there is
// one, a baseline (an earlier window, or the stable version). The decision
// is one pure function that the REST handler (GET /api/v1/gate, usable as
// a Flagger webhook or an Argo Rollouts web metric) and `stormradius gate`
// share, so both say the same thing for the same figures.
package gate

import (
	"errors"
	"fmt"
)

// DefaultMinTraces is how many traces each side needs when MinTraces is
// not given: fewer say too little about a rollout to pass it.
const DefaultMinTraces = 10

// Figures are what is compared, for one side.
type Figures struct {
	// Label names the side: "candidate", "baseline", a version, a window.
	Label            string  `json:"label"`
	Traces           int64   `json:"traces"`
	FailedTraces     int64   `json:"failed_traces"`
	MaxRadius        int     `json:"max_radius"`
	MeanRadius       float64 `json:"mean_radius"`
	MaxAmplification float64 `json:"max_amplification"`
}

// Thresholds are the gate's conditions; nil ones are not checked. At
// least one of MaxRadius, MaxRadiusIncrease and MaxAmplification is needed.
type Thresholds struct {
	// MaxRadius: the candidate's max radius must not exceed it.
	MaxRadius *int `json:"max_radius,omitempty"`
	// MaxRadiusIncrease: the candidate's max radius must not exceed the
	// baseline's by more than it (needs a baseline).
	MaxRadiusIncrease *int `json:"max_radius_increase,omitempty"`
	// MaxAmplification: the candidate's max amplification must not exceed
	// it.
	MaxAmplification *float64 `json:"max_amplification,omitempty"`
	// MinTraces: each side needs at least this many traces
	// (DefaultMinTraces when zero).
	MinTraces int64 `json:"min_traces"`
}

// Decision is the gate's answer, with the figures it compared.
type Decision struct {
	Pass       bool       `json:"pass"`
	Reasons    []string   `json:"reasons"`
	API        string     `json:"api"`
	Candidate  Figures    `json:"candidate"`
	Baseline   *Figures   `json:"baseline,omitempty"`
	Thresholds Thresholds `json:"thresholds"`
}

// ErrBadThresholds reports thresholds that cannot be decided on: a usage
// error (HTTP 400, exit status 2), never a pass.
var ErrBadThresholds = errors.New("bad gate thresholds")

// Check reports whether thresholds can be decided with or without a
// baseline.
func (t Thresholds) Check(haveBaseline bool) error {
	switch {
	case t.MaxRadius == nil && t.MaxRadiusIncrease == nil && t.MaxAmplification == nil:
		return fmt.Errorf("%w: give max_radius, max_radius_increase or max_amplification", ErrBadThresholds)
	case t.MaxRadiusIncrease != nil && !haveBaseline:
		return fmt.Errorf("%w: max_radius_increase needs a baseline (a window or a version)", ErrBadThresholds)
	case t.MaxRadius != nil && *t.MaxRadius < 0, t.MaxRadiusIncrease != nil && *t.MaxRadiusIncrease < 0:
		return fmt.Errorf("%w: radius thresholds must not be negative", ErrBadThresholds)
	case t.MaxAmplification != nil && !(*t.MaxAmplification >= 1):
		return fmt.Errorf("%w: max_amplification must be at least 1 (no retries)", ErrBadThresholds)
	case t.MinTraces < 0:
		return fmt.Errorf("%w: min_traces must not be negative", ErrBadThresholds)
	}
	return nil
}

// Decide compares the candidate against the thresholds and the baseline
// (nil: none). It fails, with a reason each, on every threshold exceeded
// and on a side with too few traces to judge; it passes otherwise. The
// thresholds must have passed Check.
func Decide(api string, candidate Figures, baseline *Figures, t Thresholds) Decision {
	min := t.MinTraces
	if min == 0 {
		min = DefaultMinTraces
	}
	t.MinTraces = min
	d := Decision{API: api, Candidate: candidate, Baseline: baseline, Thresholds: t, Reasons: []string{}}
	if candidate.Traces < min {
		d.Reasons = append(d.Reasons, fmt.Sprintf("%s has %d traces of %s, fewer than the %d needed to judge",
			candidate.Label, candidate.Traces, api, min))
	}
	if baseline != nil && baseline.Traces < min {
		d.Reasons = append(d.Reasons, fmt.Sprintf("%s has %d traces of %s, fewer than the %d needed to compare with",
			baseline.Label, baseline.Traces, api, min))
	}
	if t.MaxRadius != nil && candidate.MaxRadius > *t.MaxRadius {
		d.Reasons = append(d.Reasons, fmt.Sprintf("%s: max radius %d exceeds %d", candidate.Label, candidate.MaxRadius, *t.MaxRadius))
	}
	if t.MaxRadiusIncrease != nil && baseline != nil {
		if inc := candidate.MaxRadius - baseline.MaxRadius; inc > *t.MaxRadiusIncrease {
			d.Reasons = append(d.Reasons, fmt.Sprintf("%s: max radius %d is %d above %s's %d (allowed: %d)",
				candidate.Label, candidate.MaxRadius, inc, baseline.Label, baseline.MaxRadius, *t.MaxRadiusIncrease))
		}
	}
	if t.MaxAmplification != nil && candidate.MaxAmplification > *t.MaxAmplification {
		d.Reasons = append(d.Reasons, fmt.Sprintf("%s: max amplification %.3g exceeds %.3g",
			candidate.Label, candidate.MaxAmplification, *t.MaxAmplification))
	}
	d.Pass = len(d.Reasons) == 0
	return d
}
