package sampling

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The served fleet: 4,000 traces of the calls model (callsmodel_test.go),
// about one in nine failed somewhere, with retried, failed and given-up
// backend calls.
var servedFleet = fleetOptions{traces: 4000, calls: true}

// maxZ is how many standard errors an estimate may be from the truth.
const maxZ = 4

// sampler is what a case's collector does to a trace, as the checks
// compute it from the trace alone.
type sampler struct {
	keep func(*fleetTrace) bool    // kept (deterministic: the processor's own decision)
	p    func(*fleetTrace) float64 // the probability the sampler keeps such a trace with
	a    func(*fleetTrace) float64 // the adjusted count serve is to read on a kept trace
}

// probabilistic10 is probabilistic-sampling.yaml: every trace whose
// randomness is at least the threshold 0xe666·2^40, p = 1 − 0xe666/2^16 =
// 6554/65536, recorded as ot=th:e666: adjusted count 65536/6554.
var probabilistic10 = sampler{
	keep: func(tr *fleetTrace) bool { return w3cRandomness(tr.id) >= thresholdOf("e666") },
	p:    func(*fleetTrace) float64 { return probabilityOf("e666") },
	a:    func(*fleetTrace) float64 { return 1 / probabilityOf("e666") },
}

// tail5 is tail-sampling.yaml: every trace with an ERROR span (p = 1,
// recorded 1) and the others whose hash falls in 5 % (p = 0.05, recorded
// 20).
var tail5 = sampler{
	keep: func(tr *fleetTrace) bool { return tr.hasError || tailProbabilistic(tr.id, "", 5) },
	p: func(tr *fleetTrace) float64 {
		if tr.hasError {
			return 1
		}
		return 0.05
	},
	a: func(tr *fleetTrace) float64 {
		if tr.hasError {
			return 1
		}
		return 20
	},
}

// tail5Unrecorded is tail-sampling.yaml without the feature gate: the
// same traces kept, nothing recorded (every kept trace counts once).
var tail5Unrecorded = sampler{keep: tail5.keep, p: tail5.p, a: func(*fleetTrace) float64 { return 1 }}

