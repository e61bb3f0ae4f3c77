package ingest

import (
	"bytes"
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
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, td := range fuzzSeeds(f) {
		f.Add(jsonOf(f, td))
	}
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":2,"attributes":[{"key":"error.claim","value":{"arrayValue":{}}}]}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		decodeAndCheck(t, DecoderConfig{}, td, err)
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
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(DecoderConfig{})
		n := 0
		st, err := d.ReadFile(bytes.NewReader(b), "fuzz", func(spans []graph.Span) error {
			n += len(spans)
			checkSpans(t, spans)
			return nil
		}, func(error) {})
		if st.Spans != n {
			t.Fatalf("stats say %d spans, emitted %d", st.Spans, n)
		}
		if err == nil && st.Bytes != int64(len(b)) {
			t.Fatalf("read %d of %d bytes without error", st.Bytes, len(b))
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
	}
}
