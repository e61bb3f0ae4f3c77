package ingest

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// simJSONCorpus is simCorpus's requests as pdata marshals them in JSON.
func simJSONCorpus(b *testing.B) ([][]byte, int) {
	sims, _, spans := simCorpus(b)
	js := make([][]byte, len(sims))
	for i, r := range sims {
		js[i] = jsonOfProto(b, r)
	}
	return js, spans
}

// BenchmarkPdataUnmarshalJSONSim is BenchmarkPdataUnmarshalJSON on the
// simulated meshes' requests.
func BenchmarkPdataUnmarshalJSONSim(b *testing.B) {
	js, spans := simJSONCorpus(b)
	benchPdataRequests(b, &ptrace.JSONUnmarshaler{}, js, spans)
}

// BenchmarkDecodeJSONSim is BenchmarkDecodeJSON on the same requests.
func BenchmarkDecodeJSONSim(b *testing.B) {
	js, spans := simJSONCorpus(b)
	benchDecodeRequests(b, js, spans, true)
}

// BenchmarkDecodeJSONPdata is the JSON path before the decoder: the
// pre-scan, pdata's unmarshal, then AppendTraces.
func BenchmarkDecodeJSONPdata(b *testing.B) {
	_, _, js, spans := benchCorpus(b)
	benchPathBefore(b, js, spans, appendJSONPdata)
}

// BenchmarkJSONRatio is BenchmarkProtoRatio for OTLP/JSON: within each
// iteration, pdata's bare JSON unmarshal (ptrace.JSONUnmarshaler, the
// reference, with no conversion to spans) and then the decoder
// (AppendRequest: the pre-scan and the decoder, to spans) on the same
// requests; it reports both speeds and the median of the per-iteration
// ratios of pdata's time over the decoder's ("speedup"). pdata's phase ends
// with a garbage collection, timed with it.
func BenchmarkJSONRatio(b *testing.B) {
	_, _, js, spans := benchCorpus(b)
	sims, simSpans := simJSONCorpus(b)
	benchRatio(b, &ptrace.JSONUnmarshaler{}, true, "decoder-spans/s", ratioCorpus{"mix", [][]byte{js}, spans},
		ratioCorpus{"sim", sims, simSpans})
}
