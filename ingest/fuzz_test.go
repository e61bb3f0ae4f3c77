package ingest

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// fuzzSeeds are valid requests exercising every attribute the decoder reads.
func fuzzSeeds(t testing.TB) []ptrace.Traces {
	hdr := "http.response.header.x-error-claim"
	return []ptrace.Traces{
		benchTraces(1),
		ptrace.NewTraces(),
		tracesOf(t, map[string]any{"service.name": "svc", "service.version": "v"},
			spanDef{kind: ptrace.SpanKindServer, name: "a", attrs: map[string]any{
				"http.request.method": "GET", "http.route": "/r", "http.response.status_code": "503",
				"error.claim": " Claim ", hdr: []any{"unclaimed"}, "retry.suppressed": "TRUE",
			}, status: ptrace.StatusCodeError},
			spanDef{kind: ptrace.SpanKindClient, name: "b", attrs: map[string]any{
				"rpc.service": "p.S", "rpc.method": "M", "rpc.response.status_code": "UNAVAILABLE",
				"rpc.response.metadata.x-error-claim": []any{}, "retry.attempt": 2.0,
				"dependency.fail_open": false, "peer.service": "p", "db.statement": "GET k",
			}},
			spanDef{kind: ptrace.SpanKind(9), name: "c", attrs: map[string]any{
				"rpc.grpc.status_code": 99, "http.status_code": -1, "http.request.resend_count": -4,
				"error.claim": []any{1, "x"}, "url.full": "", "db.system": map[string]any{"a": 1},
			}},
		),
		// Sampling: every source, usable and not.
		tracesOf(t, map[string]any{"service.name": "svc", "sampling.adjusted_count": "8"},
			spanDef{kind: ptrace.SpanKindServer, name: "a", traceState: "congo=t61rcWkgMzE, ot=rv:abcdef01234567;th:e666"},
			spanDef{kind: ptrace.SpanKindClient, name: "b", attrs: map[string]any{"sampling.adjusted_count": 4.0, "m": 2}},
			spanDef{kind: ptrace.SpanKindClient, name: "c", attrs: map[string]any{"sampling.adjusted_count": -1}, traceState: "ot=th:8"},
		),
		tracesOf(t, map[string]any{"service.name": "other", "m": true},
			spanDef{kind: ptrace.SpanKindServer, name: "a", traceState: "ot=th:c"},
			spanDef{kind: ptrace.SpanKindServer, name: "b", traceState: "ot=th:8;", attrs: map[string]any{"sampler.type": "probabilistic", "sampler.param": 0.5}},
			spanDef{kind: ptrace.SpanKindServer, name: "c", attrs: map[string]any{"sampler.type": "probabilistic", "sampler.param": "0.001"}},
			spanDef{kind: ptrace.SpanKindServer, name: "d", attrs: map[string]any{"sampler.type": "const", "sampler.param": true}},
			spanDef{kind: ptrace.SpanKindServer, name: "e", attrs: map[string]any{"sampler.type": "ratelimiting", "sampler.param": 2.0}},
			spanDef{kind: ptrace.SpanKindServer, name: "f"},
		),
	}
}

// samplingDiffConfig and samplingDiffConfig2 are sampling configurations
// the differential tests and fuzz targets decode with too: a key the
// decoder reads anyway and a probability per service and per input; a key
// of its own (m), none for the input.
var (
	samplingDiffConfig = DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "retry.attempt", Probability: 0.5,
		ServiceProbability: map[string]float64{"svc": 0.25, UnknownService: 0.125}}}
	samplingDiffConfig2 = DecoderConfig{SamplingConfig: SamplingConfig{AdjustedCountKey: "m",
		ServiceProbability: map[string]float64{"other": 0.1}}}
)

