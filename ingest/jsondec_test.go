package ingest

import (
	"testing"

	"github.com/stormradius/stormradius/graph"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// diffJSON decodes b with the JSON decoder (AppendRequest) and with pdata's
// path (appendJSONPdata), and fails the test unless both reject it or both
// give the same spans. It returns the decoder's result.
func diffJSON(t testing.TB, cfg DecoderConfig, b []byte) ([]graph.Span, error) {
	t.Helper()
	ref, rerr := appendJSONPdata(NewDecoder(cfg), nil, b)
	kept := []graph.Span{{Name: "kept"}}
	got, err := NewDecoder(cfg).AppendRequest(kept, b, true)
	if (err == nil) != (rerr == nil) {
		t.Fatalf("decoder error %v, pdata error %v (input %d bytes: %q)", err, rerr, len(b), trimmed(b))
	}
	if len(got) == 0 || got[0].Name != "kept" {
		t.Fatalf("dst not kept: %+v", got)
	}
	if err != nil {
		if len(got) != 1 || &got[0] != &kept[0] {
			t.Fatalf("dst changed on error %v: %d spans", err, len(got))
		}
		return nil, err
	}
	got = got[1:]
	if len(got) != len(ref) {
		t.Fatalf("decoder: %d spans, pdata: %d (input %q)", len(got), len(ref), trimmed(b))
	}
	for i := range got {
		if got[i] != ref[i] {
			t.Fatalf("span %d differs (input %q):\ndecoder %+v\npdata   %+v", i, trimmed(b), got[i], ref[i])
		}
	}
	return got, nil
}

func TestJSONDiffCorpora(t *testing.T) {
	n := 0
	check := func(cfg DecoderConfig, b []byte) {
		t.Helper()
		spans, err := diffJSON(t, cfg, b)
		if err != nil {
			t.Fatalf("corpus request rejected: %v", err)
		}
		n += len(spans)
	}
	sims, hdrs := simRequests(t)
	for i, b := range sims {
		check(DecoderConfig{ClaimHeader: hdrs[i]}, jsonOfProto(t, b))
	}
	for _, b := range sampleRequests(t) {
		check(DecoderConfig{}, jsonOfProto(t, b))
	}
	check(DecoderConfig{}, jsonOf(t, benchTraces(333)))
	for _, td := range fuzzSeeds(t) {
		check(DecoderConfig{}, jsonOf(t, td))
		check(DecoderConfig{ClaimHeader: "x-uber-error-claim"}, jsonOf(t, td))
	}
	if n < 10000 {
		t.Fatalf("only %d spans compared", n)
	}
}

// jsonOfProto is the protobuf request b as pdata marshals it in JSON.
func jsonOfProto(t testing.TB, b []byte) []byte {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		t.Fatal(err)
	}
	return jsonOf(t, td)
}
