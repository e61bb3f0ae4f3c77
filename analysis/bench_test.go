package analysis_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	shapes "github.com/stormradius/stormradius/internal/corpus"
	"github.com/stormradius/stormradius/sim"
)

// The benchmark corpus: a simulated mesh of 4 APIs, call paths 25 hops
// deep, fan-out 3, mixed HTTP/gRPC, fail-open edges, virtual stores and
// ownership middleware; deep services go down for ~30% of traces. About
// 1.1M spans, as OTLP JSON lines and as length-prefixed protobuf.
type benchCorpus struct {
	json, proto []byte
	spans       int
	traces      [][]graph.Span
}

var (
	corpusOnce sync.Once
	bc         benchCorpus
)

func benchScenario() sim.Scenario { return shapes.MeshScenario(7000) }

func loadCorpus(b *testing.B) *benchCorpus {
	corpusOnce.Do(func() {
		var j, p bytes.Buffer
		st, err := sim.Write(benchScenario(), &j, sim.JSONLines)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sim.Write(benchScenario(), &p, sim.Proto); err != nil {
			b.Fatal(err)
		}
		bc.json, bc.proto, bc.spans = j.Bytes(), p.Bytes(), st.Spans
		dec := ingest.NewDecoder(ingest.DecoderConfig{})
		var spans []graph.Span
		if _, err := dec.ReadFile(bytes.NewReader(bc.proto), "corpus", func(s []graph.Span) error {
			spans = append(spans, s...)
			return nil
		}, nil); err != nil {
			b.Fatal(err)
		}
		bc.traces = graph.GroupTraces(spans)
	})
	return &bc
}

func reportSpans(b *testing.B, spans int) {
	b.ReportMetric(float64(spans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkAssemble: trace assembly alone, one core.
func BenchmarkAssemble(b *testing.B) {
	c := loadCorpus(b)
	var a graph.Assembler
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, tr := range c.traces {
			a.Assemble(tr)
		}
	}
	reportSpans(b, c.spans)
}

// BenchmarkFold: the per-window caps' cost alone (analysis.Folder.Fold
// of every assembled trace against its window's admitted names, nothing
// past the caps), one core: next to BenchmarkAssemble's spans/s.
func BenchmarkFold(b *testing.B) {
	c := loadCorpus(b)
	var a graph.Assembler
	traces := make([]*graph.Trace, len(c.traces))
	for i, tr := range c.traces {
		traces[i] = a.Assemble(append([]graph.Span(nil), tr...))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		adm := analysis.NewAdmissions(analysis.Config{})
		for _, t := range traces {
			if adm.Fold(t) != 0 {
				b.Fatal("folded under the default caps")
			}
		}
	}
	reportSpans(b, c.spans)
}

// BenchmarkAssembleAnalyse: assembly, window state, per-trace evaluation
// and the report, one core (the issue's ≥ 1M spans/s target).
func BenchmarkAssembleAnalyse(b *testing.B) {
	c := loadCorpus(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		doc, _ := analysis.InMemory(graph.Lists(c.traces), analysis.Config{}, 1)
		if doc.Fleet.FailedAPIs == 0 {
			b.Fatal("no failures in corpus")
		}
	}
	reportSpans(b, c.spans)
}

// BenchmarkAssembleAnalyseSampled is BenchmarkAssembleAnalyse with every
// trace sampled (docs/SPEC.md §4.9): an adjusted count of 1/0.3 recorded
// on every span, so each trace is weighted 3 or 4 (rounded by its id),
// and the variance sums are kept: what weighting costs.
func BenchmarkAssembleAnalyseSampled(b *testing.B) {
	c := loadCorpus(b)
	traces := make([][]graph.Span, len(c.traces))
	for i, tr := range c.traces {
		traces[i] = append([]graph.Span(nil), tr...)
		for k := range traces[i] {
			traces[i][k].Sampling, traces[i][k].AdjustedCount = graph.SamplingRecorded, 1/0.3
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		doc, _ := analysis.InMemory(graph.Lists(traces), analysis.Config{}, 1)
		if !doc.Sampling.Estimated {
			b.Fatal("not weighted")
		}
	}
	reportSpans(b, c.spans)
}

// BenchmarkPipeline compares the whole analyze pipeline (read the file,
// decode — protobuf with the wire decoder, JSON with pdata and conversion —
// group, assemble, analyse, report; one core)
// with pdata's own unmarshal of the same bytes. Each iteration runs both,
// one after the other, so machine drift hits both alike; the metrics are
// each one's spans/s and their ratio (pipeline speed / unmarshal speed).
func BenchmarkPipeline(b *testing.B) {
	c := loadCorpus(b)
	for _, f := range []struct {
		name string
		data []byte
		ref  func(b *testing.B, data []byte)
	}{
		{"json", c.json, pdataJSON},
		{"proto", c.proto, pdataProto},
	} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.data)))
			b.ReportAllocs()
			var ref, pipe time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				f.ref(b, f.data)
				t1 := time.Now()
				analyzeBytes(b, f.name, f.data)
				ref, pipe = ref+t1.Sub(t0), pipe+time.Since(t1)
			}
			spans := float64(c.spans) * float64(b.N)
			b.ReportMetric(spans/ref.Seconds(), "pdata-spans/s")
			b.ReportMetric(spans/pipe.Seconds(), "analyze-spans/s")
			b.ReportMetric(ref.Seconds()/pipe.Seconds(), "ratio")
		})
	}
}