// deepJSON is a request whose attribute value nests arrayValue levels deep,
// the shape that overflowed pdata's stack.
func deepJSON(levels int) []byte {
	b := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":`)
	b = append(b, bytes.Repeat([]byte(`{"arrayValue":{"values":[`), levels)...)
	b = append(b, `{"stringValue":"x"}`...)
	b = append(b, bytes.Repeat([]byte(`]}}`), levels)...)
	return append(b, `}]}]}]}]}`...)
}

// jsonSeeds are JSON requests for the fuzz targets beyond fuzzSeeds: deep
// nesting, shapes that could make pdata's decoder read strings as
// structure, other kinds of JSON, base64 ids.
func jsonSeeds() [][]byte {
	return [][]byte{
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":2,"attributes":[{"key":"error.claim","value":{"arrayValue":{}}}]}]}]}]}`),
		deepJSON(20), deepJSON(70),
		[]byte(strings.Repeat("[", 100) + strings.Repeat("]", 100)),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":` + strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, 20) + `{}` + strings.Repeat(`}]}}`, 20) + `}]}]}]}]}`),
		// A string where pdata wants an object, then what would be
		// structure if the string's contents were read as such.
		[]byte(`{"resourceSpans":[{"resource":"{"arrayValue":{"values":[{"arrayValue":{}}]}}"}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"","attributes":[{"value":{"arrayValue":{}}}]","name":"A
"}]}]}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","name":"a"b","attributes":[{"key":"k","value":{"stringValue":""},{"arrayValue":"}}]}]}]}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AQIDBAUGBwgJCgsMDQ4PEA==","spanId":"ERITFBUWFxg=","parentSpanId":"ISIjJCUmJyg="}]}]}]}`),
		[]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`),
		[]byte(`{"data":[{"traceID":"abc","spans":[]}]}`),
		[]byte(`[{"traceId":"a","id":"b","localEndpoint":{}}]`),
		[]byte(`{}`), []byte(`{"a":tru}`), []byte(`{} {}`), []byte(`{"a":"x\`),
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, td := range fuzzSeeds(f) {
		f.Add(jsonOf(f, td))
	}
	for _, b := range jsonSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Through AppendRequest, never pdata directly: pdata alone
		// overflows its stack on deep input.
		d := NewDecoder(DecoderConfig{})
		spans, err := d.AppendRequest(nil, b, true)
		if err != nil {
			if len(spans) != 0 {
				t.Fatalf("%d spans with error %v", len(spans), err)
			}
			return
		}
		checkSpans(t, spans)
	})
}

// FuzzJSONScanner checks that the scanner says the same of any input
// whatever its cutting into chunks, and that what it accepts pdata decodes
// without crashing.
func FuzzJSONScanner(f *testing.F) {
	for _, b := range jsonSeeds() {
		f.Add(b, uint16(len(b)/2))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		var whole, parts jsonScanner
		whole.scan(b)
		c := min(int(cut), len(b))
		parts.scan(b[:c])
		parts.scan(b[c:])
		if whole.fault != parts.fault || whole.faultAt != parts.faultAt || whole.done() != parts.done() || whole.depth != parts.depth {
			t.Fatalf("cut at %d: %+v, whole: %+v", c, parts, whole)
		}
		if whole.done() {
			_, _ = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		}
	})
}

// decodeAndCheck converts what pdata unmarshalled, if it did, and checks
// every span.
func decodeAndCheck(t *testing.T, cfg DecoderConfig, td ptrace.Traces, err error) {
	if err != nil {
		return
	}
	spans := NewDecoder(cfg).AppendTraces(nil, td)
	if len(spans) != td.SpanCount() {
		t.Fatalf("%d spans from %d", len(spans), td.SpanCount())
	}
	checkSpans(t, spans)
}

func FuzzDecodeProto(f *testing.F) {
	for _, td := range fuzzSeeds(f) {
		f.Add(protoOf(f, td))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
		decodeAndCheck(t, DecoderConfig{ClaimHeader: "x-uber-error-claim"}, td, err)
	})
}

