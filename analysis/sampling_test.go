package analysis_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/sim"
)

// samplingScenario is a mesh with errors, fail-open edges, retries and
// persistent faults: enough failed calls for the failure memory to
// learn, incidents, claims.
func samplingScenario(seed uint64, traces int) sim.Scenario {
	sc := sim.Mesh(sim.MeshConfig{Seed: seed, APIs: 3, Depth: 5, Fanout: 2, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.02,
		Policy: sim.Policy{Retry: sim.RetryNaive, Retries: 1, Claims: sim.ClaimsHonest, ResendAttr: true}})
	sc.Traces = traces
	sc.Faults = []sim.Fault{{Service: "svc-3-1", Rate: 0.3, Persistent: true}, {Service: "svc-2-0", Rate: 0.1}}
	return sc
}

// withoutSampling clears what only a weighted analysis says (how sure
// it is) and the example traces (whose ids differ between copies).
func withoutSampling(d *analysis.Document) string {
	d.Sampling = analysis.FleetSamplingDoc{}
	for i := range d.APIs {
		d.APIs[i].Sampling = analysis.SamplingDoc{}
	}
	for i := range d.Incidents {
		d.Incidents[i].ExampleTraces = nil
	}
	b, _ := json.MarshalIndent(d, "", " ")
	return string(b)
}

// A trace weighted k is, for every figure but how sure they are, the
// same as k copies of it (docs/SPEC.md §4.9): counts, rates, histograms,
// what the windows learn (fail-open edges, M_e, claims spoken),
// incidents. The copies are independent of the code under test: the
// oracle is the unweighted analysis.
func TestWeightedEqualsReplicated(t *testing.T) {
	_, spans := simulate(t, samplingScenario(11, 3000))
	groups := graph.GroupTraces(spans)
	var weighted, copies [][]graph.Span
	var received, estimated int64
	for _, g := range groups {
		k := 1 + int(g[0].TraceID[15]%4)
		received++
		estimated += int64(k)
		w := append([]graph.Span(nil), g...)
		for i := range w {
			w[i].Sampling, w[i].AdjustedCount = graph.SamplingRecorded, float64(k)
		}
		weighted = append(weighted, w)
		for c := 0; c < k; c++ {
			cp := append([]graph.Span(nil), g...)
			for i := range cp {
				cp[i].TraceID[0] ^= byte(c) << 4
				cp[i].TraceID[1] ^= 0x5a * byte(c)
			}
			copies = append(copies, cp)
		}
	}
	wd, _ := analysis.InMemory(graph.Lists(weighted), analysis.Config{}, 1)
	cd, _ := analysis.InMemory(graph.Lists(copies), analysis.Config{}, 1)
	if wd.Sampling.TracesReceived != received || wd.Traces != estimated || cd.Traces != estimated {
		t.Fatalf("received %d estimated %d (copies %d), want %d and %d", wd.Sampling.TracesReceived, wd.Traces, cd.Traces, received, estimated)
	}
	if !wd.Sampling.Estimated || cd.Sampling.Estimated {
		t.Fatalf("estimated: weighted %v, copies %v", wd.Sampling.Estimated, cd.Sampling.Estimated)
	}
	if len(wd.Incidents) == 0 {
		t.Fatal("the scenario has no incident: it checks too little")
	}
	learned := 0
	for _, e := range wd.Edges {
		if e.FailOpenSource == "learned" {
			learned++
		}
	}
	if learned == 0 {
		t.Fatal("the scenario learns no edge: it checks too little")
	}
	if w, c := withoutSampling(wd), withoutSampling(cd); w != c {
		t.Fatalf("weighted and replicated documents differ:\n%s", firstDiff(w, c))
	}
}

func firstDiff(a, b string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			lo := max(0, i-300)
			return "weighted: …" + a[lo:min(len(a), i+200)] + "\n\nreplicated: …" + b[lo:min(len(b), i+200)]
		}
	}
	return "lengths differ"
}

// sampled simulates sc, samples its traces with s (nil: none) and
// analyses what was kept as one batch.
func sampled(t *testing.T, sc sim.Scenario, s sim.Sampler) (*analysis.Document, *sim.SampleStats) {
	t.Helper()
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	data := res.TraceData()
	var st *sim.SampleStats
	if s != nil {
		if data, st, err = sim.Sample(data, s); err != nil {
			t.Fatal(err)
		}
	}
	dec := ingest.NewDecoder(ingest.DecoderConfig{})
	var spans []graph.Span
	for _, td := range data {
		spans = dec.AppendTraces(spans, td)
	}
	doc, _ := analysis.InMemory(graph.Lists(graph.GroupTraces(spans)), analysis.Config{}, 1)
	return doc, st
}

