// Package collector is stormradius' end-to-end suite with a real
// OpenTelemetry Collector: it builds a minimal collector (./otelcol, core
// and contrib v0.165.0) and stormradius, runs them as processes with the
// collector configs shipped in deploy/collector, feeds the collector the
// traces of testdata/sample.jsonl.gz and checks that what stormradius
// reports equals `stormradius analyze` of the same file. README.md says how
// to run it.
package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// defaultParallel is how many subtests run at once unless -parallel says
// otherwise: each mostly waits (batch timeouts, trace idleness), so more
// than the machine's cores keeps the suite short without starving it.
const defaultParallel = 4

func TestMain(m *testing.M) {
	e2ekit.DefaultParallel(defaultParallel)
	code := m.Run()
	if suite.tmp != "" {
		os.RemoveAll(suite.tmp)
	}
	os.Exit(code)
}

// requestsPerSample is how many OTLP requests the sample is sent in.
const requestsPerSample = 10

// The suite's shared state, built once by setup: the binaries, the sample
// as OTLP requests, and the reference document.
var suite struct {
	setup e2ekit.Once

	tmp         string // removed by TestMain
	repo        string // the stormradius module's root
	configs     string // deploy/collector
	sample      string // testdata/sample.jsonl.gz
	stormradius string // the stormradius binary
	ingest      string // cmd/ingest's binary
	otelcol     string // the collector's binary (cached)

	requests [][]byte // the sample as ExportTraceServiceRequest protobufs
	spans    int      // spans in the sample, counted from the OTLP data
	traces   int      // distinct trace ids in the sample
	want     []byte   // `stormradius analyze --format json` of the sample
}

// setup builds what every end-to-end test needs, once; a test whose setup
// failed fails with the reason.
func setup(t *testing.T) {
	t.Helper()
	suite.setup.Do(t, build)
}

func build() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	suite.repo = filepath.Clean(filepath.Join(wd, "..", ".."))
	suite.configs = filepath.Join(suite.repo, "deploy", "collector")
	suite.sample = filepath.Join(suite.repo, "testdata", "sample.jsonl.gz")
	if suite.tmp, err = os.MkdirTemp("", "stormradius-e2e-"); err != nil {
		return err
	}
	// The collector and stormradius build at once.
	bin := filepath.Join(suite.tmp, "bin")
	if err := e2ekit.BuildCommands(suite.repo, bin, func() error { return buildCollector(wd) }, "stormradius", "ingest"); err != nil {
		return err
	}
	suite.stormradius, suite.ingest = filepath.Join(bin, "stormradius"), filepath.Join(bin, "ingest")
	if err := loadSample(); err != nil {
		return err
	}
	return reference()
}

// buildCollector builds ./otelcol into the cache shared with the other
// suites (otelcol-KEY; e2e/sampling runs it too), keyed by this module's
// go.mod and go.sum and the program's sources, or takes it from there:
// the cold build takes minutes on two cores.
func buildCollector(moduleDir string) error {
	var err error
	suite.otelcol, err = e2ekit.CollectorBuild(filepath.Dir(moduleDir)).Build()
	return err
}

// loadSample reads the sample's OTLP JSON lines with pdata and regroups
// them into requestsPerSample ExportTraceServiceRequests; it counts the
// spans and distinct traces, which the reference must report.
func loadSample() error {
	var lines []ptrace.Traces
	ids := map[[16]byte]bool{}
	var u ptrace.JSONUnmarshaler
	err := e2ekit.EachGzipLine(suite.sample, func(n int, line []byte) error {
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %v", suite.sample, n, err)
		}
		suite.spans += td.SpanCount()
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			ss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				sp := ss.At(j).Spans()
				for k := 0; k < sp.Len(); k++ {
					ids[sp.At(k).TraceID()] = true
				}
			}
		}
		lines = append(lines, td)
		return nil
	})
	if err != nil {
		return err
	}
	suite.traces = len(ids)
	if len(lines) < requestsPerSample {
		return fmt.Errorf("%s: %d lines, want at least %d", suite.sample, len(lines), requestsPerSample)
	}
	per := (len(lines) + requestsPerSample - 1) / requestsPerSample
	for i := 0; i < len(lines); i += per {
		req := ptrace.NewTraces()
		for _, td := range lines[i:min(i+per, len(lines))] {
			td.ResourceSpans().MoveAndAppendTo(req.ResourceSpans())
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(req).MarshalProto()
		if err != nil {
			return err
		}
		suite.requests = append(suite.requests, b)
	}
	return nil
}

// reference runs `stormradius analyze --format json` on the sample: the
// document every route must reproduce. Its span and trace counts are
// checked against the OTLP data itself, so that a broken analyze cannot
// make every route agree with it.
func reference() error {
	out, err := e2ekit.Run(suite.stormradius, "analyze", "--format", "json", suite.sample)
	if err != nil {
		return err
	}
	doc, err := e2ekit.DecodeDoc(out)
	if err != nil {
		return fmt.Errorf("stormradius analyze: %v", err)
	}
	if got := fmt.Sprint(doc["spans"], " ", doc["traces"]); got != fmt.Sprint(suite.spans, " ", suite.traces) {
		return fmt.Errorf("stormradius analyze of the sample counts spans, traces = %s; the OTLP data has %d, %d",
			got, suite.spans, suite.traces)
	}
	suite.want = out
	return nil
}
