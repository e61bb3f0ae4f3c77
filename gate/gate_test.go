package gate

import (
	"errors"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// fig is a side without sampling: every trace received, each worth one.
func fig(label string, traces int64, radius int, amp float64) Figures {
	return Figures{Label: label, Traces: traces, TracesReceived: traces, EffectiveSampleSize: float64(traces), MaxRadius: radius, MaxAmplification: amp}
}

func TestDecide(t *testing.T) {
	cand := fig("v2", 100, 3, 4)
	base := fig("v1", 100, 1, 2)
	short := fig("v1", 3, 1, 2)
	// Sampled: 12 traces received stand for 1,000, but their weights make
	// them worth 8.5.
	sampled := Figures{Label: "v2", Traces: 1000, TracesReceived: 12, EffectiveSampleSize: 8.5, MaxRadius: 1, MaxAmplification: 2}
	for _, tc := range []struct {
		name     string
		cand     Figures
		base     *Figures
		th       Thresholds
		decision string
		reasons  []string
	}{
		{"absolute radius ok", cand, nil, Thresholds{MaxRadius: ptr(3)}, Pass, nil},
		{"absolute radius exceeded", cand, nil, Thresholds{MaxRadius: ptr(2)}, Fail, []string{"v2: max radius 3 exceeds 2"}},
		{"increase of 2 allowed", cand, &base, Thresholds{MaxRadiusIncrease: ptr(2)}, Pass, nil},
		{"increase of 2 not allowed", cand, &base, Thresholds{MaxRadiusIncrease: ptr(1)}, Fail, []string{"v2: max radius 3 is 2 above v1's 1 (allowed: 1)"}},
		{"amplification", cand, nil, Thresholds{MaxAmplification: ptr(3.5)}, Fail, []string{"v2: max amplification 4 exceeds 3.5"}},
		{"both exceeded", cand, &base, Thresholds{MaxRadius: ptr(2), MaxRadiusIncrease: ptr(0)}, Fail,
			[]string{"v2: max radius 3 exceeds 2", "v2: max radius 3 is 2 above v1's 1 (allowed: 0)"}},
		{"too little candidate evidence", cand, nil, Thresholds{MaxRadius: ptr(9), MinTraces: 101}, Undecided,
			[]string{"candidate v2: effective sample size 100 below min_traces 101 (100 traces received)"}},
		// Too little evidence is undecided whatever it shows: said, not judged.
		{"too little candidate evidence over the threshold", fig("v2", 4, 3, 4), &base, Thresholds{MaxRadius: ptr(2), MaxRadiusIncrease: ptr(0)}, Undecided,
			[]string{"candidate v2: effective sample size 4 below min_traces 10 (4 traces received)",
				"not judged on that evidence: v2: max radius 3 exceeds 2",
				"not judged on that evidence: v2: max radius 3 is 2 above v1's 1 (allowed: 0)"}},
		{"no candidate traces at all", fig("route 9.9", 0, 0, 0), &base, Thresholds{MaxRadiusIncrease: ptr(0)}, Undecided,
			[]string{"candidate route 9.9: effective sample size 0 below min_traces 10 (0 traces received)"}},
		{"a window's label names its side", fig("candidate 10:00–10:10", 7, 0, 0), nil, Thresholds{MaxRadius: ptr(2)}, Undecided,
			[]string{"candidate 10:00–10:10: effective sample size 7 below min_traces 10 (7 traces received)"}},
		{"the effective sample size is compared, not the traces", sampled, nil, Thresholds{MaxRadius: ptr(2)}, Undecided,
			[]string{"candidate v2: effective sample size 8.5 below min_traces 10 (12 traces received)"}},
		{"9.96 is below 10, and reads so", Figures{Label: "v2", Traces: 11, TracesReceived: 11, EffectiveSampleSize: 9.96}, nil, Thresholds{MaxRadius: ptr(2)}, Undecided,
			[]string{"candidate v2: effective sample size 9.9 below min_traces 10 (11 traces received)"}},
		{"exactly min_traces is enough", Figures{Label: "v2", Traces: 14, TracesReceived: 14, EffectiveSampleSize: 10}, nil, Thresholds{MaxRadius: ptr(2)}, Pass, nil},
		// The baseline's evidence matters to the increase only.
		{"too little baseline evidence", cand, &short, Thresholds{MaxRadiusIncrease: ptr(5)}, Undecided,
			[]string{"baseline v1: effective sample size 3 below min_traces 10 (3 traces received): max_radius_increase cannot be judged"}},
		{"too little baseline evidence, an absolute threshold exceeded", cand, &short, Thresholds{MaxRadiusIncrease: ptr(5), MaxAmplification: ptr(2.0)}, Fail,
			[]string{"v2: max amplification 4 exceeds 2",
				"baseline v1: effective sample size 3 below min_traces 10 (3 traces received): max_radius_increase cannot be judged"}},
		{"too little baseline evidence, absolute thresholds only", cand, &short, Thresholds{MaxRadius: ptr(3)}, Pass, nil},
		{"default min traces", cand, nil, Thresholds{MaxRadius: ptr(9)}, Pass, nil},
	} {
		d := Decide("api", tc.cand, tc.base, tc.th)
		if d.Decision != tc.decision || d.Pass != (tc.decision == Pass) {
			t.Errorf("%s: decision %q pass %v, want %q (%v)", tc.name, d.Decision, d.Pass, tc.decision, d.Reasons)
		}
		if want := append([]string{}, tc.reasons...); strings.Join(d.Reasons, "\n") != strings.Join(want, "\n") || d.Reasons == nil {
			t.Errorf("%s: reasons\n%q\nwant\n%q", tc.name, d.Reasons, want)
		}
		if d.Thresholds.MinTraces == 0 {
			t.Errorf("%s: the decision does not say the min traces it used", tc.name)
		}
	}
	// Nine traces under the default of ten: never a pass.
	if d := Decide("api", fig("c", 9, 0, 1), nil, Thresholds{MaxRadius: ptr(100)}); d.Pass || d.Decision != Undecided {
		t.Errorf("9 traces with the default minimum of 10: %q", d.Decision)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		th   Thresholds
		base bool
		ok   bool
	}{
		{Thresholds{}, false, false},
		{Thresholds{MaxRadius: ptr(1)}, false, true},
		{Thresholds{MaxRadiusIncrease: ptr(1)}, false, false},
		{Thresholds{MaxRadiusIncrease: ptr(1)}, true, true},
		{Thresholds{MaxRadius: ptr(-1)}, false, false},
		{Thresholds{MaxAmplification: ptr(0.5)}, false, false},
		{Thresholds{MaxRadius: ptr(1), MinTraces: -1}, false, false},
	} {
		err := tc.th.Check(tc.base)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadThresholds)) {
			t.Errorf("%+v baseline %v: %v", tc.th, tc.base, err)
		}
	}
}

