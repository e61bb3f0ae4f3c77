// Package gate decides whether a rollout may proceed: it compares the storm
// radius figures of a candidate (a time window, or the traces a new
// service.version ran in) against absolute thresholds and, when there is
// one, a baseline (an earlier window, or the stable version). The decision
// is one pure function that the REST handler (GET /api/v1/gate, usable as
// a Flagger webhook or an Argo Rollouts web metric) and `stormradius gate`
// share, so both say the same thing for the same figures.
//
// A decision is one of three: pass, fail, or undecided — too little
// evidence to say either (docs/ANALYSIS.md, "Rollout gate"). Undecided is
// never a pass; what a client makes of it (wait, or count a failed check)
// is for the client to say.
package gate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DefaultMinTraces is the effective sample size each side needs when
// MinTraces is not given: less says too little about a rollout to decide.
const DefaultMinTraces = 10

// MinClaimEvidence is what a candidate version needs before the claim
// checks judge it: failed hops, for whether it stopped claiming errors;
// unclaimed answers received on retry-enabled calls, for whether it
// stopped honouring claims. Fewer is too little evidence of either, and
// not a failure. (Estimated counts, as every count of Figures; a
// candidate must also have MinTraces' effective sample size to be
// judged at all.)
const MinClaimEvidence = 5

// The three decisions.
const (
	Pass      = "pass"
	Fail      = "fail"
	Undecided = "undecided"
)

// Figures are what is compared, for one side.
type Figures struct {
	// Label names the side: "candidate", "baseline", a version, a window.
	Label string `json:"label"`
	// Traces is the side's traces: with sampled traces, the estimate of
	// the traffic they stand for.
	Traces int64 `json:"traces"`
	// TracesReceived is how many traces were received (Traces without
	// sampling).
	TracesReceived int64 `json:"traces_received"`
	// EffectiveSampleSize (Kish) is how many traces the evidence is worth:
	// what MinTraces is compared with (TracesReceived without sampling).
	EffectiveSampleSize float64 `json:"effective_sample_size"`
	FailedTraces        int64   `json:"failed_traces"`
	MaxRadius           int     `json:"max_radius"`
	MeanRadius          float64 `json:"mean_radius"`
	MaxAmplification    float64 `json:"max_amplification"`
	// Claims, for a side that is a service.version, is how its hops
	// answered claims and honoured the claims they received; nil for a
	// window. The claim checks compare a candidate's with a baseline's.
	Claims *ClaimFigures `json:"claims,omitempty"`
}

// ClaimFigures are how a service.version's hops spoke the claim protocol
// (docs/SPEC.md §2, §4.2) over a side's traces: estimated counts, as
// every count of Figures.
type ClaimFigures struct {
	// FailedHops counts the version's failed hops (those that answer a
	// caller); ClaimedHops those of them seen answering a valid claim
	// (claimed or unclaimed).
	FailedHops  int64 `json:"failed_hops"`
	ClaimedHops int64 `json:"claimed_hops"`
	// UnclaimedAnswers counts the failed attempts answered unclaimed on
	// the retry-enabled calls the version's hops made; RetriedUnclaimed
	// those of them another attempt of the same call followed (retries
	// the protocol says never to make).
	UnclaimedAnswers int64 `json:"unclaimed_answers"`
	RetriedUnclaimed int64 `json:"retried_unclaimed"`
	// SuppressedRetries counts the version's calls on retry-enabled
	// edges that declined a retry of an unclaimed answer: marked
	// retry.suppressed, or failed at their first unclaimed answer with
	// fewer attempts than the edge's most (M_e).
	SuppressedRetries int64 `json:"suppressed_retries"`
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
	// MinTraces: a side is judged only with an effective sample size of
	// at least this many traces (DefaultMinTraces when zero).
	MinTraces int64 `json:"min_traces"`
}

