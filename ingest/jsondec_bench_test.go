package ingest

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
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
	b.ReportAllocs()
	var u ptrace.JSONUnmarshaler
	for b.Loop() {
		for _, r := range js {
			if _, err := u.UnmarshalTraces(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportSpans(b, spans)
}

// BenchmarkDecodeJSONSim is BenchmarkDecodeJSON on the same requests.
func BenchmarkDecodeJSONSim(b *testing.B) {
	js, spans := simJSONCorpus(b)
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	var dst []graph.Span
	for b.Loop() {
		n := 0
		for _, r := range js {
			var err error
			if dst, err = d.AppendRequest(dst[:0], r, true); err != nil {
				b.Fatal(err)
			}
			n += len(dst)
		}
		if n != spans {
			b.Fatal(n, spans)
		}
	}
	reportSpans(b, spans)
}

// BenchmarkDecodeJSONPdata is the JSON path before the decoder: the
// pre-scan, pdata's unmarshal, then AppendTraces.
func BenchmarkDecodeJSONPdata(b *testing.B) {
	_, _, js, spans := benchCorpus(b)
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	dst := make([]graph.Span, 0, spans)
	var err error
	for b.Loop() {
		if dst, err = appendJSONPdata(d, dst[:0], js); err != nil || len(dst) != spans {
			b.Fatal(err, len(dst))
		}
	}
	reportSpans(b, spans)
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
	for _, c := range []struct {
		name  string
		reqs  [][]byte
		spans int
	}{
		{"mix", [][]byte{js}, spans},
		{"sim", sims, simSpans},
	} {
		b.Run(c.name, func(b *testing.B) {
			var u ptrace.JSONUnmarshaler
			d := NewDecoder(DecoderConfig{})
			var dst []graph.Span
			var tPdata, tOurs time.Duration
			ratios := make([]float64, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				for _, r := range c.reqs {
					if _, err := u.UnmarshalTraces(r); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				t1 := time.Now()
				n := 0
				for _, r := range c.reqs {
					var err error
					if dst, err = d.AppendRequest(dst[:0], r, true); err != nil {
						b.Fatal(err)
					}
					n += len(dst)
				}
				if n != c.spans {
					b.Fatalf("%d spans, want %d", n, c.spans)
				}
				dp, do := t1.Sub(t0), time.Since(t1)
				tPdata += dp
				tOurs += do
				ratios = append(ratios, float64(dp)/float64(do))
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "speedup")
			b.ReportMetric(float64(b.N)*float64(c.spans)/tOurs.Seconds(), "decoder-spans/s")
			b.ReportMetric(float64(b.N)*float64(c.spans)/tPdata.Seconds(), "pdata-spans/s")
		})
	}
}
