package query

import (
	"context"
	"fmt"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/store"
)

// GateRequest asks whether a rollout of API may proceed. The candidate is
// either a time window (Candidate) or, with Service, the traces of API in
// which Service ran CandidateVersion within Candidate's range; the
// baseline likewise (BaselineWindow, or BaselineVersion of Service in the
// same range). With no baseline the thresholds are absolute.
type GateRequest struct {
	API        string
	Thresholds gate.Thresholds
	// Candidate is the candidate's window (by versions: the range they
	// are looked for in).
	Candidate store.Query
	// BaselineWindow, when set, is the baseline's window.
	BaselineWindow *store.Query
	// Service, BaselineVersion and CandidateVersion compare two
	// service.versions (canary and stable) of one service.
	Service, BaselineVersion, CandidateVersion string
}

// Validate checks the request: a usage error (ErrBadRequest or
// gate.ErrBadThresholds) is never a pass.
func (r *GateRequest) Validate() error {
	if r.API == "" {
		return fmt.Errorf("%w: api: required", ErrBadRequest)
	}
	byVersion := r.Service != "" || r.BaselineVersion != "" || r.CandidateVersion != ""
	switch {
	case byVersion && r.Service == "":
		return fmt.Errorf("%w: service: required to compare versions", ErrBadRequest)
	case byVersion && r.CandidateVersion == "":
		return fmt.Errorf("%w: candidate: the candidate version is required with service", ErrBadRequest)
	case byVersion && r.BaselineWindow != nil:
		return fmt.Errorf("%w: baseline: give a baseline window or versions, not both", ErrBadRequest)
	case r.Candidate.From == 0 || r.Candidate.To <= r.Candidate.From:
		return fmt.Errorf("%w: candidate: an empty window", ErrBadRequest)
	case r.BaselineWindow != nil && r.BaselineWindow.To <= r.BaselineWindow.From:
		return fmt.Errorf("%w: baseline: an empty window", ErrBadRequest)
	}
	return r.Thresholds.Check(r.BaselineWindow != nil || r.BaselineVersion != "")
}

// Gate decides a GateRequest from the rollups. An API with no trace on
// either side is ErrNotFound (a typo must not pass a rollout); a side with
// too little evidence leaves the decision undecided (gate.Decide).
func (s *Service) Gate(ctx context.Context, r GateRequest) (*gate.Decision, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var cand Figures
	var base *Figures
	if r.Service != "" {
		q := r.Candidate
		q.API = r.API
		rep, err := s.Store.Report(ctx, q)
		if err != nil {
			return nil, err
		}
		if rep.APIs[r.API] == nil {
			return nil, fmt.Errorf("%w: no traces of root API %q %s", ErrNotFound, r.API, rangeText(q))
		}
		cand = versionFigures(rep, r.API, r.Service, r.CandidateVersion)
		if r.BaselineVersion != "" {
			b := versionFigures(rep, r.API, r.Service, r.BaselineVersion)
			base = &b
		}
	} else {
		var err error
		if cand, err = s.windowFigures(ctx, r.API, r.Candidate, "candidate"); err != nil {
			return nil, err
		}
		if r.BaselineWindow != nil {
			b, err := s.windowFigures(ctx, r.API, *r.BaselineWindow, "baseline")
			if err != nil {
				return nil, err
			}
			base = &b
		}
		if cand.Traces == 0 && (base == nil || base.Traces == 0) {
			return nil, fmt.Errorf("%w: no traces of root API %q %s", ErrNotFound, r.API, rangeText(r.Candidate))
		}
	}
	d := gate.Decide(r.API, cand, base, r.Thresholds)
	return &d, nil
}

// Figures are one side's figures.
type Figures = gate.Figures

func (s *Service) windowFigures(ctx context.Context, api string, q store.Query, label string) (Figures, error) {
	q.API = api
	rep, err := s.Store.Report(ctx, q)
	if err != nil {
		return Figures{}, err
	}
	f := Figures{Label: label + " " + rangeText(q)}
	if a := rep.APIs[api]; a != nil {
		f.Traces, f.FailedTraces = a.Traces, a.Failed
		f.TracesReceived, f.EffectiveSampleSize = evidence(a.Traces, a.Excess, a.Var)
		f.MaxRadius, f.MaxAmplification = a.MaxRadius(), a.MaxAmplification()
		if a.Failed > 0 {
			f.MeanRadius = float64(a.RadiusSum) / float64(a.Failed)
		}
	}
	return f, nil
}

// versionFigures are a version's figures, its claim figures included
// (zero for a version without traces): the claim checks of gate.Decide
// compare two versions'.
func versionFigures(rep *analysis.Report, api, service, version string) Figures {
	f := Figures{Label: service + " " + version, Claims: &gate.ClaimFigures{}}
	v := rep.Versions[analysis.VersionKey{API: api, Service: service, Version: version}]
	if v == nil {
		return f
	}
	*f.Claims = gate.ClaimFigures{FailedHops: v.FailedHops, ClaimedHops: v.ClaimedHops,
		UnclaimedAnswers: v.UnclaimedAnswers, RetriedUnclaimed: v.RetriedUnclaimed, SuppressedRetries: v.Suppressed}
	f.Traces, f.FailedTraces = v.Traces, v.Failed
	f.TracesReceived, f.EffectiveSampleSize = evidence(v.Traces, v.Excess, v.Var)
	f.MaxRadius, f.MaxAmplification = analysis.MaxOf(v.Radius), analysis.MaxOf(v.Amplification)
	if v.Failed > 0 {
		f.MeanRadius = float64(v.RadiusSum) / float64(v.Failed)
	}
	return f
}

// evidence is a side's traces received and effective sample size, from
// its estimated traces, what weighting added and Σ W(W−1) (docs/SPEC.md
// §4.9): what gate.Decide weighs against min_traces. Unsampled, both are
// the traces.
func evidence(traces, excess, varSum int64) (received int64, ess float64) {
	return traces - excess, analysis.EffectiveSampleSize(traces, varSum)
}

func rangeText(q store.Query) string {
	return fmt.Sprintf("%s–%s", time.Unix(0, q.From).UTC().Format(time.RFC3339), time.Unix(0, q.To).UTC().Format(time.RFC3339))
}