func FuzzReadFile(f *testing.F) {
	for _, td := range fuzzSeeds(f) {
		pb, js := protoOf(f, td), jsonOf(f, td)
		f.Add(pb)
		f.Add(frame(pb, pb))
		f.Add(append(append(append([]byte{}, js...), '\n'), js...))
		f.Add(gz(f, append(js, '\n')))
		f.Add(gz(f, frame(pb)))
	}
	f.Add([]byte{})
	f.Add([]byte("\n\n{}\n"))
	// Partial files: truncated gzip and length-prefixed streams, junk after
	// a gzip stream, a JSON line cut short, pretty-printed documents, deep
	// nesting between good lines.
	js := jsonOf(f, benchTraces(1))
	pb := protoOf(f, benchTraces(1))
	lines := append(append(append([]byte{}, js...), '\n'), js...)
	zl := gz(f, append(lines, '\n'))
	f.Add(zl[:len(zl)/2])
	f.Add(zl[:len(zl)-4])
	f.Add(append(append([]byte{}, zl...), "junk"...))
	f.Add(append(append([]byte{}, zl...), 0x1f))
	f.Add(append(append([]byte{}, zl...), zl[:12]...))
	fr := frame(pb, pb, pb)
	f.Add(fr[:len(fr)-7])
	f.Add(fr[:len(fr)-len(pb)-2])
	f.Add(gz(f, fr)[:len(gz(f, fr))*2/3])
	f.Add(lines[:len(lines)-9])
	f.Add(append(append(append([]byte{}, js...), '\n'), deepJSON(100)...))
	f.Add([]byte("{\n  \"resourceSpans\": [\n    {}\n  ]\n}\n{\n}\n"))
	f.Add([]byte("{\n  \"resourceSpans\": [\n    {\n{}\n"))
	for _, b := range jsonSeeds() {
		f.Add(append(b, '\n'))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(DecoderConfig{})
		n := 0
		st, err := d.ReadFile(bytes.NewReader(b), "fuzz", func(spans []graph.Span) error {
			n += len(spans)
			checkSpans(t, spans)
			return nil
		}, func(err error) {
			if !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("bad request error does not name the file: %v", err)
			}
		})
		if st.Spans != n {
			t.Fatalf("stats say %d spans, emitted %d", st.Spans, n)
		}
		if err == nil && st.Bytes != int64(len(b)) {
			t.Fatalf("read %d of %d bytes without error", st.Bytes, len(b))
		}
		if st.NotTraces > st.BadRequests {
			t.Fatalf("stats %+v", st)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz: ") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// checkSpans asserts invariants that hold for any input.
func checkSpans(t *testing.T, spans []graph.Span) {
	t.Helper()
	for _, s := range spans {
		if s.Service == "" || s.Peer == "" {
			t.Fatalf("empty service or peer: %+v", s)
		}
		if s.Kind > graph.KindConsumer || s.Claim > graph.ClaimInvalid || s.FailOpen > graph.True {
			t.Fatalf("out-of-range enum: %+v", s)
		}
		if s.Kind != graph.KindServer && s.Operation != s.Name {
			t.Fatalf("non-server operation %q != name %q", s.Operation, s.Name)
		}
		if s.Resend < 0 || (!s.HasResend && s.Resend != 0) {
			t.Fatalf("bad resend: %+v", s)
		}
		switch s.Sampling {
		case graph.SamplingNone:
			if s.AdjustedCount != 0 {
				t.Fatalf("no sampling, adjusted count %v: %+v", s.AdjustedCount, s)
			}
		case graph.SamplingInvalid:
			if s.AdjustedCount != 1 {
				t.Fatalf("invalid sampling, adjusted count %v: %+v", s.AdjustedCount, s)
			}
		case graph.SamplingRecorded, graph.SamplingConfigured:
			if !(s.AdjustedCount >= 1) || math.IsInf(s.AdjustedCount, 1) {
				t.Fatalf("adjusted count %v: %+v", s.AdjustedCount, s)
			}
		default:
			t.Fatalf("sampling %d: %+v", s.Sampling, s)
		}
	}
}
