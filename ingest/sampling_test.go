package ingest

import (
	"bytes"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// twoTo56 is 2^56, the thresholds' range.
const twoTo56 = 72057594037927936

// traceStateCases are tracestates and what ParseTraceStateThreshold
// reads from them, computed by hand: T is th right-padded to 14 hex
// digits, the adjusted count 2^56/(2^56 − T).
var traceStateCases = []struct {
	ts          string
	adjusted    float64
	present, ok bool
	why         string
}{
	// Thresholds.
	{ts: "ot=th:8", adjusted: 2, present: true, ok: true, why: "T = 2^55: p = 1/2"},
	{ts: "ot=th:c", adjusted: 4, present: true, ok: true, why: "T = 0xc/0x10 of 2^56: p = 1/4"},
	{ts: "ot=th:e", adjusted: 8, present: true, ok: true, why: "p = 2/16"},
	{ts: "ot=th:f", adjusted: 16, present: true, ok: true, why: "p = 1/16"},
	{ts: "ot=th:4", adjusted: 4.0 / 3, present: true, ok: true, why: "p = 12/16"},
	{ts: "ot=th:e666", adjusted: 65536.0 / 6554, present: true, ok: true, why: "p = (0x10000 − 0xe666)/0x10000 = 6554/65536 (the spec's 9.99938968568813)"},
	{ts: "ot=th:fd70a4", adjusted: 16777216.0 / 167772, present: true, ok: true, why: "p = (2^24 − 0xfd70a4)/2^24 = 167772/16777216 (the spec's 100.00009536752259)"},
	{ts: "ot=th:0", adjusted: 1, present: true, ok: true, why: "p = 1"},
	{ts: "ot=th:00000000000000", adjusted: 1, present: true, ok: true, why: "14 zeros: p = 1"},
	{ts: "ot=th:ffffffffffffff", adjusted: twoTo56, present: true, ok: true, why: "T = 2^56 − 1: p = 2^-56"},
	{ts: "ot=th:8A", adjusted: 256.0 / 118, present: true, ok: true, why: "upper case: T = 0x8a/0x100 of 2^56"},
	// Other sub-keys, other members, blanks.
	{ts: "ot=rv:abcdef01234567;th:8", adjusted: 2, present: true, ok: true, why: "rv first, ignored"},
	{ts: "ot=th:c;rv:abcdef01234567", adjusted: 4, present: true, ok: true, why: "rv after"},
	{ts: "ot=rv:zz;th:8;k1:13", adjusted: 2, present: true, ok: true, why: "rv's value is not checked; another sub-key"},
	{ts: "congo=t61rcWkgMzE,ot=th:c", adjusted: 4, present: true, ok: true, why: "another vendor before"},
	{ts: "ot=th:c,congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", adjusted: 4, present: true, ok: true, why: "others after"},
	{ts: " ot=th:8 , congo=t61rcWkgMzE", adjusted: 2, present: true, ok: true, why: "OWS around the member"},
	{ts: "congo=x ,\tot=th:8\t", adjusted: 2, present: true, ok: true, why: "tabs"},
	{ts: "congo=t61rcWkgMzE,,  ,ot=th:4", adjusted: 4.0 / 3, present: true, ok: true, why: "empty members skipped"},
	{ts: "ot=th:8,ot=th:c", adjusted: 2, present: true, ok: true, why: "the first ot member counts"},
	{ts: "a=b=c,ot=th:8", adjusted: 2, present: true, ok: true, why: "others' members are not checked"},
	{ts: "ot=th:8;" + "k:" + strings.Repeat("a", 249), adjusted: 2, present: true, ok: true, why: "a value of 256 characters"},
	// Absent.
	{ts: "", why: "empty"},
	{ts: "congo=t61rcWkgMzE", why: "no ot member"},
	{ts: "ot=rv:abcdef01234567", why: "ot without th"},
	{ts: "ot=p:8;r:62", why: "the old p-value draft"},
	{ts: "xot=th:8", why: "another key"},
	{ts: "ot2=th:8", why: "another key"},
	{ts: "t@ot=th:8", why: "a tenant's key"},
	{ts: "ot =th:8", why: "a blank inside the key"},
	{ts: "OT=th:8", why: "keys are lower case"},
	{ts: ",,, ,", why: "only empty members"},
	// Present, unusable.
	{ts: "ot=th:", present: true, why: "empty th"},
	{ts: "ot=th:123456789abcdef", present: true, why: "15 digits"},
	{ts: "ot=th:g", present: true, why: "not hex"},
	{ts: "ot=th:-1", present: true, why: "a sign"},
	{ts: "ot=th:0x8", present: true, why: "a 0x prefix"},
	{ts: "ot=th: 8", present: true, why: "a blank in the value"},
	{ts: "ot=th:8;th:8", present: true, why: "th twice"},
	{ts: "ot=th:8;", present: true, why: "an empty sub-member"},
	{ts: "ot=th:8;foo", present: true, why: "a sub-member without ':'"},
	{ts: "ot=TH:8", present: true, why: "an upper-case sub-key"},
	{ts: "ot=1x:8;th:8", present: true, why: "a sub-key starting with a digit"},
	{ts: "ot=th:8;rv:a!b", present: true, why: "a value character outside the grammar"},
	{ts: "ot=", present: true, why: "an empty ot value"},
	{ts: "ot=th:8;" + "k:" + strings.Repeat("a", 250), present: true, why: "a value of 257 characters"},
	{ts: "ot=th:8" + strings.Repeat("0", 2000), present: true, why: "an ot member longer than 1 KiB"},
}

func TestParseTraceStateThreshold(t *testing.T) {
	for _, c := range traceStateCases {
		adjusted, present, ok := ParseTraceStateThreshold(c.ts)
		if adjusted != c.adjusted || present != c.present || ok != c.ok {
			t.Errorf("%q (%s): %v, present %v, ok %v; want %v, %v, %v", trimmedString(c.ts), c.why, adjusted, present, ok, c.adjusted, c.present, c.ok)
		}
	}
}

func trimmedString(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// TestParseTraceStateBounds: only the first 32 non-empty members are
// looked at, and a member longer than 1 KiB ends the search.
func TestParseTraceStateBounds(t *testing.T) {
	vendors := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("v" + strconv.Itoa(i) + "=x,")
		}
		return b.String()
	}
	if _, present, ok := ParseTraceStateThreshold(vendors(31) + "ot=th:8"); !present || !ok {
		t.Errorf("ot as the 32nd member: present %v ok %v", present, ok)
	}
	if _, present, _ := ParseTraceStateThreshold(vendors(32) + "ot=th:8"); present {
		t.Error("ot as the 33rd member: present")
	}
	if _, present, ok := ParseTraceStateThreshold(",,,,," + vendors(31) + ",,ot=th:8"); !present || !ok {
		t.Errorf("empty members do not count: present %v ok %v", present, ok)
	}
	long := "a=" + strings.Repeat("x", 1022) // 1,024 bytes: looked at
	if _, present, ok := ParseTraceStateThreshold(long + ",ot=th:8"); !present || !ok {
		t.Errorf("after a member of 1 KiB: present %v ok %v", present, ok)
	}
	if _, present, _ := ParseTraceStateThreshold(long + "x,ot=th:8"); present {
		t.Error("after a member over 1 KiB: present")
	}
	if _, present, ok := ParseTraceStateThreshold("v=x," + strings.Repeat(" ", 1017) + "ot=th:8"); !present || !ok {
		t.Errorf("an ot member of 1,024 bytes: present %v ok %v", present, ok)
	}
	if _, present, ok := ParseTraceStateThreshold("v=x," + strings.Repeat(" ", 1018) + "ot=th:8"); !present || ok {
		t.Errorf("an ot member of 1,025 bytes: present %v ok %v", present, ok)
	}
	if _, present, _ := ParseTraceStateThreshold("v=x," + strings.Repeat(" ", 1023) + "ot=th:8"); present {
		t.Error("an ot member of 1,030 bytes whose key is past 1 KiB: present")
	}
	// A huge tracestate costs what its first members do.
	huge := "ot=th:8," + strings.Repeat("v=x,", 1<<20)
	if n := testing.AllocsPerRun(10, func() { ParseTraceStateThreshold(huge) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestParseTraceStateNoAllocs(t *testing.T) {
	for _, c := range traceStateCases {
		if n := testing.AllocsPerRun(10, func() { ParseTraceStateThreshold(c.ts) }); n != 0 {
			t.Errorf("%q: %v allocations", trimmedString(c.ts), n)
		}
	}
}

// refThreshold is a plain reading of what ParseTraceStateThreshold
// documents (splits, regular expressions, exact arithmetic), for
// FuzzTraceState to compare it with.
func refThreshold(ts string) (adjusted float64, present, ok bool) {
	var ot string
	found := false
	members := 0
	for _, raw := range strings.Split(ts, ",") {
		if members == maxTraceStateMembers {
			break
		}
		if len(raw) > maxMemberScan {
			if strings.HasPrefix(strings.TrimLeft(raw[:maxMemberScan+1], " \t"), "ot=") {
				return 0, true, false
			}
			return 0, false, false
		}
		m := strings.Trim(raw, " \t")
		if m == "" {
			continue
		}
		if v, isOT := strings.CutPrefix(m, "ot="); isOT {
			ot, found = v, true
			break
		}
		members++
	}
	if !found {
		return 0, false, false
	}
	if len(ot) > 256 {
		return 0, true, false
	}
	var th []string
	for _, sub := range strings.Split(ot, ";") {
		if !otSubRE.MatchString(sub) {
			return 0, true, false
		}
		if k, v, _ := strings.Cut(sub, ":"); k == "th" {
			th = append(th, v)
		}
	}
	switch {
	case len(th) == 0:
		return 0, false, false
	case len(th) > 1 || !thRE.MatchString(th[0]):
		return 0, true, false
	}
	t, err := strconv.ParseUint(th[0]+strings.Repeat("0", 14-len(th[0])), 16, 64)
	if err != nil {
		panic(err)
	}
	r := new(big.Rat).SetFrac(new(big.Int).SetUint64(twoTo56), new(big.Int).SetUint64(twoTo56-t))
	f, _ := r.Float64()
	return f, true, true
}

var (
	otSubRE = regexp.MustCompile(`^[a-z][a-z0-9]*:[A-Za-z0-9._-]*$`)
	thRE    = regexp.MustCompile(`^[0-9a-fA-F]{1,14}$`)
)

func TestRefThreshold(t *testing.T) {
	for _, c := range traceStateCases {
		adjusted, present, ok := refThreshold(c.ts)
		if adjusted != c.adjusted || present != c.present || ok != c.ok {
			t.Errorf("reference: %q (%s): %v, %v, %v", trimmedString(c.ts), c.why, adjusted, present, ok)
		}
	}
}

// FuzzTraceState: ParseTraceStateThreshold never panics, gives an
// adjusted count in [1, 2^56] when it reads one, and reads what the plain
// reference (refThreshold) reads, the count within a relative 2^-52.
func FuzzTraceState(f *testing.F) {
	for _, c := range traceStateCases {
		f.Add(c.ts)
	}
	f.Fuzz(func(t *testing.T, ts string) {
		adjusted, present, ok := ParseTraceStateThreshold(ts)
		if ok && !present || !ok && adjusted != 0 {
			t.Fatalf("%q: %v, present %v, ok %v", ts, adjusted, present, ok)
		}
		if ok && !(adjusted >= 1 && adjusted <= twoTo56) {
			t.Fatalf("%q: adjusted count %v", ts, adjusted)
		}
		radj, rpresent, rok := refThreshold(ts)
		if present != rpresent || ok != rok || math.Abs(adjusted-radj) > radj*0x1p-52 {
			t.Fatalf("%q: %v, present %v, ok %v; reference %v, %v, %v", ts, adjusted, present, ok, radj, rpresent, rok)
		}
	})
}

func BenchmarkParseTraceStateThreshold(b *testing.B) {
	for _, ts := range []string{"ot=th:e666", "ot=rv:abcdef01234567;th:fd70a4", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7,ot=th:c"} {
		b.Run(ts, func(b *testing.B) {
			for b.Loop() {
				ParseTraceStateThreshold(ts)
			}
		})
	}
}

// decodeSampled decodes td with cfg through pdata's path, the protobuf
// wire decoder and the JSON decoder, checks that all three give the same
// spans, and returns them.
func decodeSampled(t *testing.T, cfg DecoderConfig, td ptrace.Traces) []graph.Span {
	t.Helper()
	ref := NewDecoder(cfg).AppendTraces(nil, td)
	wire, err := NewDecoder(cfg).appendProto(nil, protoOf(t, td))
	if err != nil {
		t.Fatal(err)
	}
	js, err := NewDecoder(cfg).AppendRequest(nil, jsonOf(t, td), true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if wire[i] != ref[i] || js[i] != ref[i] {
			t.Fatalf("span %d:\npdata %+v\nwire  %+v\njson  %+v", i, ref[i], wire[i], js[i])
		}
	}
	return ref
}

// TestSampling: each source of docs/SPEC.md §2's sampling row, their
// precedence, and what is unusable, through the three decoding paths.
func TestSampling(t *testing.T) {
	const key = DefaultAdjustedCountKey
	none := graph.SamplingNone
	rec := graph.SamplingRecorded
	conf := graph.SamplingConfigured
	inv := graph.SamplingInvalid
	jaeger := func(typ string, param any) map[string]any {
		m := map[string]any{"sampler.type": typ}
		if param != nil {
			m["sampler.param"] = param
		}
		return m
	}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	svc05 := DecoderConfig{SamplingConfig: SamplingConfig{Probability: 0.1, ServiceProbability: map[string]float64{"svc": 0.5}}}
	cases := []struct {
		name  string
		cfg   DecoderConfig
		res   map[string]any
		attrs map[string]any
		ts    string
		want  graph.Sampling
		count float64
	}{
		{name: "nothing", want: none},
		// The adjusted-count attribute, on the span.
		{name: "span count int", attrs: map[string]any{key: 4}, want: rec, count: 4},
		{name: "span count double", attrs: map[string]any{key: 10.0}, want: rec, count: 10},
		{name: "span count string", attrs: map[string]any{key: " 2.5 "}, want: rec, count: 2.5},
		{name: "span count exponent", attrs: map[string]any{key: "1e3"}, want: rec, count: 1000},
		{name: "span count 1", attrs: map[string]any{key: 1}, want: rec, count: 1},
		{name: "span count below 1", attrs: map[string]any{key: 0.5}, want: inv, count: 1},
		{name: "span count 0", attrs: map[string]any{key: 0}, want: inv, count: 1},
		{name: "span count negative", attrs: map[string]any{key: -3}, want: inv, count: 1},
		{name: "span count NaN", attrs: map[string]any{key: math.NaN()}, want: inv, count: 1},
		{name: "span count Inf", attrs: map[string]any{key: math.Inf(1)}, want: inv, count: 1},
		{name: "span count garbage", attrs: map[string]any{key: "ten"}, want: inv, count: 1},
		{name: "span count string NaN", attrs: map[string]any{key: "NaN"}, want: inv, count: 1},
		{name: "span count bool", attrs: map[string]any{key: true}, want: inv, count: 1},
		{name: "span count array", attrs: map[string]any{key: []any{4}}, want: inv, count: 1},
		{name: "span count empty value", attrs: map[string]any{key: nil}, want: none},
		{name: "span count empty value falls through", attrs: map[string]any{key: nil}, ts: "ot=th:8", want: rec, count: 2},
		// The attribute on the resource.
		{name: "resource count", res: map[string]any{key: 8}, want: rec, count: 8},
		{name: "resource count string", res: map[string]any{key: "16"}, want: rec, count: 16},
		{name: "resource count invalid", res: map[string]any{key: 0.25}, want: inv, count: 1},
		{name: "resource count empty value", res: map[string]any{key: nil}, ts: "ot=th:c", want: rec, count: 4},
		// The tracestate.
		{name: "tracestate", ts: "ot=th:c", want: rec, count: 4},
		{name: "tracestate th:0", ts: "ot=th:0", want: rec, count: 1},
		{name: "tracestate with rv and vendors", ts: "congo=t61rcWkgMzE, ot=rv:abcdef01234567;th:e666", want: rec, count: 65536.0 / 6554},
		{name: "tracestate malformed", ts: "ot=th:xyz", want: inv, count: 1},
		{name: "tracestate without th", ts: "ot=rv:abcdef01234567", want: none},
		// Jaeger's tags.
		{name: "jaeger probabilistic", attrs: jaeger("probabilistic", 0.25), want: rec, count: 4},
		{name: "jaeger probabilistic string", attrs: jaeger("probabilistic", "0.1"), want: rec, count: 10},
		{name: "jaeger probabilistic 1", attrs: jaeger("probabilistic", 1), want: rec, count: 1},
		{name: "jaeger probabilistic case and blanks", attrs: jaeger(" Probabilistic ", 0.5), want: rec, count: 2},
		{name: "jaeger probabilistic 0", attrs: jaeger("probabilistic", 0.0), want: inv, count: 1},
		{name: "jaeger probabilistic negative", attrs: jaeger("probabilistic", -0.5), want: inv, count: 1},
		{name: "jaeger probabilistic above 1", attrs: jaeger("probabilistic", 1.5), want: inv, count: 1},
		{name: "jaeger probabilistic NaN", attrs: jaeger("probabilistic", math.NaN()), want: inv, count: 1},
		{name: "jaeger probabilistic garbage", attrs: jaeger("probabilistic", "half"), want: inv, count: 1},
		{name: "jaeger probabilistic bool", attrs: jaeger("probabilistic", true), want: inv, count: 1},
		{name: "jaeger probabilistic without param", attrs: jaeger("probabilistic", nil), want: inv, count: 1},
		{name: "jaeger probabilistic tiny", attrs: jaeger("probabilistic", 1e-320), want: inv, count: 1},
		{name: "jaeger const 1", attrs: jaeger("const", 1), want: rec, count: 1},
		{name: "jaeger const true", attrs: jaeger("const", true), want: rec, count: 1},
		{name: "jaeger const string true", attrs: jaeger("const", "true"), want: rec, count: 1},
		{name: "jaeger const 1.0", attrs: jaeger("const", 1.0), want: rec, count: 1},
		{name: "jaeger const 0", attrs: jaeger("const", 0), want: inv, count: 1},
		{name: "jaeger const false", attrs: jaeger("const", false), want: inv, count: 1},
		{name: "jaeger const 0.5", attrs: jaeger("const", 0.5), want: inv, count: 1},
		{name: "jaeger ratelimiting", attrs: jaeger("ratelimiting", 2.0), want: none},
		{name: "jaeger lowerbound", attrs: jaeger("lowerbound", 0.001), want: none},
		{name: "jaeger remote", attrs: jaeger("remote", 0.5), want: none},
		{name: "jaeger param alone", attrs: map[string]any{"sampler.param": 0.5}, want: none},
		{name: "jaeger type not a string", attrs: map[string]any{"sampler.type": 1, "sampler.param": 0.5}, want: none},
		// Configured.
		{name: "input", cfg: DecoderConfig{SamplingConfig: SamplingConfig{Probability: 0.1}}, want: conf, count: 10},
		{name: "service before input", cfg: svc05, want: conf, count: 2},
		{name: "another service: input", cfg: svc05, res: map[string]any{"service.name": "other"}, want: conf, count: 10},
		{name: "service alone", cfg: DecoderConfig{SamplingConfig: SamplingConfig{ServiceProbability: map[string]float64{"svc": 0.2}}}, want: conf, count: 5},
		{name: "another service alone", cfg: DecoderConfig{SamplingConfig: SamplingConfig{ServiceProbability: map[string]float64{"svc": 0.2}}},
			res: map[string]any{"service.name": "other"}, want: none},
		{name: "service without a name", cfg: DecoderConfig{SamplingConfig: SamplingConfig{ServiceProbability: map[string]float64{UnknownService: 0.5}}},
			res: map[string]any{}, want: conf, count: 2},
		{name: "input probability 1", cfg: DecoderConfig{SamplingConfig: SamplingConfig{Probability: 1}}, want: conf, count: 1},
		{name: "input probability out of range ignored", cfg: DecoderConfig{SamplingConfig: SamplingConfig{Probability: 2}}, want: none},
		// Precedence: the first present source decides.
		{name: "span count before resource count", attrs: map[string]any{key: 4}, res: map[string]any{key: 8}, want: rec, count: 4},
		{name: "invalid span count before resource count", attrs: map[string]any{key: "x"}, res: map[string]any{key: 8}, want: inv, count: 1},
		{name: "span count before tracestate", attrs: map[string]any{key: 4}, ts: "ot=th:8", want: rec, count: 4},
		{name: "invalid span count before tracestate", attrs: map[string]any{key: 0.5}, ts: "ot=th:8", want: inv, count: 1},
		{name: "resource count before tracestate", res: map[string]any{key: 8}, ts: "ot=th:c", want: rec, count: 8},
		{name: "invalid resource count before tracestate", res: map[string]any{key: -1}, ts: "ot=th:c", want: inv, count: 1},
		{name: "resource count before invalid tracestate", res: map[string]any{key: 8}, ts: "ot=th:", want: rec, count: 8},
		{name: "tracestate before jaeger", attrs: jaeger("probabilistic", 0.5), ts: "ot=th:c", want: rec, count: 4},
		{name: "invalid tracestate before jaeger", attrs: jaeger("probabilistic", 0.5), ts: "ot=th:c;", want: inv, count: 1},
		{name: "absent tracestate: jaeger", attrs: jaeger("probabilistic", 0.5), ts: "ot=rv:abcdef01234567", want: rec, count: 2},
		{name: "jaeger before service", cfg: svc05, attrs: jaeger("probabilistic", 0.25), want: rec, count: 4},
		{name: "invalid jaeger before service", cfg: svc05, attrs: jaeger("probabilistic", 2.0), want: inv, count: 1},
		{name: "ratelimiting: service", cfg: svc05, attrs: jaeger("ratelimiting", 2.0), want: conf, count: 2},
		{name: "tracestate before input", cfg: svc05, ts: "ot=th:f", want: rec, count: 16},
		{name: "resource count before input", cfg: svc05, res: map[string]any{key: 3}, want: rec, count: 3},
		{name: "invalid tracestate before input", cfg: svc05, ts: "ot=th:q", want: inv, count: 1},
		// The key's configuration.
		{name: "custom key", cfg: DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "my.multiplier"}},
			attrs: map[string]any{"my.multiplier": 20, key: 4}, want: rec, count: 20},
		{name: "custom key on the resource", cfg: DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: " my.multiplier "}},
			res: map[string]any{"my.multiplier": "20", key: 4}, want: rec, count: 20},
		{name: "custom key: the default ignored", cfg: DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "my.multiplier"}},
			attrs: map[string]any{key: 4}, want: none},
		{name: "no key", cfg: DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: NoAdjustedCountKey}},
			attrs: map[string]any{key: 4}, res: map[string]any{key: 4}, ts: "ot=th:8", want: rec, count: 2},
		{name: "a key read anyway", cfg: DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "retry.attempt"}},
			attrs: map[string]any{"retry.attempt": 3}, want: rec, count: 3},
		{name: "a short key", cfg: DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "n"}},
			attrs: map[string]any{"n": 7}, want: rec, count: 7},
		{name: "the claim header's key", cfg: DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "http.response.header.x-error-claim"}},
			attrs: map[string]any{"http.response.header.x-error-claim": "6"}, want: rec, count: 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := c.res
			if res == nil {
				res = map[string]any{}
			}
			if _, ok := res["service.name"]; !ok && c.name != "service without a name" {
				res = with(res, "service.name", "svc")
			}
			td := tracesOf(t, res, spanDef{kind: ptrace.SpanKindServer, name: "s", attrs: c.attrs, traceState: c.ts})
			got := decodeSampled(t, c.cfg, td)[0]
			if got.Sampling != c.want || got.AdjustedCount != c.count {
				t.Fatalf("%v %v, want %v %v", got.Sampling, got.AdjustedCount, c.want, c.count)
			}
		})
	}
}

