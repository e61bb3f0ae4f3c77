package sampling

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The feature gates of tail_sampling (contrib v0.161.0) the cases turn on:
// recordpolicy writes the name of the policy that kept a trace into its
// spans' scope attribute tailsampling.policy (tail-sampling.yaml needs
// it); usetracestate writes the effective threshold into their
// tracestate's ot=th.
const (
	gateRecordPolicy  = "processor.tailsamplingprocessor.recordpolicy"
	gateUseTracestate = "processor.tailsamplingprocessor.usetracestate"
)

// The tail-sampling fleet: 4,000 traces, every 10th with an error (400),
// every 9th arriving with an adjusted count of 4 already (sampled once
// before this collector).
var tailFleet = fleetOptions{traces: 4000, errorEvery: 10, upstreamEvery: 9, upstreamCount: 4}

// TestTailSampling runs deploy/collector/tail-sampling.yaml on the
// collector at the v0.161 line (tail_sampling, transform) with the
// feature gate it needs, on the fleet's traces, and checks, trace by
// trace, what reached the sink: every trace with an error kept, whole,
// each span with sampling.adjusted_count 1 (its upstream count, when it
// came with one); exactly the other traces the probabilistic policy's
// hash keeps (5 %, within binomial bounds), whole, each span with 20
// (upstream × 20); nothing else; an error trace that also falls in the
// 5 % weighted 1. Late spans of kept traces get their trace's count; a
// late error does not bring back a dropped trace.
func TestTailSampling(t *testing.T) {
	setup(t)
	f := newFleet(tailFleet)
	cfg := readTailConfig(t)
	for _, c := range []struct {
		name     string
		gates    []string
		override string // YAML merged over the shipped config
		late     bool   // send late spans after the decisions
		control  bool   // the checks must find problems
	}{
		{name: "shipped", gates: []string{gateRecordPolicy}, late: true},
		// Both gates: tail_sampling also writes ot=th itself (th:0 for a
		// trace an error kept, the 5 % threshold for the others).
		{name: "usetracestate", gates: []string{gateRecordPolicy, gateUseTracestate}},
		// Without the gate the transform finds no policy name and writes
		// nothing: the checks must say so.
		{name: "negative-control/no-feature-gate", control: true},
		// Without the decision cache a late span of a kept trace is still
		// kept, but without the policy's name: no adjusted count.
		{name: "negative-control/no-decision-cache", gates: []string{gateRecordPolicy}, late: true, control: true,
			override: "processors:\n  tail_sampling:\n    decision_cache:\n      sampled_cache_size: 0\n      non_sampled_cache_size: 0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var flags []string
			for _, g := range c.gates {
				flags = append(flags, "--feature-gates="+g)
			}
			r := startRun(t, suite.lbcol, "tail-sampling.yaml", c.override, flags...)
			r.send(t, f.requests...)
			settled := r.settle(t, 0)
			extra := map[pcommon.TraceID]int{}
			if c.late {
				settled = sendLate(t, r, f, cfg, settled, extra)
			}
			kept := r.finish(t, settled)

			want := tailWant{cfg: cfg, th: contains(c.gates, gateUseTracestate), extra: extra}
			p, st := checkTail(f, kept, want)
			t.Logf("kept %d of %d error traces and %d of %d others (%.2f %%; %d to %d expected of 5 %%); "+
				"%d error traces also in the 5 %%, %d of them weighted as errors; %d late spans; %d spans in all; tracestates %v",
				st.errorsKept, f.errors, st.othersKept, len(f.traces)-f.errors, 100*float64(st.othersKept)/float64(len(f.traces)-f.errors),
				st.lo, st.hi, st.overlap, st.overlapAsErrors, st.late, kept.SpanCount(), st.tracestates)
			switch {
			case c.control && p.empty():
				t.Errorf("without %s the checks found nothing wrong: they cannot tell a recorded adjusted count from none", gateRecordPolicy)
			case c.control:
				t.Logf("as it must, the negative control fails the checks:\n%s", p.String())
			case !p.empty():
				t.Errorf("what the collector kept is not what tail-sampling.yaml promises:\n%s", p.String())
			}
		})
	}
}

// tailConfig is what the checks read of the shipped tail-sampling.yaml:
// the probabilistic policy's percentage and hash salt.
type tailConfig struct {
	pct  float64
	salt string
}

var (
	pctRE  = regexp.MustCompile(`(?m)^\s*sampling_percentage:\s*([0-9.]+)\s*$`)
	saltRE = regexp.MustCompile(`(?m)^\s*hash_salt:\s*"?([^"\n]*?)"?\s*$`)
)

func readTailConfig(t *testing.T) tailConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(suite.configs, "tail-sampling.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c tailConfig
	m := pctRE.FindAllSubmatch(b, -1)
	if len(m) != 1 {
		t.Fatalf("tail-sampling.yaml: %d sampling_percentage lines, want the probabilistic policy's one", len(m))
	}
	if c.pct, err = strconv.ParseFloat(string(m[0][1]), 64); err != nil || c.pct <= 0 || c.pct > 100 {
		t.Fatalf("tail-sampling.yaml: sampling_percentage %s", m[0][1])
	}
	if s := saltRE.FindSubmatch(b); s != nil {
		c.salt = string(s[1])
	}
	return c
}

// tailWant is what the checks expect of the kept traffic.
type tailWant struct {
	cfg   tailConfig
	th    bool                    // tail_sampling wrote ot=th (usetracestate)
	extra map[pcommon.TraceID]int // late spans kept, per trace
}

type tailStats struct {
	errorsKept, othersKept, lo, hi int
	overlap, overlapAsErrors, late int
	tracestates                    map[string]int // kept spans per tracestate
}