// TestServedEstimates puts a real `stormradius serve` (embedded store)
// behind a real collector running a shipped sampling config, the
// collector's pipeline also exporting to the test's sink (the kept
// traffic, captured), sends it the unsampled traffic of the calls model,
// and checks:
//
//   - first, once: `stormradius analyze` of the unsampled traffic (the
//     truth) has every figure the model says, exactly, and says nothing
//     was sampled;
//   - the collector kept exactly the traces its sampler keeps;
//   - serve's figures (REST /api/v1/fleet, /apis, /services over a range
//     that holds every trace) are `stormradius analyze` of the kept
//     traffic, field by field, and so is `stormradius report` on its
//     store;
//   - every count figure the model gives a per-trace value x for is
//     within maxZ standard errors of the truth, the standard error of a
//     Horvitz–Thompson total under the sampler's probabilities,
//     √Σ (1−p)/p · x² over every trace sent; and it lies between Σ ⌊a⌋x
//     and Σ ⌈a⌉x over the kept traces (a their adjusted count: each
//     trace's weight is a rounded up or down);
//   - sampling: traces and spans received are those kept, the effective
//     sample size Kish's of the kept traces' adjusted counts, the 95 %
//     intervals of the failed-trace and root-error rates hold the truth
//     when stretched to maxZ standard errors (and are as wide as the
//     model's standard error says, within a factor 2, for the fleet);
//     tail sampling suspected exactly when the kept traces that count
//     once show the tail_sampling hash's tell-tale (docs/SPEC.md §4.9:
//     ≥ 30 of them without a failure, 6 standard deviations in the
//     hash's lower half), with a warning naming it.
//
// The tail case without the feature gate records nothing: tail sampling
// must be suspected, and the estimate checks must fail (the kept traffic
// counted once is far from the truth): they are the negative control.
func TestServedEstimates(t *testing.T) {
	setup(t)
	f := newFleet(servedFleet)
	figs := fleetFigures(f)
	vals := make([]map[figure]float64, len(f.traces))
	for i, tr := range f.traces {
		vals[i] = tr.values()
	}
	t.Logf("the calls model: %d traces, %d failed, %d spans; by API and outcome %v", len(f.traces), f.errors, spansOf(f), outcomes(f))

	truthFile := writeJSONLines(t, t.TempDir(), "unsampled.jsonl", f.requests...)
	out, err := analyze(truthFile)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := e2ekit.DecodeDoc(out)
	if err != nil {
		t.Fatal(err)
	}
	checkTruth(t, f, figs, vals, truth)

	for _, c := range []struct {
		name    string
		bin     string
		config  string
		flags   []string
		sampler sampler
		control bool // the estimate checks must fail
	}{
		{name: "probabilistic", bin: suite.otelcol, config: "probabilistic-sampling.yaml", sampler: probabilistic10},
		{name: "tail", bin: suite.lbcol, config: "tail-sampling.yaml", flags: []string{"--feature-gates=" + gateRecordPolicy}, sampler: tail5},
		// Without the feature gate the shipped config records nothing.
		{name: "negative-control/tail-without-recorded-probabilities", bin: suite.lbcol, config: "tail-sampling.yaml",
			sampler: tail5Unrecorded, control: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sink := startSink(t)
			svc := startServe(t)
			r := &run{collector: startCollector(t, c.bin, c.config, svc.grpc, captureOverride(sink.addr), c.flags...), sink: sink}
			r.send(t, f.requests...)
			kept := r.finish(t, r.settle(t, 0))
			keptSpans := distinctSpans(kept)
			served := svc.served(t, keptSpans)
			keptIDs := keptTraceIDs(kept)

			// The collector kept what its sampler keeps.
			wrong := 0
			for _, tr := range f.traces {
				if keptIDs[tr.id] != c.sampler.keep(tr) {
					wrong++
				}
			}
			if wrong > 0 || len(keptIDs) == 0 {
				t.Errorf("the collector kept %d traces; %d of the %d sent decided otherwise than its sampler does", len(keptIDs), wrong, len(f.traces))
			}

			// Exactness: serve's figures are analyze's of the kept traffic.
			keptFile := writeJSONLines(t, t.TempDir(), "kept.jsonl", kept)
			want, err := analyze(keptFile)
			if err != nil {
				t.Fatal(err)
			}
			if rep, err := svc.report(); err != nil {
				t.Error(err)
			} else {
				compareDocs(t, "`stormradius report` on serve's store", rep, want)
			}
			compareDocs(t, "serve's REST answers", restOf(t, served), restPart(t, want, served))

			// Estimates against the truth.
			est := checkEstimates(f, figs, vals, keptIDs, c.sampler, served)
			t.Logf("kept %d traces, %d spans; figures (truth, estimate, standard error, z; kept Σx):\n%s", len(keptIDs), keptSpans, est.table)
			switch {
			case c.control && est.problems.empty():
				t.Errorf("the kept traffic counted once passed the estimate checks: they cannot tell a sample from the traffic")
			case c.control:
				t.Logf("as it must, the negative control fails the estimate checks:\n%s", est.problems.String())
			case !est.problems.empty():
				t.Errorf("serve's estimates are not what the sampler's probabilities allow:\n%s", est.problems.String())
			}
			p := checkSampling(f, vals, keptIDs, keptSpans, c.sampler, !c.control, served)
			t.Logf("sampling:\n%s", p.log)
			if !p.problems.empty() {
				t.Errorf("serve's sampling figures are wrong:\n%s", p.problems.String())
			}
		})
	}
}

// spansOf is how many spans f sent.
func spansOf(f *fleet) int {
	n := 0
	for _, tr := range f.traces {
		n += tr.spans
	}
	return n
}

