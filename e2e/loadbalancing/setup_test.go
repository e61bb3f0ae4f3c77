// Package loadbalancing is stormradius' end-to-end suite for OTLP without
// Kafka behind the OpenTelemetry Collector's load_balancing exporter: it
// builds a collector with that exporter (./otelcol, its own module at the
// v0.161 line), runs it with deploy/collector/loadbalancing.yaml in front
// of several stormradius instances and checks that every trace of
// testdata/sample.jsonl.gz reached exactly one of them, whole. README.md
// says how to run it.
package loadbalancing

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// defaultParallel is how many subtests run at once unless -parallel says
// otherwise (each runs a collector and three stormradius processes, and
// mostly waits).
const defaultParallel = 3

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", fmt.Sprint(defaultParallel))
	}
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
	once sync.Once
	err  error

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
	suite.once.Do(func() { suite.err = build() })
	if suite.err != nil {
		t.Fatalf("setup: %v", suite.err)
	}
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
	// The collector and stormradius build at once: the collector's cold
	// build is the longest step.
	errc := make(chan error, 1)
	go func() { errc <- buildCollector(filepath.Join(wd, "otelcol")) }()
	start := time.Now()
	bin := filepath.Join(suite.tmp, "bin")
	if out, err := goCmd(suite.repo, "build", "-o", bin+string(filepath.Separator), "./cmd/stormradius", "./cmd/ingest").CombinedOutput(); err != nil {
		<-errc
		return fmt.Errorf("go build stormradius: %v\n%s", err, out)
	}
	suite.stormradius, suite.ingest = filepath.Join(bin, "stormradius"), filepath.Join(bin, "ingest")
	fmt.Fprintf(os.Stderr, "e2e: built stormradius and ingest in %v\n", time.Since(start).Round(time.Millisecond))
	if err := <-errc; err != nil {
		return err
	}
	if err := loadSample(); err != nil {
		return err
	}
	return reference()
}

// goCmd is `go ARGS` in dir, each module built on its own (no go.work
// above the checkout mixes them).
func goCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	return cmd
}

// cachePrefix names this suite's collector binaries in the cache shared
// with e2e/collector, whose stale-binary sweep takes otelcol-*.
const cachePrefix = "lbcol-"

// buildCollector builds the collector module in dir into a cache
// directory keyed by everything that decides the binary (its go.mod and
// go.sum, its sources, the Go version and platform) and reuses it when it
// is there: the cold build takes minutes on two cores.
func buildCollector(dir string) error {
	h := sha256.New()
	srcs, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	sort.Strings(srcs)
	for _, f := range append([]string{filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")}, srcs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	ver, err := goCmd(dir, "env", "GOVERSION", "GOOS", "GOARCH").Output()
	if err != nil {
		return fmt.Errorf("go env: %v", err)
	}
	h.Write(ver)
	key := hex.EncodeToString(h.Sum(nil))[:16]

	cacheRoot := os.Getenv("STORMRADIUS_E2E_CACHE")
	if cacheRoot == "" {
		base, err := os.UserCacheDir() // $XDG_CACHE_HOME or ~/.cache
		if err != nil {
			base = os.TempDir()
		}
		cacheRoot = filepath.Join(base, "stormradius-e2e")
	}
	cache := filepath.Join(cacheRoot, cachePrefix+key)
	suite.otelcol = filepath.Join(cache, "otelcol")
	if fi, err := os.Stat(suite.otelcol); err == nil && fi.Mode().IsRegular() {
		fmt.Fprintf(os.Stderr, "e2e: collector from the cache: %s\n", suite.otelcol)
		return nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "e2e: building the collector into %s (minutes when cold)\n", cache)
	tmp := filepath.Join(cache, fmt.Sprintf(".otelcol-%d", os.Getpid()))
	if out, err := goCmd(dir, "build", "-o", tmp, ".").CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go build the collector (%s): %v\n%s", dir, err, out)
	}
	// A rename is atomic: a concurrent run sees the whole binary or none.
	if err := os.Rename(tmp, suite.otelcol); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: built the collector in %v\n", time.Since(start).Round(time.Millisecond))
	// Binaries of other keys are stale (about 100 MB each).
	if old, _ := filepath.Glob(filepath.Join(cacheRoot, cachePrefix+"*")); len(old) > 0 {
		for _, o := range old {
			if o != cache {
				os.RemoveAll(o)
			}
		}
	}
	return nil
}

// loadSample reads the sample's OTLP JSON lines with pdata and regroups
// them into requestsPerSample ExportTraceServiceRequests; it counts the
// spans of each trace, which the instances must hold between them.
func loadSample() error {
	f, err := os.Open(suite.sample)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	var lines []ptrace.Traces
	suite.perTrace = map[string]int{}
	br := bufio.NewReader(zr)
	var u ptrace.JSONUnmarshaler
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			td, uerr := u.UnmarshalTraces(line)
			if uerr != nil {
				return fmt.Errorf("%s line %d: %v", suite.sample, len(lines)+1, uerr)
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
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
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
	out, err := runStormradius("analyze", "--format", "json", suite.sample)
	if err != nil {
		return err
	}
	doc, err := decodeDoc(out)
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