// analyzeBytes is what `stormradius analyze` does with one file, on one
// core.
func analyzeBytes(b *testing.B, name string, data []byte) *analysis.Document {
	dec := ingest.NewDecoder(ingest.DecoderConfig{})
	var g graph.Grouper
	if _, err := dec.ReadFile(bytes.NewReader(data), name, func(s []graph.Span) error {
		g.Add(s)
		return nil
	}, nil); err != nil {
		b.Fatal(err)
	}
	doc, _ := analysis.InMemory(g.Group(), analysis.Config{}, 1)
	return doc
}

func pdataJSON(b *testing.B, data []byte) {
	var u ptrace.JSONUnmarshaler
	r := bufio.NewReaderSize(bytes.NewReader(data), 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if _, uerr := u.UnmarshalTraces(line); uerr != nil {
				b.Fatal(uerr)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func pdataProto(b *testing.B, data []byte) {
	var u ptrace.ProtoUnmarshaler
	for len(data) >= 4 {
		n := binary.BigEndian.Uint32(data)
		if _, err := u.UnmarshalTraces(data[4 : 4+n]); err != nil {
			b.Fatal(err)
		}
		data = data[4+n:]
	}
}

// shapeCorpus is one corpus of the family (internal/corpus), decoded and
// grouped by trace.
type shapeCorpus struct {
	spans  int
	traces [][]graph.Span
}

var (
	shapesMu sync.Mutex
	loaded   = map[string]*shapeCorpus{}
)

// loadShape decodes the shape's protobuf file (corpus.Shape.Decode), once
// per process.
func loadShape(b *testing.B, s shapes.Shape) *shapeCorpus {
	shapesMu.Lock()
	defer shapesMu.Unlock()
	if c := loaded[s.Name]; c != nil {
		return c
	}
	traces, st, err := s.Decode(sim.Proto)
	if err != nil {
		b.Fatal(err)
	}
	c := &shapeCorpus{spans: st.Spans, traces: traces}
	loaded[s.Name] = c
	return c
}

// BenchmarkInMemory is the analysis of already-decoded spans
// (analysis.InMemory: assembly, window states, evaluation, incidents,
// report) on one core, for every shape of the corpus family: the
// issue-32 target is ≥ 2.5 M spans/s on every one.
//
//	go test -run XXX -bench InMemory -cpu 1 ./analysis/
func BenchmarkInMemory(b *testing.B) {
	for _, s := range shapes.Shapes(shapes.DefaultSpans) {
		b.Run(s.Name, func(b *testing.B) {
			c := loadShape(b, s)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				doc, _ := analysis.InMemory(graph.Lists(c.traces), analysis.Config{}, 1)
				if doc.Fleet.APIs == 0 {
					b.Fatal("no APIs")
				}
				if i == 0 {
					b.ReportMetric(float64(len(doc.Incidents)), "incidents")
				}
			}
			// CPU time (user + system of the process: with -cpu 1, this
			// goroutine and the collector) drifts less than wall time on
			// a shared machine.
			cpu := cpuTime() - cpu0
			reportSpans(b, c.spans)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(c.spans)/float64(b.N), "ns/span")
			b.ReportMetric(float64(c.spans)*float64(b.N)/cpu.Seconds(), "cpu-spans/s")
		})
	}
}

// cpuTime returns the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