// distinctSpans is how many distinct (trace, span) ids td holds.
func distinctSpans(td ptrace.Traces) int {
	type key struct {
		t pcommon.TraceID
		s pcommon.SpanID
	}
	seen := map[key]bool{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				seen[key{sp.TraceID(), sp.SpanID()}] = true
			}
		}
	}
	return len(seen)
}

// checkTruth checks `stormradius analyze` of the unsampled traffic
// against the model: every figure exactly, and nothing sampled.
func checkTruth(t *testing.T, f *fleet, figs []figure, vals []map[figure]float64, truth map[string]any) {
	t.Helper()
	p := &problems{}
	for _, g := range figs {
		want := 0.0
		for _, v := range vals {
			want += v[g]
		}
		got, err := value(truth, g)
		switch {
		case err != nil:
			p.add("a figure the document lacks", "%v", err)
		case got != want:
			p.add("a figure other than the model's", "%s: %v, the model says %v", g, got, want)
		}
	}
	n := float64(len(f.traces))
	for path, want := range map[string]any{
		"sampling.traces_received": n, "sampling.traces_estimated": n, "sampling.effective_sample_size": n,
		"sampling.estimated": false, "sampling.tail_sampling_suspected": false,
	} {
		v, _ := at(truth, path)
		if num, ok := v.(json.Number); ok {
			v, _ = num.Float64()
		}
		if v != want {
			p.add("unsampled traffic taken for sampled", "%s: %v, want %v", path, v, want)
		}
	}
	if !p.empty() {
		t.Errorf("`stormradius analyze` of the unsampled traffic is not the model's truth:\n%s", p.String())
	}
}

// compareDocs fails the test, listing the differing fields, unless got
// is the document want.
func compareDocs(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if err := e2ekit.SameDoc(got, want); err != nil {
		t.Errorf("%s differ from `stormradius analyze` of the kept traffic in %v", what, err)
	}
}

