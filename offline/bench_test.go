package offline_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/sim"
)

// BenchmarkAnalyzeProto is `stormradius analyze` on a protobuf file as the
// command runs it — the decoder on every core (ingest.Decoder.Workers),
// offline.Analyze (pending traces, spill file, windows, evaluation on every
// core, the document) — against pdata's own unmarshal of the same
// requests (one core, as pdata decodes a request). Each iteration times
// both, one after the other, each phase ending with a collection of its
// own garbage; the metrics are the ratio of their speeds (whole pipeline
// / unmarshal alone) over all iterations and the median of the
// iterations' ratios.
func BenchmarkAnalyzeProto(b *testing.B) {
	sc := sim.Mesh(sim.MeshConfig{Seed: 7, APIs: 4, Depth: 25, Fanout: 3, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.002,
		Policy: sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}})
	sc.Traces = 7000
	sc.Faults = []sim.Fault{{Service: "svc-20-1", Rate: 0.2, Persistent: true}, {Service: "svc-12-2", Rate: 0.1, Persistent: true}}
	var file bytes.Buffer
	st, err := sim.Write(sc, &file, sim.Proto)
	if err != nil {
		b.Fatal(err)
	}
	// The file's requests (length-prefixed, as sim.Proto writes them), for
	// pdata.
	var reqs [][]byte
	for data := file.Bytes(); len(data) >= 4; {
		n := binary.BigEndian.Uint32(data)
		reqs = append(reqs, data[4:4+n])
		data = data[4+n:]
	}
	var pipe, ref time.Duration
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var u ptrace.ProtoUnmarshaler
		for _, r := range reqs {
			if _, err := u.UnmarshalTraces(r); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC() // pdata's garbage is its own cost
		t1 := time.Now()
		doc, _, _, err := offline.Analyze(context.Background(), func(emit func([]graph.Span) error) error {
			dec := ingest.NewDecoder(ingest.DecoderConfig{})
			dec.Workers = runtime.GOMAXPROCS(0)
			_, err := dec.ReadFile(bytes.NewReader(file.Bytes()), "corpus", emit, nil)
			return err
		}, offline.Config{Analysis: analysis.Config{}, TempDir: b.TempDir()})
		runtime.GC() // and so is the pipeline's
		t2 := time.Now()
		if err != nil || doc.Spans != int64(st.Spans) {
			b.Fatalf("%v, %d spans of %d", err, doc.Spans, st.Spans)
		}
		ref += t1.Sub(t0)
		pipe += t2.Sub(t1)
		ratios = append(ratios, t1.Sub(t0).Seconds()/t2.Sub(t1).Seconds())
	}
	n := float64(st.Spans) * float64(b.N)
	b.ReportMetric(n/pipe.Seconds(), "spans/s")
	b.ReportMetric(n/ref.Seconds(), "ref-spans/s")
	b.ReportMetric(ref.Seconds()/pipe.Seconds(), "ratio")
	// The machine's speed drifts from second to second; the two phases of
	// an iteration are next to each other, so the median of the
	// iterations' ratios is the steadier figure.
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
}