// checkTail compares the kept traffic with what the policies must keep,
// trace by trace (the hash policy's choice computed as the processor
// does), and returns what differs.
func checkTail(f *fleet, kept ptrace.Traces, w tailWant) (*problems, tailStats) {
	p := &problems{}
	st := tailStats{tracestates: map[string]int{}}
	st.lo, st.hi = binomialBounds(len(f.traces)-f.errors, w.cfg.pct/100)
	per := math.Round(100 / w.cfg.pct) // the 5 % policy's adjusted count
	got := byTrace(kept)
	for id := range got {
		if f.byID[id] == nil {
			p.add("kept a trace that was never sent", "%s", id)
		}
	}
	for _, tr := range f.traces {
		inHash := tailProbabilistic(tr.id, w.cfg.salt, w.cfg.pct)
		if tr.hasError && inHash {
			st.overlap++
		}
		spans, isKept := got[tr.id]
		switch {
		case !isKept && tr.hasError:
			p.add("dropped a trace with an error", "%s", tr.id)
			continue
		case !isKept && inHash:
			p.add("dropped a trace the 5 % policy keeps", "%s", tr.id)
			continue
		case !isKept:
			continue
		case !tr.hasError && !inHash:
			p.add("kept a trace neither policy keeps", "%s", tr.id)
			continue
		}
		if tr.hasError {
			st.errorsKept++
		} else {
			st.othersKept++
		}
		st.late += w.extra[tr.id]
		if n, want := len(spans), tr.spans+w.extra[tr.id]; n != want {
			p.add("kept a trace in part", "%s: %d spans, sent %d", tr.id, n, want)
		}
		ids := map[pcommon.SpanID]bool{}
		for _, s := range spans {
			ids[s.span] = true
		}
		if len(ids) != len(spans) {
			p.add("sent a span twice", "%s: %d spans, %d distinct", tr.id, len(spans), len(ids))
		}

		policy, count, th := "five-percent", per, ""
		if tr.hasError {
			policy, count, th = "errors", 1, "0"
		}
		if tr.upstream != 0 {
			count *= float64(tr.upstream)
		}
		want := strconv.FormatFloat(count, 'f', -1, 64)
		asErrors := true
		for _, s := range spans {
			st.tracestates[s.tracestate]++
			if s.policy != policy {
				p.add("recorded the wrong policy", "%s %s: %q, want %q", tr.id, s.span, s.policy, policy)
			}
			if got := s.countOf(); got != want {
				p.add("wrong adjusted count", "%s %s (error %v, upstream %d): %s, want %s", tr.id, s.span, tr.hasError, tr.upstream, got, want)
				asErrors = false
			}
			if w.th {
				if th == "" {
					th = tvalue(s.tracestate)
					if pr := probabilityOf(th); math.Abs(pr-w.cfg.pct/100) > 1e-12 || len(th) != 14 {
						p.add("wrong th for the 5 % policy", "%s: th:%s, p = %v", tr.id, th, pr)
					}
				}
				if s.tracestate != "ot=th:"+th {
					p.add("wrong tracestate", "%s %s: %q, want ot=th:%s", tr.id, s.span, s.tracestate, th)
				}
			} else if s.tracestate != "" {
				p.add("wrote a tracestate without usetracestate", "%s %s: %q", tr.id, s.span, s.tracestate)
			}
		}
		if tr.hasError && inHash && asErrors {
			st.overlapAsErrors++
		}
	}
	if st.errorsKept != f.errors {
		p.add("not every error trace kept", "%d of %d", st.errorsKept, f.errors)
	}
	if st.othersKept < st.lo || st.othersKept > st.hi {
		p.add("the 5 % policy kept a count outside its binomial bounds", "%d of %d, bounds %d to %d",
			st.othersKept, len(f.traces)-f.errors, st.lo, st.hi)
	}
	if st.overlap == 0 {
		p.add("no error trace fell in the 5 %", "the precedence of errors over the 5 %% policy went untested")
	}
	return p, st
}

// tvalue is the th of an ot tracestate ("" without one).
func tvalue(tracestate string) string {
	m := regexp.MustCompile(`(?:^|[,;=])th:([0-9a-f]+)`).FindStringSubmatch(tracestate)
	if m == nil {
		return ""
	}
	return m[1]
}

// sendLate sends, once the decisions are out, one late span for each of
// 10 kept error traces (without an upstream count) and 10 traces the 5 %
// kept, which must reach the sink with their trace's adjusted count
// (extra records them), and a late ERROR span for each of 10 dropped
// traces, which must not bring them back. It returns the sink's settled
// span count.
func sendLate(t *testing.T, r *run, f *fleet, cfg tailConfig, settled int, extra map[pcommon.TraceID]int) int {
	t.Helper()
	got := byTrace(r.sink.traces())
	var errs, others, dropped []*fleetTrace
	for _, tr := range f.traces {
		_, kept := got[tr.id]
		switch {
		case kept && tr.hasError && tr.upstream == 0 && len(errs) < 10:
			errs = append(errs, tr)
		case kept && !tr.hasError && len(others) < 10:
			others = append(others, tr)
		case !kept && !tr.hasError && !tailProbabilistic(tr.id, cfg.salt, cfg.pct) && len(dropped) < 10:
			dropped = append(dropped, tr)
		}
	}
	if len(errs) < 10 || len(others) < 10 || len(dropped) < 10 {
		t.Fatalf("too few traces for the late spans: %d error, %d other kept, %d dropped", len(errs), len(others), len(dropped))
	}
	for _, tr := range append(append([]*fleetTrace{}, errs...), others...) {
		extra[tr.id] = 1
	}
	r.send(t, f.lateSpans(append(errs, others...), false), f.lateSpans(dropped, true))
	return r.settle(t, settled)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