// Tail sampling that records no probability is told from the trace ids
// (docs/SPEC.md §4.9): the collector's policy keeps the traces without a
// failure by the hash of their id, so those hashes lie low while the
// failed traces' spread. Unsampled traffic, head sampling (other bits of
// the id) and tail sampling that records its probabilities say nothing.
func TestTailSamplingDetected(t *testing.T) {
	sc := samplingScenario(21, 6000)
	for _, c := range []struct {
		name    string
		s       sim.Sampler
		suspect bool
		bound   float64
	}{
		{"unsampled", nil, false, 0},
		{"tail 5%, nothing recorded", sim.Tail{Fraction: 0.05, Record: sim.RecordNone}, true, 1.0 / 16},
		{"tail 30%, nothing recorded", sim.Tail{Fraction: 0.3, Record: sim.RecordNone}, true, 0.5},
		{"head 10% by the trace id", sim.Head{Rates: map[string]float64{"api-0": 0.1, "api-1": 0.1, "api-2": 0.1}}, false, 0},
		{"collector's probabilistic sampler 10%", sim.Probabilistic{Percentage: 10}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc, _ := sampled(t, sc, c.s)
			if doc.Sampling.TailSamplingSuspected != c.suspect {
				t.Fatalf("suspected %v, want %v: %q", doc.Sampling.TailSamplingSuspected, c.suspect, doc.Sampling.Warnings)
			}
			if !c.suspect {
				return
			}
			if len(doc.Sampling.Warnings) == 0 || !strings.Contains(doc.Sampling.Warnings[0], "tail_sampling") ||
				!strings.Contains(doc.Sampling.Warnings[0], fmt.Sprintf("%.3g %%", 100*c.bound)) {
				t.Fatalf("warnings %q, want one bounding q at %v", doc.Sampling.Warnings, c.bound)
			}
			n := 0
			for _, a := range doc.APIs {
				if a.Sampling.TailSamplingSuspected {
					n++
				}
			}
			if n == 0 {
				t.Fatal("no API suspected")
			}
		})
	}
}

// Bad sampling information (docs/SPEC.md §2, "sampling"; §4.9): every
// trace is analysed; one whose deciding (root) span recorded something
// unusable counts once and is counted as unusable; what is valid (th:0 is
// a probability of 1; the first ot member of a list that repeats it; a
// th before an over-long member) counts as recorded. Expected by kind,
// from the rules, over sim's spoiled records.
func TestUnusableSampling(t *testing.T) {
	sc := samplingScenario(31, 1600)
	doc, st := sampled(t, sc, sim.Corrupt{Fraction: 0.6, Seed: 3})
	weight := map[sim.Corruption]int64{
		sim.ThZero: 1, sim.ThDuplicateOT: 2, sim.ThHuge: 2, // valid: p = 1, th:8, th:8
	}
	var unusable, estimated, corrupted int64
	kinds := map[sim.Corruption]bool{}
	for _, ts := range st.PerTrace {
		if !ts.Kept {
			continue
		}
		w := int64(1)
		if ts.Corruption != sim.CorruptNone {
			corrupted++
			kinds[ts.Corruption] = true
			if x, ok := weight[ts.Corruption]; ok {
				w = x
			} else {
				unusable++
			}
		}
		estimated += w
	}
	if len(kinds) != len(sim.Corruptions()) {
		t.Fatalf("%d kinds of corruption in the sample, want all %d", len(kinds), len(sim.Corruptions()))
	}
	if doc.Sampling.TracesReceived != int64(st.Kept) || doc.Traces != estimated || doc.Sampling.UnusableTraces != unusable {
		t.Fatalf("received %d, estimated %d, unusable %d; want %d, %d, %d (of %d corrupted)",
			doc.Sampling.TracesReceived, doc.Traces, doc.Sampling.UnusableTraces, st.Kept, estimated, unusable, corrupted)
	}
	if !strings.Contains(strings.Join(doc.Sampling.Warnings, " "), "unusable") {
		t.Fatalf("warnings %q: none about the unusable sampling", doc.Sampling.Warnings)
	}
}