// restOf is the served document as JSON.
func restOf(t *testing.T, served map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(served)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// restPart is the part of the document want that the REST answers hold
// (the fields of served).
func restPart(t *testing.T, want []byte, served map[string]any) []byte {
	t.Helper()
	doc, err := e2ekit.DecodeDoc(want)
	if err != nil {
		t.Fatal(err)
	}
	part := map[string]any{}
	for k := range served {
		if v, ok := doc[k]; ok {
			part[k] = v
		}
	}
	return restOf(t, part)
}

// estimates is what checkEstimates found.
type estimates struct {
	problems *problems
	table    string
}

// checkEstimates checks every figure of served against the truth the
// model gives, within maxZ standard errors, and against the kept
// traces' adjusted counts.
func checkEstimates(f *fleet, figs []figure, vals []map[figure]float64, kept map[pcommon.TraceID]bool, s sampler, served map[string]any) estimates {
	p := &problems{}
	var b strings.Builder
	for _, g := range figs {
		var truth, variance, lo, hi, keptX float64
		for i, tr := range f.traces {
			x := vals[i][g]
			truth += x
			pr := s.p(tr)
			variance += (1 - pr) / pr * x * x
			if kept[tr.id] {
				a := s.a(tr)
				lo += math.Floor(a) * x
				hi += math.Ceil(a) * x
				keptX += x
			}
		}
		got, err := value(served, g)
		if err != nil {
			p.add("a figure serve does not serve", "%v", err)
			continue
		}
		se := math.Sqrt(variance)
		z := 0.0
		if se > 0 {
			z = (got - truth) / se
		}
		fmt.Fprintf(&b, "    %-58s %8.0f %8.0f %7.1f %6.2f   %6.0f\n", g, truth, got, se, z, keptX)
		if math.Abs(got-truth) > maxZ*se {
			p.add(fmt.Sprintf("an estimate more than %d standard errors from the truth", maxZ),
				"%s: %v, truth %v, standard error %.1f (z = %.1f)", g, got, truth, se, z)
		}
		if got < lo || got > hi {
			p.add("an estimate the kept traces' adjusted counts cannot give",
				"%s: %v, the kept traces' Σ⌊a⌋x to Σ⌈a⌉x are %v to %v", g, got, lo, hi)
		}
	}
	return estimates{problems: p, table: b.String()}
}

// samplingCheck is what checkSampling found.
type samplingCheck struct {
	problems *problems
	log      string
}

// tailRE is a warning that names tail sampling; boundRE one that says
// the fraction kept is about 1/16 or less.
var (
	tailRE  = regexp.MustCompile(`(?i)tail.sampling`)
	boundRE = regexp.MustCompile(`1/16|6\.25 ?%`)
)

// checkSampling checks served's sampling objects, the fleet's and each
// API's: what was received, the effective sample size, whether some
// trace stood for more than itself, tail sampling suspected, and (with
// intervals) the 95 % intervals of the failed-trace and root-error rates.
func checkSampling(f *fleet, vals []map[figure]float64, kept map[pcommon.TraceID]bool, keptSpans int, s sampler, intervals bool, served map[string]any) samplingCheck {
	p := &problems{}
	var b strings.Builder
	for _, scope := range []string{"", apiDispatch, apiHealth} { // "": the fleet
		obj, name := served, "fleet"
		if scope != "" {
			obj, name = element(served, "apis", scope), scope
			if obj == nil {
				p.add("an API not served", "%s", scope)
				continue
			}
		}
		var received, sumA, sumA2 float64
		estimated := false
		// The kept traces that count once, by failure and hash half.
		var clean, cleanLow, failed, failedLow float64
		integral := true // every kept trace's adjusted count an integer
		for _, tr := range f.traces {
			if scope != "" && tr.api != scope || !kept[tr.id] {
				continue
			}
			a := s.a(tr)
			integral = integral && a == math.Floor(a)
			received++
			sumA += a
			sumA2 += a * a
			estimated = estimated || a > 1
			if a == 1 {
				low := tailProbabilistic(tr.id, "", 50)
				if tr.hasError {
					failed++
					if low {
						failedLow++
					}
				} else {
					clean++
					if low {
						cleanLow++
					}
				}
			}
		}
		halfZ := func(low, n float64) float64 {
			if n == 0 {
				return 0
			}
			return (2*low - n) / math.Sqrt(n)
		}
		suspected := clean >= 30 && halfZ(cleanLow, clean) >= 6 && !(failed >= 30 && halfZ(failedLow, failed) >= 3)
		num := func(path string) float64 {
			v, ok := number(obj, "sampling."+path)
			if !ok {
				p.add("a sampling figure not served", "%s: sampling.%s", name, path)
			}
			return v
		}
		flag := func(path string) bool {
			v, ok := at(obj, "sampling."+path)
			if _, isBool := v.(bool); !ok || !isBool {
				p.add("a sampling flag not served", "%s: sampling.%s", name, path)
			}
			return v == true
		}
		gotReceived := num("traces_received")
		if gotReceived != received {
			p.add("traces received other than kept", "%s: %v, kept %v", name, gotReceived, received)
		}
		if scope == "" {
			if got := num("spans_received"); got != float64(keptSpans) {
				p.add("spans received other than kept", "%s: %v, kept %v", name, got, keptSpans)
			}
		}
		// Kish's effective sample size of the kept traces' weights: exact
		// when every adjusted count is an integer (the weight is it),
		// else within 1 % of the adjusted counts' own.
		kish := sumA * sumA / sumA2
		ess := num("effective_sample_size")
		tol := 1e-9 * kish
		if !integral {
			tol = 0.01 * kish
		}
		if math.Abs(ess-kish) > tol {
			p.add("an effective sample size other than Kish's of the kept traces", "%s: %v, want %v ± %v", name, ess, kish, tol)
		}
		gotEstimated, gotSuspected := flag("estimated"), flag("tail_sampling_suspected")
		if gotEstimated != estimated {
			p.add("estimated wrong", "%s: %v, want %v", name, gotEstimated, estimated)
		}
		if gotSuspected != suspected {
			p.add("tail sampling suspected wrong", "%s: %v, want %v (of the kept traces that count once: %v without a failure, %v of them in the hash's lower half; %v failed, %v)",
				name, gotSuspected, suspected, clean, cleanLow, failed, failedLow)
		}
		var warnings []string
		ws, ok := at(obj, "sampling.warnings")
		list, isList := ws.([]any)
		if !ok || !isList {
			p.add("sampling warnings not served", "%s: %v", name, ws)
		}
		for _, w := range list {
			warnings = append(warnings, fmt.Sprint(w))
		}
		named := false
		for _, w := range warnings {
			if tailRE.MatchString(w) {
				named = true
				if !boundRE.MatchString(w) {
					p.add("a tail-sampling warning without the bound", "%s: %q", name, w)
				}
			}
		}
		if named != suspected {
			p.add("a warning naming tail sampling, or none, wrongly", "%s: suspected %v, warnings %q", name, suspected, warnings)
		}
		fmt.Fprintf(&b, "    %s: traces received %v (kept %v), effective sample size %.2f (Kish of the kept %.2f), estimated %v (want %v), "+
			"tail sampling suspected %v (want %v: counting once, %v without a failure, %v of them in the hash's lower half; %v failed, %v), warnings %q\n",
			name, gotReceived, received, ess, kish, gotEstimated, estimated, gotSuspected, suspected, clean, cleanLow, failed, failedLow, warnings)

		if !intervals {
			continue
		}
		for _, rate := range []struct {
			path string
			y    func(i int) float64
		}{
			{"failed_trace_rate", func(i int) float64 { return vals[i][figure{"apis", f.traces[i].api, "failed_traces"}] }},
			{"root_error_rate", func(i int) float64 { return vals[i][figure{"apis", f.traces[i].api, "root_errors"}] }},
		} {
			var sy, sx float64
			for i, tr := range f.traces {
				if scope == "" || tr.api == scope {
					sy += rate.y(i)
					sx++
				}
			}
			r := sy / sx
			var v float64
			for i, tr := range f.traces {
				if scope == "" || tr.api == scope {
					pr := s.p(tr)
					d := rate.y(i) - r
					v += (1 - pr) / pr * d * d
				}
			}
			se := math.Sqrt(v) / sx
			est, low, high := num(rate.path+".estimate"), num(rate.path+".low"), num(rate.path+".high")
			stretch := maxZ / 1.96
			lo, hi := est-stretch*(est-low), est+stretch*(high-est)
			fmt.Fprintf(&b, "      %s: truth %.4f, served %.4f [%.4f, %.4f], model standard error %.4f\n", rate.path, r, est, low, high, se)
			if !(low <= est && est <= high) {
				p.add("an interval without its estimate", "%s %s: %v [%v, %v]", name, rate.path, est, low, high)
			}
			if r < lo-1e-12 || r > hi+1e-12 {
				p.add(fmt.Sprintf("a rate's truth outside its 95 %% interval stretched to %d standard errors", maxZ),
					"%s %s: truth %.4f, served %.4f [%.4f, %.4f], stretched [%.4f, %.4f]", name, rate.path, r, est, low, high, lo, hi)
			}
			if half := (high - low) / 2; scope == "" && se > 0 && (half < 0.5*1.96*se || half > 2*1.96*se) {
				p.add("a 95 % interval whose width the model's standard error does not explain",
					"%s %s: half-width %.4f, 1.96 × the model's standard error %.4f", name, rate.path, half, 1.96*se)
			}
		}
	}
	return samplingCheck{problems: p, log: b.String()}
}