// The claim checks, on two versions of a service: a candidate that drops
// the claim header, or stops declining retries of unclaimed answers,
// fails with a reason naming it; too little evidence on its side is no
// failure of either check.
func TestDecideClaims(t *testing.T) {
	// A version side: 100 traces, radius 1, and how it spoke the protocol.
	ver := func(label string, c ClaimFigures) Figures {
		f := fig(label, 100, 1, 2)
		f.Claims = &c
		return f
	}
	honest := ClaimFigures{FailedHops: 40, ClaimedHops: 35, UnclaimedAnswers: 30, RetriedUnclaimed: 0, SuppressedRetries: 30}
	base := ver("route 1.1.0", honest)
	th := Thresholds{MaxRadius: ptr(5)}
	const (
		claimReason  = "candidate route 1.2.0: stopped claiming errors: 0 of 37 failed hops answered a claim (baseline route 1.1.0: 35 of 40)"
		honourReason = "candidate route 1.2.0: stopped honouring claims: retried 12 unclaimed answers, suppressed 0 (baseline route 1.1.0 suppressed 30)"
	)
	for _, tc := range []struct {
		name     string
		cand     Figures
		base     *Figures
		th       Thresholds
		decision string
		reasons  []string
	}{
		{"honest candidate", ver("route 1.2.0", honest), &base, th, Pass, nil},
		{"drops the claim header", ver("route 1.2.0", ClaimFigures{FailedHops: 37, UnclaimedAnswers: 30, SuppressedRetries: 28}), &base, th, Fail,
			[]string{claimReason}},
		{"stops suppressing", ver("route 1.2.0", ClaimFigures{FailedHops: 40, ClaimedHops: 40, UnclaimedAnswers: 18, RetriedUnclaimed: 12}), &base, th, Fail,
			[]string{honourReason}},
		{"both", ver("route 1.2.0", ClaimFigures{FailedHops: 37, UnclaimedAnswers: 18, RetriedUnclaimed: 12}), &base, th, Fail,
			[]string{claimReason, honourReason}},
		{"both, beside a threshold exceeded", ver("route 1.2.0", ClaimFigures{FailedHops: 37, UnclaimedAnswers: 18, RetriedUnclaimed: 12}), &base,
			Thresholds{MaxRadius: ptr(0)}, Fail, []string{"route 1.2.0: max radius 1 exceeds 0", claimReason, honourReason}},
		// Too little evidence on the candidate's side: no failure.
		{"no failed hops", ver("route 1.2.0", ClaimFigures{}), &base, th, Pass, nil},
		{"4 failed hops, no claim", ver("route 1.2.0", ClaimFigures{FailedHops: MinClaimEvidence - 1}), &base, th, Pass, nil},
		{"4 unclaimed answers, all retried", ver("route 1.2.0", ClaimFigures{FailedHops: 40, ClaimedHops: 40, UnclaimedAnswers: MinClaimEvidence - 1, RetriedUnclaimed: 4}),
			&base, th, Pass, nil},
		{"5 failed hops, no claim", ver("route 1.2.0", ClaimFigures{FailedHops: MinClaimEvidence}), &base, th, Fail,
			[]string{"candidate route 1.2.0: stopped claiming errors: 0 of 5 failed hops answered a claim (baseline route 1.1.0: 35 of 40)"}},
		// Some suppressed, some retried: it still honours claims somewhere.
		{"suppresses some", ver("route 1.2.0", ClaimFigures{FailedHops: 40, ClaimedHops: 1, UnclaimedAnswers: 30, RetriedUnclaimed: 12, SuppressedRetries: 1}),
			&base, th, Pass, nil},
		// Unclaimed answers not retried and not declined (out of attempts).
		{"retries none", ver("route 1.2.0", ClaimFigures{FailedHops: 40, ClaimedHops: 40, UnclaimedAnswers: 30}), &base, th, Pass, nil},
		// The baseline did not do it either: nothing stopped.
		{"baseline never claimed", ver("route 1.2.0", ClaimFigures{FailedHops: 37, UnclaimedAnswers: 18, RetriedUnclaimed: 12}),
			ptr(ver("route 1.1.0", ClaimFigures{FailedHops: 40, UnclaimedAnswers: 30, RetriedUnclaimed: 20})), th, Pass, nil},
		// Windows carry no claim figures: no claim check.
		{"windows", fig("candidate 10:00–10:10", 100, 1, 2), ptr(fig("baseline 09:00–09:10", 100, 1, 2)), th, Pass, nil},
		{"no baseline", ver("route 1.2.0", ClaimFigures{FailedHops: 37}), nil, th, Pass, nil},
		// A candidate short of traces is undecided: what it showed is said,
		// not judged.
		{"too few candidate traces", func() Figures {
			f := ver("route 1.2.0", ClaimFigures{FailedHops: 37, UnclaimedAnswers: 18, RetriedUnclaimed: 12})
			f.Traces, f.TracesReceived, f.EffectiveSampleSize = 4, 4, 4
			return f
		}(), &base, th, Undecided, []string{"candidate route 1.2.0: effective sample size 4 below min_traces 10 (4 traces received)",
			"not judged on that evidence: " + claimReason, "not judged on that evidence: " + honourReason}},
		// The baseline's evidence is its own counts: a short baseline that
		// claimed is still one that claimed.
		{"short baseline", ver("route 1.2.0", ClaimFigures{FailedHops: 37, UnclaimedAnswers: 30, SuppressedRetries: 28}), func() *Figures {
			f := base
			f.Traces, f.TracesReceived, f.EffectiveSampleSize = 3, 3, 3
			return &f
		}(), th, Fail, []string{claimReason}},
	} {
		d := Decide("api", tc.cand, tc.base, tc.th)
		if d.Decision != tc.decision || d.Pass != (tc.decision == Pass) {
			t.Errorf("%s: decision %q, want %q (%q)", tc.name, d.Decision, tc.decision, d.Reasons)
		}
		if strings.Join(d.Reasons, "\n") != strings.Join(tc.reasons, "\n") {
			t.Errorf("%s: reasons\n%q\nwant\n%q", tc.name, d.Reasons, tc.reasons)
		}
	}
}