// Decision is the gate's answer, with the figures it compared.
type Decision struct {
	// Decision is Pass, Fail or Undecided.
	Decision string `json:"decision"`
	// Pass is Decision == Pass (kept for the clients that read it).
	Pass bool `json:"pass"`
	// Reasons say why it did not pass: every threshold exceeded, every
	// side short of evidence; none on a pass.
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
// (nil: none). The thresholds must have passed Check. The rule:
//
//   - a side has enough evidence when its EffectiveSampleSize is at least
//     MinTraces;
//   - a candidate without enough evidence is Undecided, whatever its
//     figures (what it exceeded on that evidence is said, not judged);
//   - otherwise every threshold the candidate exceeds is a reason to Fail;
//     MaxRadiusIncrease is judged only when the baseline has enough
//     evidence, and is undecided when it has not (the baseline is read by
//     no other threshold);
//   - when both sides are versions (their Claims are set), the claim
//     checks (ClaimChecks) are reasons to Fail as thresholds exceeded
//     are: a candidate that stopped claiming errors, or stopped honouring
//     claims, where its baseline did;
//   - Fail when a threshold judged was exceeded, else Undecided when one
//     could not be judged, else Pass.
func Decide(api string, candidate Figures, baseline *Figures, t Thresholds) Decision {
	min := t.MinTraces
	if min == 0 {
		min = DefaultMinTraces
	}
	t.MinTraces = min
	d := Decision{API: api, Candidate: candidate, Baseline: baseline, Thresholds: t, Reasons: []string{}}
	var exceeded []string
	if t.MaxRadius != nil && candidate.MaxRadius > *t.MaxRadius {
		exceeded = append(exceeded, fmt.Sprintf("%s: max radius %d exceeds %d", candidate.Label, candidate.MaxRadius, *t.MaxRadius))
	}
	if t.MaxAmplification != nil && candidate.MaxAmplification > *t.MaxAmplification {
		exceeded = append(exceeded, fmt.Sprintf("%s: max amplification %.3g exceeds %.3g",
			candidate.Label, candidate.MaxAmplification, *t.MaxAmplification))
	}
	unjudged := false
	if t.MaxRadiusIncrease != nil && baseline != nil {
		if !enough(*baseline, min) {
			unjudged = true
			d.Reasons = append(d.Reasons, shortOf("baseline", *baseline, min)+": max_radius_increase cannot be judged")
		} else if inc := candidate.MaxRadius - baseline.MaxRadius; inc > *t.MaxRadiusIncrease {
			exceeded = append(exceeded, fmt.Sprintf("%s: max radius %d is %d above %s's %d (allowed: %d)",
				candidate.Label, candidate.MaxRadius, inc, baseline.Label, baseline.MaxRadius, *t.MaxRadiusIncrease))
		}
	}
	if baseline != nil {
		exceeded = append(exceeded, ClaimChecks(candidate, *baseline)...)
	}
	switch {
	case !enough(candidate, min):
		d.Decision = Undecided
		reasons := []string{shortOf("candidate", candidate, min)}
		for _, r := range exceeded {
			reasons = append(reasons, "not judged on that evidence: "+r)
		}
		d.Reasons = append(reasons, d.Reasons...)
	case len(exceeded) > 0:
		d.Decision = Fail
		d.Reasons = append(exceeded, d.Reasons...)
	case unjudged:
		d.Decision = Undecided
	default:
		d.Decision = Pass
	}
	d.Pass = d.Decision == Pass
	return d
}

// ClaimChecks compares how a candidate version spoke the claim protocol
// with how its baseline did, and returns a reason for each way it
// stopped (none when either side is not a version: Claims nil):
//
//   - stopped claiming errors: the baseline's failed hops answered valid
//     claims, and the candidate's — MinClaimEvidence of them at least —
//     answered none;
//   - stopped honouring claims: the baseline declined retries of
//     unclaimed answers, and the candidate received MinClaimEvidence
//     unclaimed answers at least on retry-enabled calls, retried some
//     and declined none.
//
// A candidate with fewer failed hops or unclaimed answers has given too
// little evidence for the check, which it then passes. Decide runs
// these on every comparison of two versions.
func ClaimChecks(candidate, baseline Figures) []string {
	c, b := candidate.Claims, baseline.Claims
	if c == nil || b == nil {
		return nil
	}
	cand, base := roleLabel("candidate", candidate.Label), roleLabel("baseline", baseline.Label)
	var out []string
	if b.ClaimedHops > 0 && c.FailedHops >= MinClaimEvidence && c.ClaimedHops == 0 {
		out = append(out, fmt.Sprintf("%s: stopped claiming errors: %d of %d failed hops answered a claim (%s: %d of %d)",
			cand, c.ClaimedHops, c.FailedHops, base, b.ClaimedHops, b.FailedHops))
	}
	if b.SuppressedRetries > 0 && c.UnclaimedAnswers >= MinClaimEvidence && c.RetriedUnclaimed > 0 && c.SuppressedRetries == 0 {
		out = append(out, fmt.Sprintf("%s: stopped honouring claims: retried %d unclaimed answers, suppressed %d (%s suppressed %d)",
			cand, c.RetriedUnclaimed, c.SuppressedRetries, base, b.SuppressedRetries))
	}
	return out
}

// enough reports whether a side's evidence may be judged.
func enough(f Figures, min int64) bool { return f.EffectiveSampleSize >= float64(min) }

// shortOf says which side lacks evidence and how much it had:
// "candidate route 1.5.0: effective sample size 3.2 below min_traces 10
// (4 traces received)".
func shortOf(role string, f Figures, min int64) string {
	// Rounded down to a tenth, so that it never reads as min_traces.
	ess := strconv.FormatFloat(math.Floor(f.EffectiveSampleSize*10)/10, 'f', -1, 64)
	return fmt.Sprintf("%s: effective sample size %s below min_traces %d (%d traces received)", roleLabel(role, f.Label), ess, min, f.TracesReceived)
}

// roleLabel names a side by its role and label: "candidate route 1.5.0"
// (a window's label already starts with its role).
func roleLabel(role, label string) string {
	if strings.HasPrefix(label, role) {
		return label
	}
	return strings.TrimSpace(role + " " + label)
}
