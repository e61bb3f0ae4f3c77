package sampling

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The probabilistic fleet: 4,000 traces, every 10th with an error (the
// sampler does not look), every 7th whose randomness allows it arriving
// with ot=th:8 (sampled at 50 % by an SDK before this collector).
var probabilisticFleet = fleetOptions{traces: 4000, errorEvery: 10, headEvery: 7}

// TestProbabilisticSampling runs deploy/collector/probabilistic-sampling.yaml
// on e2e/collector's collector (contrib's probabilistic_sampler v0.165.0)
// and checks, trace by trace, that it kept exactly the traces whose
// randomness is at or above the threshold (about 10 %, within binomial
// bounds), whole, each kept span's tracestate exactly ot=th:e666 — or,
// for a span that arrived with ot=th:8 (p = 1/2), ot=th:f3333 (its
// probability × 10 %, at 4 digits).
//
// The hash_seed case is the sampler's default mode, for comparison: it
// keeps the traces whose FNV hash falls in 1,638 of 16,384 buckets,
// writes ot=rv:<the hash, 14 digits>;th:e668, and drops every span that
// arrives with a th.
func TestProbabilisticSampling(t *testing.T) {
	setup(t)
	f := newFleet(probabilisticFleet)
	for _, c := range []struct {
		name     string
		override string
		// keep decides a trace and says the tracestate its kept spans carry.
		keep func(tr *fleetTrace) (bool, string)
		// eligible says which traces it may keep (the binomial bounds' n).
		eligible func(tr *fleetTrace) bool
	}{
		{name: "shipped", keep: func(tr *fleetTrace) (bool, string) {
			th := "e666"
			if tr.th == "8" {
				th = "f3333"
			}
			return w3cRandomness(tr.id) >= thresholdOf(th), "ot=th:" + th
		}, eligible: func(*fleetTrace) bool { return true }},
		{name: "mode=hash_seed", override: "processors:\n  probabilistic_sampler:\n    mode: hash_seed\n",
			keep: func(tr *fleetTrace) (bool, string) {
				rnd := hashSeedRandomness(tr.id, 0)
				return tr.th == "" && rnd >= thresholdOf("e668"), fmt.Sprintf("ot=rv:%014x;th:e668", rnd)
			}, eligible: func(tr *fleetTrace) bool { return tr.th == "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := startRun(t, suite.otelcol, "probabilistic-sampling.yaml", c.override)
			r.send(t, f.requests...)
			kept := r.finish(t, r.settle(t, 0))
			p, n, th := checkProbabilistic(f, kept, c.keep)
			eligible := 0
			for _, tr := range f.traces {
				if c.eligible(tr) {
					eligible++
				}
			}
			lo, hi := binomialBounds(eligible, 0.1)
			t.Logf("kept %d of %d traces it could keep (%.2f %%; %d to %d expected of 10 %%), %d spans; th of the kept spans: %v",
				n, eligible, 100*float64(n)/float64(eligible), lo, hi, kept.SpanCount(), th)
			if n < lo || n > hi {
				p.add("kept a count outside the binomial bounds", "%d of %d, bounds %d to %d", n, eligible, lo, hi)
			}
			if !p.empty() {
				t.Errorf("what the collector kept is not what probabilistic-sampling.yaml promises:\n%s", p.String())
			}
		})
	}
}

// checkProbabilistic compares the kept traffic with keep's decisions,
// trace by trace, and returns what differs, how many traces were kept,
// and how many kept spans carried each tracestate's th.
func checkProbabilistic(f *fleet, kept ptrace.Traces, keep func(*fleetTrace) (bool, string)) (*problems, int, map[string]int) {
	p := &problems{}
	ths := map[string]int{}
	got := byTrace(kept)
	for id := range got {
		if f.byID[id] == nil {
			p.add("kept a trace that was never sent", "%s", id)
		}
	}
	n := 0
	for _, tr := range f.traces {
		want, ts := keep(tr)
		spans, isKept := got[tr.id]
		switch {
		case want && !isKept:
			p.add("dropped a trace it keeps", "%s (arrived with th %q)", tr.id, tr.th)
			continue
		case !want && isKept:
			p.add("kept a trace it drops", "%s (arrived with th %q)", tr.id, tr.th)
			continue
		case !isKept:
			continue
		}
		n++
		if len(spans) != tr.spans {
			p.add("kept a trace in part", "%s: %d spans, sent %d", tr.id, len(spans), tr.spans)
		}
		for _, s := range spans {
			ths["th:"+tvalue(s.tracestate)]++
			if s.tracestate != ts {
				p.add("wrong tracestate", "%s %s: %q, want %q", tr.id, s.span, s.tracestate, ts)
			}
			if s.hasCount {
				p.add("wrote an adjusted count", "%s %s: %s", tr.id, s.span, s.countOf())
			}
		}
	}
	return p, n, ths
}