// TestSamplingResourceLast: a JSON resource (and a protobuf one) may
// follow its spans; its adjusted count and service still apply to them.
func TestSamplingResourceLast(t *testing.T) {
	cfg := DecoderConfig{SamplingConfig: SamplingConfig{ServiceProbability: map[string]float64{"late": 0.25}}}
	span := func(ts string) string {
		return `{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"1112131415161718","name":"s","traceState":"` + ts + `"}`
	}
	for _, c := range []struct {
		req   string
		want  graph.Sampling
		count float64
	}{
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[` + span("") + `]}],"resource":{"attributes":[{"key":"sampling.adjusted_count","value":{"intValue":"8"}}]}}]}`, graph.SamplingRecorded, 8},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[` + span("ot=th:c") + `]}],"resource":{"attributes":[{"key":"sampling.adjusted_count","value":{"intValue":"8"}}]}}]}`, graph.SamplingRecorded, 8},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[` + span("ot=th:c") + `]}],"resource":{"attributes":[{"key":"sampling.adjusted_count","value":{"stringValue":"x"}}]}}]}`, graph.SamplingInvalid, 1},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[` + span("") + `]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"late"}}]}}]}`, graph.SamplingConfigured, 4},
		// Two resource pieces: the first count counts.
		{`{"resourceSpans":[{"resource":{"attributes":[{"key":"sampling.adjusted_count","value":{"doubleValue":2}}]},"scopeSpans":[{"spans":[` + span("") + `]}],"resource":{"attributes":[{"key":"sampling.adjusted_count","value":{"intValue":"8"}}]}}]}`, graph.SamplingRecorded, 2},
		// Deprecated scope spans stand in, and are completed alike.
		{`{"resourceSpans":[{"deprecatedScopeSpans":[{"spans":[` + span("ot=th:8") + `]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"late"}}]}}]}`, graph.SamplingRecorded, 2},
		// An escaped tracestate.
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[` + span(`ot=th:\u0063`) + `]}]}]}`, graph.SamplingRecorded, 4},
	} {
		spans, err := diffJSON(t, cfg, []byte(c.req))
		if err != nil || len(spans) != 1 {
			t.Fatalf("%s: %v %+v", c.req, err, spans)
		}
		if s := spans[0]; s.Sampling != c.want || s.AdjustedCount != c.count {
			t.Errorf("%s: %v %v, want %v %v", c.req, s.Sampling, s.AdjustedCount, c.want, c.count)
		}
	}

	// Protobuf: the resource after the spans, in two pieces; the
	// tracestate given twice (the last counts).
	sp := spanOf(2, "s").str(3, "ot=th:8").str(3, "ot=th:c")
	b := pb{}.msg(1, pb{}.msg(2, pb{}.msg(2, sp)).msg(1, resourceOf(kv("host.name", sval("h")))).msg(1, resourceOf(kv("sampling.adjusted_count", sval("x")), kv("sampling.adjusted_count", ival(2)))))
	spans, err := diffProto(t, DecoderConfig{}, b)
	if err != nil || len(spans) != 1 || spans[0].Sampling != graph.SamplingInvalid || spans[0].AdjustedCount != 1 {
		t.Fatalf("resource after the spans: %v %+v", err, spans)
	}
	spans, err = diffProto(t, DecoderConfig{}, requestOf(resourceOf(), sp))
	if err != nil || len(spans) != 1 || spans[0].Sampling != graph.SamplingRecorded || spans[0].AdjustedCount != 4 {
		t.Fatalf("tracestate twice: %v %+v", err, spans)
	}
	// A span's duplicate count attribute: the first counts.
	spans, err = diffProto(t, DecoderConfig{}, requestOf(resourceOf(), spanOf(2, "s", kv("sampling.adjusted_count", ival(3)), kv("sampling.adjusted_count", ival(5)))))
	if err != nil || len(spans) != 1 || spans[0].AdjustedCount != 3 {
		t.Fatalf("count twice: %v %+v", err, spans)
	}
}

// TestSamplingWorkers: ReadFile's decoding workers are configured as the
// decoder is.
func TestSamplingWorkers(t *testing.T) {
	td := tracesOf(t, map[string]any{"service.name": "svc", "m": 3}, spanDef{kind: ptrace.SpanKindServer, name: "s"})
	js := jsonOf(t, td)
	var file []byte
	for range 50 {
		file = append(append(file, js...), '\n')
	}
	d := NewDecoder(DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "m"}})
	d.Workers = 4
	var mu sync.Mutex
	n := 0
	_, err := d.ReadFile(bytes.NewReader(file), "f", func(spans []graph.Span) error {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range spans {
			if s.Sampling != graph.SamplingRecorded || s.AdjustedCount != 3 {
				t.Errorf("%+v", s)
			}
			n++
		}
		return nil
	}, func(err error) { t.Error(err) })
	if err != nil || n != 50 {
		t.Fatalf("%v, %d spans", err, n)
	}
}

func TestSamplingConfigValidate(t *testing.T) {
	for _, c := range []SamplingConfig{
		{}, {Probability: 1}, {Probability: 0.001}, {ServiceProbability: map[string]float64{"a": 1, "b": 1e-9}},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []struct {
		c    SamplingConfig
		want string
	}{
		{SamplingConfig{Probability: -0.5}, "sampling probability: -0.5: want 0 < p ≤ 1"},
		{SamplingConfig{Probability: 1.5}, "sampling probability: 1.5: want 0 < p ≤ 1"},
		{SamplingConfig{Probability: math.NaN()}, "sampling probability: NaN: want 0 < p ≤ 1"},
		{SamplingConfig{Probability: 1e-320}, "sampling probability: 1e-320: want 0 < p ≤ 1"},
		{SamplingConfig{ServiceProbability: map[string]float64{"a": 0}}, `sampling probability of service "a": 0: want 0 < p ≤ 1`},
		{SamplingConfig{ServiceProbability: map[string]float64{"": 0.5}}, "sampling probability for a service with an empty name"},
	} {
		if err := c.c.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.c, err, c.want)
		}
	}
}

func TestParseServiceProbabilities(t *testing.T) {
	got, err := ParseServiceProbabilities(" frontend=0.1, redis-proxy = 1 ,,a=b=0.5")
	if err != nil || len(got) != 3 || got["frontend"] != 0.1 || got["redis-proxy"] != 1 || got["a=b"] != 0.5 {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := ParseServiceProbabilities(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for s, want := range map[string]string{
		"frontend":             `"frontend": want service=probability`,
		"=0.5":                 `"=0.5": no service name`,
		"a=x":                  `"a=x": "x" is not a number`,
		"a=0":                  `"a=0": 0: want 0 < p ≤ 1`,
		"a=1.01":               `"a=1.01": 1.01: want 0 < p ≤ 1`,
		"a=NaN":                `"a=NaN": NaN: want 0 < p ≤ 1`,
		"a=0.5,a=0.25":         `service "a" given twice`,
		"a=0.5, b = -1, c=0.1": `"b = -1": -1: want 0 < p ≤ 1`,
	} {
		if _, err := ParseServiceProbabilities(s); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", s, err, want)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	for s, want := range map[string]float64{"4": 4, " 2.5 ": 2.5, "+10": 10, "-3": -3, "1e3": 1000, "2.E-1": 0.2, ".5": 0.5, "7.": 7, "1E+2": 100} {
		if got, ok := parseDecimal(s); !ok || got != want {
			t.Errorf("parseDecimal(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", ".", "-", "e3", "1e", "1e+", "NaN", "Inf", "infinity", "0x10", "1_000", "1.2.3", "4 4", "1e400", strings.Repeat("1", 65)} {
		if got, ok := parseDecimal(s); ok {
			t.Errorf("parseDecimal(%q) = %v, ok", s, got)
		}
	}
}

// TestTraceStateMemo: the decoder's memory of the last tracestate gives
// what ParseTraceStateThreshold gives, whatever the order, however long
// the tracestates, and however the bytes a tracestate was read from
// change afterwards.
func TestTraceStateMemo(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	buf := make([]byte, 0, 4096)
	for i := range 2000 {
		c := traceStateCases[(i*7+i/3)%len(traceStateCases)]
		buf = append(buf[:0], c.ts...)
		adjusted, present, ok := d.traceState(bytesView(buf))
		if adjusted != c.adjusted || present != c.present || ok != c.ok {
			t.Fatalf("%d: %q: %v %v %v, want %v %v %v", i, trimmedString(c.ts), adjusted, present, ok, c.adjusted, c.present, c.ok)
		}
		for j := range buf {
			buf[j] = 'x'
		}
	}
}

// The collector's default form, ot=rv:R;th:T, read on its fast path,
// gives what the general reading gives; a randomness that is no hex (a
// control byte that ORs to a digit among them) is left to the general
// reading.
func TestTraceStateRandomnessForm(t *testing.T) {
	for _, c := range []struct {
		ts       string
		adjusted float64
		ok       bool
	}{
		{"ot=rv:ff00ff89ed803f;th:e668", 65536.0 / (0x10000 - 0xe668), true},
		{"ot=rv:FF00FF89ED803F;th:8", 2, true},
		{"ot=rv:ff00ff89ed803\x10;th:8", 0, false}, // not an OpenTelemetry value
		{"ot=rv:zz00ff89ed803f;th:8", 2, true},     // no hex, but a value: the general reading
		{"ot=rv:ff00ff89ed803f;th:", 0, false},
	} {
		a, present, ok := ParseTraceStateThreshold(c.ts)
		if !present || ok != c.ok || (ok && math.Abs(a-c.adjusted) > 1e-12*c.adjusted) {
			t.Errorf("%q: %v %v %v, want %v %v", c.ts, a, present, ok, c.adjusted, c.ok)
		}
	}
}
