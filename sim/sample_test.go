package sim

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The samplers' expected values below are the collector's own: the
// strings its tests expect (opentelemetry-collector-contrib,
// processor/probabilisticsamplerprocessor/tracesprocessor_test.go:
// Test_tracesamplerprocessor_TraceState, …TraceStateErrors,
// …HashSeedTraceState, TestHashingFunction), or worked out by hand from
// its algorithm where it has no test (comments show the arithmetic).

func mustTID(t *testing.T, s string) pcommon.TraceID {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		t.Fatalf("bad trace id %q", s)
	}
	return pcommon.TraceID(b)
}

// oneSpan is a batch of one root span of service "svc".
func oneSpan(id pcommon.TraceID, tracestate string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(id)
	sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0xfe, 0xfe, 0xfe, 0xfe})
	sp.TraceState().FromRaw(tracestate)
	return td
}

func mustSample(t *testing.T, in []ptrace.Traces, s Sampler) ([]ptrace.Traces, *SampleStats) {
	t.Helper()
	out, st, err := Sample(in, s)
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// forSpans calls f on every span of batches with its resource.
func forSpans(batches []ptrace.Traces, f func(res pcommon.Resource, sp ptrace.Span)) {
	eachSpan(batches, func(_ int, rs ptrace.ResourceSpans, sp ptrace.Span) { f(rs.Resource(), sp) })
}

// Thresholds of probabilities at a precision, as the collector rounds
// them (pkg/sampling ProbabilityToThresholdWithPrecision), worked by hand:
// T = 2^56 - round(p·2^56), one more digit per leading 0 or f, rounded
// half up at that many digits.
func TestProbabilityThreshold(t *testing.T) {
	cases := []struct {
		p    float64
		prec int
		want string
	}{
		{1, 4, "0"},
		{0.5, 4, "8"},                // 2^55
		{0.25, 4, "c"},               // 3·2^54
		{0.1, 4, "e666"},             // 0.9 = 0.e666666…: next digit 6 rounds down
		{0.01, 4, "fd70a"},           // 0.99 = 0.fd70a3d…: a leading f, 5 digits; next 3 rounds down
		{0.01, 3, "fd71"},            // 4 digits: fd70|a rounds up (the collector's "precision 3" case)
		{0.01, 14, "fd70a3d70a3d71"}, // the collector's full-precision 1 %
		{0.4, 3, "99a"},              // 0.6 = 0.999…: rounds up
		{0.4, 6, "99999a"},           // the collector's equalizing 40 % at 6
		{0.2, 6, "cccccd"},           // its proportional 50 % × 40 % at 6
		{0x1p-14, 4, "fffc"},         // 1 - 2^-14, three leading f: 7 digits, exact
		{0x1p-28, 4, "fffffff"},      // its "tiny probability rounding"
	}
	for _, c := range cases {
		th, ok := probabilityThreshold(c.p, c.prec)
		if got := tValue(th); !ok || got != c.want {
			t.Errorf("p=%v precision %d: th %q, want %q", c.p, c.prec, got, c.want)
		}
	}
	for _, p := range []float64{0, -1, math.NaN(), 1.0000001, 0x1p-57} {
		if _, ok := probabilityThreshold(p, 4); ok {
			t.Errorf("p=%v accepted", p)
		}
	}
}

// The processor, span by span, on the collector's own test inputs
// (Test_tracesamplerprocessor_TraceState, both consistent modes).
func TestProbabilisticTraceState(t *testing.T) {
	defaultTID := "fefefefefefefefefe80000000000000" // randomness 2^55: kept at 50 %, not at 49 %
	allF := "ffffffffffffffffffffffffffffffff"
	type want struct {
		kept bool
		ts   string
	}
	dropped := want{}
	cases := []struct {
		name      string
		tid, ts   string
		pct       float32
		prec      int
		failOpen  bool
		prop, equ want
	}{
		{name: "100%", pct: 100, prop: want{true, "ot=th:0"}, equ: want{true, "ot=th:0"}},
		{name: "200% is 100%", pct: 200, prop: want{true, "ot=th:0"}, equ: want{true, "ot=th:0"}},
		{name: "50% kept", pct: 50, prop: want{true, "ot=th:8"}, equ: want{true, "ot=th:8"}},
		{name: "49% dropped", pct: 49},
		{name: "25% kept", tid: "ddddddddddddddddddc0000000000000", pct: 25, prop: want{true, "ot=th:c"}, equ: want{true, "ot=th:c"}},
		{name: "25% dropped", tid: "ddddddddddddddddddb0000000000000", pct: 25},
		{name: "1% rv precision 4", pct: 1, ts: "ot=rv:FD70A3D70A3D71",
			prop: want{true, "ot=rv:FD70A3D70A3D71;th:fd70a"}, equ: want{true, "ot=rv:FD70A3D70A3D71;th:fd70a"}},
		{name: "1% rv precision 3", pct: 1, prec: 3, ts: "ot=rv:FD70A3D70A3D71"},
		{name: "1% rv full precision", pct: 1, prec: 14, ts: "ot=rv:FD70A3D70A3D71",
			prop: want{true, "ot=rv:FD70A3D70A3D71;th:fd70a3d70a3d71"}, equ: want{true, "ot=rv:FD70A3D70A3D71;th:fd70a3d70a3d71"}},
		{name: "1% rv just below", pct: 1, prec: 14, ts: "ot=rv:FD70A3D70A3D70"},
		{name: "1% tid", tid: "a0a0a0a0a0a0a0a0a0fe000000000000", pct: 1,
			prop: want{true, "ot=th:fd70a"}, equ: want{true, "ot=th:fd70a"}},
		{name: "arriving 50% at 50%", pct: 50, ts: "ot=rv:90000000000000;th:80000000000000",
			prop: dropped, equ: want{true, "ot=rv:90000000000000;th:8"}},
		{name: "arriving 50% at 25%", tid: allF, pct: 25, ts: "ot=th:8",
			prop: want{true, "ot=th:e"}, equ: want{true, "ot=th:c"}},
		{name: "equalizing vs proportional", pct: 50, ts: "ot=rv:c0000000000000;th:8",
			prop: want{true, "ot=rv:c0000000000000;th:c"}, equ: want{true, "ot=rv:c0000000000000;th:8"}},
		{name: "inconsistent arriving th, fail open", pct: 100, failOpen: true, ts: "ot=rv:40000000000000;th:8",
			prop: want{true, "ot=rv:40000000000000;th:0"}, equ: want{true, "ot=rv:40000000000000;th:0"}},
		{name: "inconsistent arriving th", pct: 1, ts: "ot=rv:40000000000000;th:8"},
		{name: "40% precision 3 rv", pct: 40, prec: 3, ts: "ot=rv:a0000000000000",
			prop: want{true, "ot=rv:a0000000000000;th:99a"}, equ: want{true, "ot=rv:a0000000000000;th:99a"}},
		{name: "arriving 50% at 40% precision 6", tid: "a0a0a0a0a0a0a0a0a0d0000000000000", pct: 40, prec: 6, ts: "ot=th:8",
			prop: want{true, "ot=th:cccccd"}, equ: want{true, "ot=th:99999a"}},
		{name: "arriving 50% at 40% partly", tid: "a0a0a0a0a0a0a0a0a0b0000000000000", pct: 40, prec: 3, ts: "ot=th:8",
			prop: dropped, equ: want{true, "ot=th:99a"}},
		{name: "tiny probability", tid: "111111111111111111ffffffffffffff", pct: 100 * 0x1p-14, ts: "ot=th:fffc",
			prop: want{true, "ot=th:fffffff"}, equ: want{true, "ot=th:fffc"}},
		{name: "almost 100%", tid: "111111111111111111ffffffffffffff", pct: (1 - 8e-7) * 100, prec: 10,
			prop: want{true, "ot=th:00000cccccccd"}, equ: want{true, "ot=th:00000cccccccd"}},
		{name: "probability underflow", tid: "111111111111111111ffffffffffffff", pct: 0x1p-4, ts: "ot=th:fffffffffffff8",
			prop: dropped, equ: want{true, "ot=th:fffffffffffff8"}},
		// Errors (Test_tracesamplerprocessor_TraceStateErrors): dropped
		// (fail_closed, the default).
		{name: "missing randomness", tid: "00000000000000000000000000000000", pct: 100},
		{name: "rv too long", pct: 100, ts: "ot=rv:abababababababab"},
		{name: "th too long", pct: 100, ts: "ot=th:abababababababab"},
		{name: "th syntax", pct: 100, ts: "ot=th:-1"},
		{name: "inconsistent th, tid", tid: "ffffffffffffffffff70000000000000", pct: 100, ts: "ot=th:8"},
		{name: "inconsistent th, rv", pct: 100, ts: "ot=th:8;rv:70000000000000"},
		{name: "th not hex", pct: 100, ts: "ot=th:zz"},
		{name: "th empty", pct: 100, ts: "ot=th:"},
		{name: "huge tracestate", pct: 100, ts: hugeTraceState},
		// Error, fail open: kept, tracestate untouched.
		{name: "th not hex, fail open", pct: 10, failOpen: true, ts: "ot=th:zz",
			prop: want{true, "ot=th:zz"}, equ: want{true, "ot=th:zz"}},
		// Other vendors' members follow ot, in order, blanks dropped; ot's
		// other sub-keys follow rv and th (w3ctracestate.go and
		// oteltracestate.go Serialize).
		{name: "vendors", tid: allF, pct: 10, ts: " vendor=abc , ,ot=foo:bar;th:0,k@sys=v w",
			prop: want{true, "ot=th:e666;foo:bar,vendor=abc,k@sys=v w"}, equ: want{true, "ot=th:e666;foo:bar,vendor=abc,k@sys=v w"}},
		{name: "th 0 arriving", tid: allF, pct: 50, ts: "ot=th:0",
			prop: want{true, "ot=th:8"}, equ: want{true, "ot=th:8"}},
		// Duplicates are no error: the last ot member wins, as does the
		// last th (common.go scanKeyValues assigns in turn).
		{name: "duplicate ot", tid: allF, pct: 100, ts: "ot=th:8,ot=th:c",
			prop: want{true, "ot=th:c"}, equ: want{true, "ot=th:c"}},
		{name: "duplicate th", tid: allF, pct: 100, ts: "ot=th:8;th:c",
			prop: want{true, "ot=th:c"}, equ: want{true, "ot=th:c"}},
	}
	for _, c := range cases {
		for _, mode := range []ProbMode{ModeProportional, ModeEqualizing} {
			tid := defaultTID
			if c.tid != "" {
				tid = c.tid
			}
			in := oneSpan(mustTID(t, tid), c.ts)
			out, st := mustSample(t, []ptrace.Traces{in},
				Probabilistic{Percentage: c.pct, Mode: mode, Precision: c.prec, FailOpen: c.failOpen})
			w := c.prop
			if mode == ModeEqualizing {
				w = c.equ
			}
			if (len(out) == 1) != w.kept || st.Kept != len(out) || st.Traces != 1 {
				t.Errorf("%s, %v: kept %d batches, want %v", c.name, mode, len(out), w.kept)
				continue
			}
			if w.kept {
				got := out[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().AsRaw()
				if got != w.ts {
					t.Errorf("%s, %v: tracestate %q, want %q", c.name, mode, got, w.ts)
				}
			}
		}
	}
}

// hash_seed, the default mode: the collector's 50 % decisions for given
// seeds and trace ids (TestHashingFunction, the first dozen of its 100).
func TestHashSeedDecisions(t *testing.T) {
	cases := []struct {
		seed uint32
		tid  string
		kept bool
	}{
		{653, "474a03c76d75951a4b4c537ced8f1122", true},
		{563, "53a518291e91307e43cd8467bb06f986", true},
		{142, "a56a02f843b9bc6ee0b13889249e90e6", true},
		{904, "4e40762d3ee97a1c0932e4fa584f89a8", false},
		{445, "5224507db93db513f0ea2a4b4e0578c8", true},
		{38, "0c8717ced36216037af657e9d7f8b35b", true},
		{561, "2a8aa76c18d08e1e8be935541f9318c7", false},
		{757, "9e3d0f9481dc422cb613ea550897ae71", false},
		{22, "66a66c516ac22054673e5da5e6492545", false},
		{172, "84a1ce7bcea3e66194e72b4aa2694e31", true},
		{552, "a811a7def34ca4b98d8e320afd115fad", false},
		{546, "e3a345cc8dbb6f014bfa1edad3981820", true},
	}
	for _, c := range cases {
		out, _ := mustSample(t, []ptrace.Traces{oneSpan(mustTID(t, c.tid), "")},
			Probabilistic{Percentage: 50, HashSeed: c.seed})
		if (len(out) == 1) != c.kept {
			t.Errorf("seed %d %s: kept %v, want %v", c.seed, c.tid, len(out) == 1, c.kept)
		}
	}
	// A span arriving with rv or th is refused in hash_seed mode: dropped,
	// or kept untouched when failing open.
	for _, ts := range []string{"ot=th:8", "ot=rv:ffffffffffffff"} {
		in := []ptrace.Traces{oneSpan(mustTID(t, "ffffffffffffffffffffffffffffffff"), ts)}
		if out, _ := mustSample(t, in, Probabilistic{Percentage: 100}); len(out) != 0 {
			t.Errorf("%s kept in hash_seed mode", ts)
		}
		out, _ := mustSample(t, in, Probabilistic{Percentage: 100, FailOpen: true})
		if len(out) != 1 || out[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().AsRaw() != ts {
			t.Errorf("%s failing open: not kept untouched", ts)
		}
	}
}

var (
	corpusOnce sync.Once
	corpusRes  *Result
	corpusErr  error
)

// corpus: 15,000 requests over three roots A, B, D (5,000 each), each
// calling C, which fails 3 % of its requests: 3 spans a trace.
func corpus(t *testing.T) *Result {
	t.Helper()
	corpusOnce.Do(func() {
		corpusRes, corpusErr = Run(Scenario{
			Services: []Service{
				{Name: "A", Calls: []Edge{{To: "C"}}},
				{Name: "B", Calls: []Edge{{To: "C"}}},
				{Name: "D", Calls: []Edge{{To: "C"}}},
				{Name: "C", ErrorRate: 0.03},
			},
			Root: "A", Roots: []string{"B", "D"}, Traces: 15000, Seed: 27,
		})
	})
	if corpusErr != nil {
		t.Fatal(corpusErr)
	}
	return corpusRes
}

// within checks that k successes of n trials are within 5 standard
// deviations of n·p.
func within(t *testing.T, what string, k, n int, p float64) {
	t.Helper()
	mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
	if math.Abs(float64(k)-mean) > 5*sd+1e-9 {
		t.Errorf("%s: %d of %d, want %.1f ± 5×%.1f", what, k, n, mean, sd)
	}
}

// wholeTraces checks that every trace is kept whole or not at all.
func wholeTraces(t *testing.T, what string, st *SampleStats) {
	t.Helper()
	for _, tr := range st.PerTrace {
		if tr.KeptSpans != 0 && tr.KeptSpans != tr.Spans {
			t.Fatalf("%s: trace %v kept %d of %d spans", what, tr.ID, tr.KeptSpans, tr.Spans)
		}
	}
}

// hash_seed over the corpus: the th the collector writes for each
// percentage (…HashSeedTraceState, and 1 % by hand), a fresh rv that
// passes it, the decision (FNV-1a of the seed and the id, its low 14 bits
// below ⌊pct × 163.84⌋ in float32), and the kept fraction.
func TestHashSeedCorpus(t *testing.T) {
	r := corpus(t)
	cases := []struct {
		pct    float32
		th     string
		scaled uint32 // ⌊pct × 163.84⌋ in float32
	}{
		{100, "0", 16384},
		{75, "4", 12288},
		{50, "8", 8192},
		{25, "c", 4096},
		{10, "e668", 1638},        // 16384-1638 = 0x399a; <<42 = 0xe668<<40
		{100.0 / 3, "aaac", 5461}, // 16384-5461 = 0x2aab; <<2 = 0xaaac
		{1, "fd74", 163},          // 163.84 in float32 is 163.8399963…; 16384-163 = 0x3f5d; <<2 = 0xfd74
	}
	const seed = 22
	for _, c := range cases {
		out, st := mustSample(t, r.TraceData(), Probabilistic{Percentage: c.pct, HashSeed: seed})
		wholeTraces(t, fmt.Sprint(c.pct), st)
		p := float64(c.scaled) / 16384
		within(t, fmt.Sprintf("hash_seed %v%%", c.pct), st.Kept, st.Traces, p)
		forSpans(out, func(_ pcommon.Resource, sp ptrace.Span) {
			ts := sp.TraceState().AsRaw()
			rv, th, ok := strings.Cut(strings.TrimPrefix(ts, "ot=rv:"), ";th:")
			if !ok || th != c.th || len(rv) != 14 || strings.ToLower(rv) != rv {
				t.Fatalf("%v%%: tracestate %q, want ot=rv:<14 hex>;th:%s", c.pct, ts, c.th)
			}
			if rv < (th + "0000000000000")[:14] {
				t.Fatalf("%v%%: rv %s below th %s", c.pct, rv, th)
			}
		})
		for _, tr := range st.PerTrace {
			f := fnv.New32a()
			f.Write([]byte{seed, 0, 0, 0})
			f.Write(tr.ID[:])
			if want := f.Sum32()&0x3fff < c.scaled; tr.Kept != want {
				t.Fatalf("%v%%: trace %v kept %v, want %v", c.pct, tr.ID, tr.Kept, want)
			}
			if tr.P != p || tr.Recorded != tr.Kept {
				t.Fatalf("%v%%: trace %+v, want P %v", c.pct, tr, p)
			}
		}
	}
}

// Proportional over the corpus: kept exactly when the id's last 56 bits
// are ≥ the threshold, every span with the same th.
func TestProportionalCorpus(t *testing.T) {
	r := corpus(t)
	cases := []struct {
		pct float32
		th  string
		t   uint64
	}{
		{50, "8", 0x8 << 52},
		{10, "e666", 0xe666 << 40},
		{1, "fd70a", 0xfd70a << 36},
	}
	for _, c := range cases {
		out, st := mustSample(t, r.TraceData(), Probabilistic{Percentage: c.pct, Mode: ModeProportional})
		wholeTraces(t, c.th, st)
		p := float64(1<<56-c.t) / (1 << 56)
		within(t, fmt.Sprintf("proportional %v%%", c.pct), st.Kept, st.Traces, p)
		forSpans(out, func(_ pcommon.Resource, sp ptrace.Span) {
			if ts := sp.TraceState().AsRaw(); ts != "ot=th:"+c.th {
				t.Fatalf("%v%%: tracestate %q", c.pct, ts)
			}
		})
		for _, tr := range st.PerTrace {
			low := binary.BigEndian.Uint64(tr.ID[8:]) & (1<<56 - 1)
			if tr.Kept != (low >= c.t) || tr.P != p {
				t.Fatalf("%v%%: trace %+v, randomness %x", c.pct, tr, low)
			}
		}
	}
}

// Exports reach a collector in pieces, shuffled, many traces a request:
// the processor decides each span alone, and the decisions are the same
// as on whole traces.
func TestProbabilisticExports(t *testing.T) {
	r := corpus(t)
	s := Probabilistic{Percentage: 10, Mode: ModeProportional}
	_, whole := mustSample(t, r.TraceData(), s)
	out, st := mustSample(t, r.Exports(3, 64, 50), s)
	wholeTraces(t, "exports", st)
	if st.Traces != whole.Traces || st.Kept != whole.Kept || st.KeptSpans != whole.KeptSpans {
		t.Fatalf("exports: %d/%d kept, whole traces: %d/%d", st.Kept, st.Traces, whole.Kept, whole.Traces)
	}
	for _, tr := range st.PerTrace {
		if w, _ := whole.Trace(tr.ID); w.Kept != tr.Kept || w.P != tr.P {
			t.Fatalf("trace %v: %+v in exports, %+v whole", tr.ID, tr, w)
		}
	}
	n := 0
	forSpans(out, func(pcommon.Resource, ptrace.Span) { n++ })
	if n != st.KeptSpans {
		t.Fatalf("%d spans out, stats say %d", n, st.KeptSpans)
	}
	for _, b := range out {
		if b.ResourceSpans().Len() == 0 {
			t.Fatal("empty batch kept")
		}
	}
}

// Head sampling at the roots: A at 1/2, B at 1/10 (OpenTelemetry,
// precision 4: th:8 and th:e666), D not sampling. Every span of a kept
// trace carries its root's th; D's traces are all kept, untouched.
func TestHeadParentBased(t *testing.T) {
	r := corpus(t)
	thr := map[string]uint64{"A": 0x8 << 52, "B": 0xe666 << 40}
	ths := map[string]string{"A": "ot=th:8", "B": "ot=th:e666", "D": ""}
	out, st := mustSample(t, r.TraceData(), Head{Rates: map[string]float64{"A": 0.5, "B": 0.1}})
	wholeTraces(t, "head", st)
	seen := map[string]int{}
	kept := map[string]int{}
	for _, tr := range st.PerTrace {
		seen[tr.Root]++
		if tr.Kept {
			kept[tr.Root]++
		}
		switch tr.Root {
		case "A", "B":
			low := binary.BigEndian.Uint64(tr.ID[8:]) & (1<<56 - 1)
			p := float64(1<<56-thr[tr.Root]) / (1 << 56)
			if tr.Kept != (low >= thr[tr.Root]) || tr.P != p || tr.Recorded != tr.Kept {
				t.Fatalf("trace %+v", tr)
			}
		case "D":
			if !tr.Kept || tr.P != 1 || tr.Recorded {
				t.Fatalf("unsampled root's trace %+v", tr)
			}
		default:
			t.Fatalf("root %q", tr.Root)
		}
	}
	within(t, "A at 1/2", kept["A"], seen["A"], 0.5)
	within(t, "B at 0.1", kept["B"], seen["B"], float64(1<<56-thr["B"])/(1<<56))
	if seen["A"] != 5000 || seen["B"] != 5000 || kept["D"] != 5000 {
		t.Fatalf("seen %v kept %v", seen, kept)
	}
	forSpans(out, func(_ pcommon.Resource, sp ptrace.Span) {
		tr, _ := st.Trace(sp.TraceID())
		if got := sp.TraceState().AsRaw(); got != ths[tr.Root] {
			t.Fatalf("span of a %s trace: tracestate %q, want %q", tr.Root, got, ths[tr.Root])
		}
	})
	// Horvitz–Thompson: the number of requests per root, and the failed
	// ones, within 5 standard deviations (Σ x²(1-P)/P) of the truth.
	checkHT(t, "head", r, st)
}

// checkHT compares Horvitz–Thompson estimates of the traces and the
// failed traces with the truth, r.
func checkHT(t *testing.T, what string, r *Result, st *SampleStats) {
	t.Helper()
	failed := 0
	for _, tr := range r.Traces {
		if tr.FailedSpans > 0 {
			failed++
		}
	}
	for _, c := range []struct {
		name  string
		truth int
		x     func(TraceSample) float64
	}{
		{"traces", len(r.Traces), func(TraceSample) float64 { return 1 }},
		{"failed traces", failed, func(tr TraceSample) float64 {
			if tr.Failed {
				return 1
			}
			return 0
		}},
	} {
		var v float64
		for _, tr := range st.PerTrace {
			x := c.x(tr)
			v += x * x * (1 - tr.P) / tr.P
		}
		est := st.Estimate(c.x)
		if math.Abs(est-float64(c.truth)) > 5*math.Sqrt(v)+1e-6 {
			t.Errorf("%s: %s estimated %.1f, truth %d (sd %.1f)", what, c.name, est, c.truth, math.Sqrt(v))
		}
	}
}

// Jaeger: kept when the id's last 8 bytes, top bit cleared, are ≤
// ⌊(2^63-1)·p⌋; the root span alone carries sampler.type and
// sampler.param; no tracestate.
func TestHeadJaeger(t *testing.T) {
	r := corpus(t)
	rates := map[string]float64{"A": 0.01, "B": 0.25, "D": 1}
	out, st := mustSample(t, r.TraceData(), Head{Rates: rates, Jaeger: true})
	wholeTraces(t, "jaeger", st)
	seen, kept := map[string]int{}, map[string]int{}
	for _, tr := range st.PerTrace {
		p := rates[tr.Root]
		seen[tr.Root]++
		low := binary.BigEndian.Uint64(tr.ID[8:]) &^ (1 << 63)
		if tr.Kept != (float64(low) <= p*math.MaxInt64) || tr.P != p || tr.Recorded != tr.Kept {
			t.Fatalf("trace %+v", tr)
		}
		if tr.Kept {
			kept[tr.Root]++
		}
	}
	for root, p := range rates {
		within(t, "jaeger "+root, kept[root], seen[root], p)
	}
	roots := 0
	forSpans(out, func(_ pcommon.Resource, sp ptrace.Span) {
		a := sp.Attributes()
		typ, hasType := a.Get(SamplerTypeKey)
		param, hasParam := a.Get(SamplerParamKey)
		if sp.TraceState().AsRaw() != "" {
			t.Fatal("tracestate written in Jaeger mode")
		}
		if !sp.ParentSpanID().IsEmpty() {
			if hasType || hasParam {
				t.Fatal("sampler tags on a child span")
			}
			return
		}
		roots++
		tr, _ := st.Trace(sp.TraceID())
		if !hasType || typ.Str() != "probabilistic" || !hasParam || param.Type() != pcommon.ValueTypeDouble || param.Double() != rates[tr.Root] {
			t.Fatalf("root span attributes %v", a.AsRaw())
		}
	})
	if roots != st.Kept {
		t.Fatalf("%d root spans, %d kept traces", roots, st.Kept)
	}
	checkHT(t, "jaeger", r, st)
}

// Tail: every trace with a failed span is kept (count 1), and of the
// others a fraction q = 5 % chosen by FNV-1a 64 of the salt and the id
// (count 20), recorded where Record says.
func TestTail(t *testing.T) {
	r := corpus(t)
	const q = 0.05
	failed := map[pcommon.TraceID]bool{}
	for _, tr := range r.Traces {
		if tr.FailedSpans > 0 {
			failed[tr.ID] = true
		}
	}
	if len(failed) < 300 {
		t.Fatalf("only %d failed traces in the corpus", len(failed))
	}
	for _, rec := range []Record{RecordEverySpan, RecordRootSpan, RecordResource, RecordNone} {
		out, st := mustSample(t, r.TraceData(), Tail{Fraction: q, Record: rec})
		wholeTraces(t, "tail", st)
		rest, restKept := 0, 0
		for _, tr := range st.PerTrace {
			if tr.Failed != failed[tr.ID] {
				t.Fatalf("trace %v: Failed %v, truth %v", tr.ID, tr.Failed, failed[tr.ID])
			}
			if tr.Failed {
				if !tr.Kept || tr.P != 1 {
					t.Fatalf("failed trace %+v not kept", tr)
				}
				continue
			}
			f := fnv.New64a()
			f.Write([]byte("default-hash-seed"))
			f.Write(tr.ID[:])
			if tr.Kept != (float64(f.Sum64()) <= q*math.MaxUint64) || tr.P != q {
				t.Fatalf("trace %+v", tr)
			}
			rest++
			if tr.Kept {
				restKept++
			}
			if tr.Kept && tr.Recorded != (rec != RecordNone) {
				t.Fatalf("trace %+v, record %d", tr, rec)
			}
		}
		within(t, "tail rest", restKept, rest, q)
		if st.KeptFailed != len(failed) || st.Failed != len(failed) {
			t.Fatalf("kept %d of %d failed traces", st.KeptFailed, st.Failed)
		}
		forSpans(out, func(res pcommon.Resource, sp ptrace.Span) {
			want := 1 / q
			if failed[sp.TraceID()] {
				want = 1
			}
			v, onSpan := sp.Attributes().Get(AdjustedCountKey)
			rv, onRes := res.Attributes().Get(AdjustedCountKey)
			wantSpan := rec == RecordEverySpan || (rec == RecordRootSpan && sp.ParentSpanID().IsEmpty())
			if onSpan != wantSpan || onRes != (rec == RecordResource) {
				t.Fatalf("record %d: on span %v, on resource %v", rec, onSpan, onRes)
			}
			if onSpan && (v.Type() != pcommon.ValueTypeDouble || v.Double() != want) {
				t.Fatalf("adjusted count %v, want %v", v.AsRaw(), want)
			}
			if onRes && rv.Double() != want {
				t.Fatalf("resource adjusted count %v, want %v", rv.AsRaw(), want)
			}
		})
		checkHT(t, "tail", r, st)
	}
	// Another salt, another choice.
	_, a := mustSample(t, r.TraceData(), Tail{Fraction: q})
	_, b := mustSample(t, r.TraceData(), Tail{Fraction: q, Salt: "other"})
	same := 0
	for i := range a.PerTrace {
		if !a.PerTrace[i].Failed && a.PerTrace[i].Kept && b.PerTrace[i].Kept {
			same++
		}
	}
	if same > a.Kept/4 {
		t.Errorf("salts share %d of %d kept traces", same, a.Kept)
	}
}

func marshalAll(t *testing.T, batches []ptrace.Traces) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, b := range batches {
		if err := WriteProtoMessage(&buf, b); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// Sample leaves its input alone and gives the same bytes every time.
func TestSampleDeterministicInputUnchanged(t *testing.T) {
	r := corpus(t)
	in := (&Result{Traces: r.Traces[:2000]}).Exports(1, 100, 0)
	before := marshalAll(t, in)
	samplers := []Sampler{
		Probabilistic{Percentage: 10},
		Probabilistic{Percentage: 10, Mode: ModeProportional},
		Head{Rates: map[string]float64{"A": 0.2}},
		Head{Rates: map[string]float64{"A": 0.2}, Jaeger: true},
		Tail{Fraction: 0.1},
		Corrupt{Sampler: Tail{Fraction: 0.1}, Fraction: 0.05, Seed: 9},
	}
	for _, s := range samplers {
		a, _ := mustSample(t, in, s)
		b, _ := mustSample(t, in, s)
		if !bytes.Equal(marshalAll(t, a), marshalAll(t, b)) {
			t.Errorf("%T: two runs differ", s)
		}
		if len(marshalAll(t, a)) >= len(before) {
			t.Errorf("%T: nothing sampled out", s)
		}
	}
	if !bytes.Equal(before, marshalAll(t, in)) {
		t.Error("Sample changed its input")
	}
}

// Corrupt: a fraction of the kept traces get each kind of bad record in
// turn; the rest keep their good one.
func TestCorrupt(t *testing.T) {
	r := corpus(t)
	const frac = 0.3
	out, st := mustSample(t, r.TraceData(), Corrupt{Sampler: Tail{Fraction: 0.2}, Fraction: frac, Seed: 4})
	within(t, "corrupted", st.Corrupted, st.Kept, frac)
	kinds := map[Corruption]int{}
	for _, tr := range st.PerTrace {
		if tr.Corruption != CorruptNone {
			kinds[tr.Corruption]++
			if !tr.Kept || tr.Recorded {
				t.Fatalf("corrupted trace %+v", tr)
			}
		}
	}
	for _, k := range Corruptions() {
		if kinds[k] < 25 {
			t.Errorf("%v: %d traces", k, kinds[k])
		}
	}
	forSpans(out, func(_ pcommon.Resource, sp ptrace.Span) {
		tr, _ := st.Trace(sp.TraceID())
		a := sp.Attributes()
		ts := sp.TraceState().AsRaw()
		count, hasCount := a.Get(AdjustedCountKey)
		param, hasParam := a.Get(SamplerParamKey)
		root := sp.ParentSpanID().IsEmpty()
		want := map[Corruption]string{
			ThNotHex: "ot=th:zz", ThEmpty: "ot=th:", ThTooLong: "ot=th:123456789abcdef0", ThZero: "ot=th:0",
			ThDuplicateOT: "ot=th:8,ot=th:c", ThDuplicateKey: "ot=th:8;th:c", ThHuge: hugeTraceState,
		}[tr.Corruption]
		if ts != want {
			t.Fatalf("%v: tracestate %.40q", tr.Corruption, ts)
		}
		switch tr.Corruption {
		case CorruptNone:
			if !hasCount || hasParam {
				t.Fatalf("good trace lost its record: %v", a.AsRaw())
			}
		case ThNotHex, ThEmpty, ThTooLong, ThZero, ThDuplicateOT, ThDuplicateKey, ThHuge:
			if hasCount || hasParam {
				t.Fatalf("%v: attributes %v", tr.Corruption, a.AsRaw())
			}
		case ParamZero, ParamNegative, ParamAboveOne, ParamNaN, ParamGarbage:
			if hasCount || hasParam != root {
				t.Fatalf("%v: attributes %v", tr.Corruption, a.AsRaw())
			}
			if root {
				got := param.AsRaw()
				want := map[Corruption]any{ParamZero: 0.0, ParamNegative: -0.25, ParamAboveOne: 1.5, ParamNaN: "NaN", ParamGarbage: "one in ten"}[tr.Corruption]
				if typ, _ := a.Get(SamplerTypeKey); got != want || typ.Str() != "probabilistic" {
					t.Fatalf("%v: sampler.param %v", tr.Corruption, got)
				}
			}
		default:
			got := count.AsRaw()
			want := map[Corruption]any{CountZero: 0.0, CountNegative: -4.0, CountGarbage: "lots", CountHuge: strings.Repeat("9", 65536)}[tr.Corruption]
			if hasParam || got != want {
				t.Fatalf("%v: adjusted count %.20v", tr.Corruption, got)
			}
		}
	})
	// Kinds restricts the choice; without a Sampler every trace is kept.
	_, st = mustSample(t, r.TraceData(), Corrupt{Fraction: 1, Kinds: []Corruption{ThZero, CountGarbage}})
	if st.Kept != st.Traces || st.Corrupted != st.Traces {
		t.Fatalf("corrupt all: %d kept, %d corrupted of %d", st.Kept, st.Corrupted, st.Traces)
	}
	for _, tr := range st.PerTrace {
		if tr.Corruption != ThZero && tr.Corruption != CountGarbage {
			t.Fatalf("kind %v", tr.Corruption)
		}
	}
	// The collector's processor (fail_closed) drops the spans whose
	// tracestate it cannot read, and reads the others.
	in, _ := mustSample(t, r.TraceData()[:3000], Corrupt{Fraction: 1, Kinds: []Corruption{ThNotHex, ThEmpty, ThTooLong, ThHuge, ThZero}})
	_, st = mustSample(t, in, Probabilistic{Percentage: 100, Mode: ModeProportional})
	zero := 0
	for _, tr := range st.PerTrace {
		if tr.Kept {
			zero++
		}
	}
	within(t, "th:0 traces through the processor", zero, 3000, 0.2)
}

func TestTraceStateParse(t *testing.T) {
	// Members are trimmed of blanks before they are read; fewer than 32
	// (the collector refuses the 32nd, which the W3C allows), a trailing
	// comma not counted.
	ok := []string{"", "ot=th:8", "a=1,b=2", " a=1 ,\t, b=x y", "a=b ", "ot=th:8 ", "t@s=v", "0t@s=v",
		"ot=rv:00000000000000;th:0;x:Y.z-_", strings.Repeat("k=v,", 31), strings.Repeat("k=v,", 30) + "z=1"}
	bad := []string{"A=1", "a", "=1", "a=", "a=1=2", "ot=th:zz", "ot=th:", "ot=th:123456789abcdef0",
		"ot=rv:123", "ot=th:8;", "ot=TH:8", "ot=th:8;;rv:00000000000000", "ot=th:8 ;rv:00000000000000", hugeTraceState,
		strings.Repeat("k=v,", 32), strings.Repeat("k=v,", 31) + "z=1", "t@=v", "@s=v", "t@S=v",
		strings.Repeat("a", 257) + "=1"}
	for _, s := range ok {
		if _, err := parseTraceState(s); err != nil {
			t.Errorf("%.40q: %v", s, err)
		}
	}
	for _, s := range bad {
		if _, err := parseTraceState(s); err == nil {
			t.Errorf("%.40q accepted", s)
		}
	}
	ts, _ := parseTraceState("ot=th:8,ot=th:c;rv:0123456789abcd,b=1")
	if ts.th != "c" || ts.rnd != 0x0123456789abcd || ts.String() != "ot=rv:0123456789abcd;th:c,b=1" {
		t.Errorf("duplicate ot: %+v %q", ts, ts.String())
	}
}

func TestSampleErrors(t *testing.T) {
	bad := []Sampler{
		nil,
		Probabilistic{Percentage: -1},
		Probabilistic{Percentage: float32(math.NaN())},
		Probabilistic{Percentage: 10, Precision: 15},
		Probabilistic{Percentage: 10, Mode: 3},
		Head{Rates: map[string]float64{"A": 1.5}},
		Head{Rates: map[string]float64{"A": math.NaN()}},
		Head{Precision: -1},
		Tail{},
		Tail{Fraction: 1.5},
		Tail{Fraction: 0.1, Record: 9},
		Corrupt{Fraction: 2},
		Corrupt{Fraction: 0.1, Kinds: []Corruption{CorruptNone}},
		Corrupt{Fraction: 0.1, Kinds: []Corruption{}},
		Corrupt{Fraction: 0.1, Sampler: Tail{}},
	}
	for _, s := range bad {
		if _, _, err := Sample(nil, s); err == nil {
			t.Errorf("%#v accepted", s)
		}
	}
	// RecordResource with a resource holding traces of different counts.
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i, id := range []string{"00000000000000000000000000000001", "00000000000000000000000000000002"} {
		sp := spans.AppendEmpty()
		sp.SetTraceID(mustTID(t, id))
		if i == 0 {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	if _, _, err := Sample([]ptrace.Traces{td}, Tail{Fraction: 0.999, Record: RecordResource}); err == nil {
		t.Error("resource with counts 1 and 1/q accepted")
	}
}
