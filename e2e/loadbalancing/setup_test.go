// Package loadbalancing is stormradius' end-to-end suite for OTLP without
// Kafka behind the OpenTelemetry Collector's load_balancing exporter: it
// builds a collector with that exporter (./otelcol, its own module at the
// v0.161 line), runs it with deploy/collector/loadbalancing.yaml in front
// of several stormradius instances and checks that every trace of
// testdata/sample.jsonl.gz reached exactly one of them, whole. README.md
// says how to run it.
package loadbalancing

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
// otherwise (each runs a collector and three stormradius processes, and
// mostly waits).
const defaultParallel = 3

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
// as OTLP requests with its traces' span counts, and the reference.
var suite struct {
	setup e2ekit.Once

	tmp         string // removed by TestMain
	repo        string // the stormradius module's root
	configs     string // deploy/collector
	sample      string // testdata/sample.jsonl.gz
	stormradius string // the stormradius binary
	ingest      string // cmd/ingest's binary
	otelcol     string // the collector's binary (cached)

	requests [][]byte       // the sample as ExportTraceServiceRequest protobufs
	spans    int            // spans in the sample, counted from the OTLP data
	perTrace map[string]int // spans of each trace (32 hex digits), from the OTLP data
	want     []byte         // `stormradius analyze --format json` of the sample
}

// setup builds what every test needs, once; a test whose setup failed
// fails with the reason.
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
	if suite.tmp, err = os.MkdirTemp("", "stormradius-e2e-lb-"); err != nil {
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

// buildCollector builds the collector module otelcol/ into the cache
// shared with the other suites (lbcol-KEY, apart from e2e/collector's
// otelcol-KEY; e2e/sampling runs it too), keyed by its go.mod, go.sum and
// sources, or takes it from there: the cold build takes minutes on two
// cores.
func buildCollector(wd string) error {
	var err error
	suite.otelcol, err = e2ekit.LBCollectorBuild(filepath.Dir(wd)).Build()
	return err
}

// loadSample reads the sample's OTLP JSON lines with pdata and regroups
// them into requestsPerSample ExportTraceServiceRequests; it counts the
// spans of each trace, which the instances must hold between them.
func loadSample() error {
	var lines []ptrace.Traces
	suite.perTrace = map[string]int{}
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
					suite.perTrace[sp.At(k).TraceID().String()]++
				}
			}
		}
		lines = append(lines, td)
		return nil
	})
	if err != nil {
		return err
	}
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
// document the instances' reports must add up to (phase 1) or equal
// (phase 2). Its span and trace counts are checked against the OTLP data
// itself, so that a broken analyze cannot make the routes agree with it.
func reference() error {
	out, err := e2ekit.Run(suite.stormradius, "analyze", "--format", "json", suite.sample)
	if err != nil {
		return err
	}
	doc, err := e2ekit.DecodeDoc(out)
	if err != nil {
		return fmt.Errorf("stormradius analyze: %v", err)
	}
	if got := fmt.Sprint(doc["spans"], " ", doc["traces"]); got != fmt.Sprint(suite.spans, " ", len(suite.perTrace)) {
		return fmt.Errorf("stormradius analyze of the sample counts spans, traces = %s; the OTLP data has %d, %d",
			got, suite.spans, len(suite.perTrace))
	}
	suite.want = out
	return nil
}
