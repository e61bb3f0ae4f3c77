// Package collector is stormradius' end-to-end suite with a real
// OpenTelemetry Collector: it builds a minimal collector (./otelcol, core
// and contrib v0.165.0) and stormradius, runs them as processes with the
// collector configs shipped in deploy/collector, feeds the collector the
// traces of testdata/sample.jsonl.gz and checks that what stormradius
// reports equals `stormradius analyze` of the same file. README.md says how
// to run it.
package collector

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
// otherwise: each mostly waits (batch timeouts, trace idleness), so more
// than the machine's cores keeps the suite short without starving it.
const defaultParallel = 4

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
// as OTLP requests, and the reference document.
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

	requests [][]byte // the sample as ExportTraceServiceRequest protobufs
	spans    int      // spans in the sample, counted from the OTLP data
	traces   int      // distinct trace ids in the sample
	want     []byte   // `stormradius analyze --format json` of the sample
}

// setup builds what every end-to-end test needs, once; a test whose setup
// failed fails with the reason.
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
	if suite.tmp, err = os.MkdirTemp("", "stormradius-e2e-"); err != nil {
		return err
	}
	// The collector and stormradius build at once: the collector's cold
	// build is the longest step, stormradius' mostly comes from the build
	// cache.
	errc := make(chan error, 1)
	go func() { errc <- buildCollector(wd) }()
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

// buildCollector builds ./otelcol into a cache directory keyed by
// everything that decides the binary (this module's go.mod and go.sum,
// the program's sources, the Go version and platform) and reuses it when
// it is there: the cold build takes minutes on two cores.
func buildCollector(moduleDir string) error {
	h := sha256.New()
	srcs, _ := filepath.Glob(filepath.Join(moduleDir, "otelcol", "*.go"))
	sort.Strings(srcs)
	for _, f := range append([]string{filepath.Join(moduleDir, "go.mod"), filepath.Join(moduleDir, "go.sum")}, srcs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	ver, err := goCmd(moduleDir, "env", "GOVERSION", "GOOS", "GOARCH").Output()
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
	dir := filepath.Join(cacheRoot, "otelcol-"+key)
	suite.otelcol = filepath.Join(dir, "otelcol")
	if fi, err := os.Stat(suite.otelcol); err == nil && fi.Mode().IsRegular() {
		fmt.Fprintf(os.Stderr, "e2e: collector from the cache: %s\n", suite.otelcol)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "e2e: building the collector into %s (minutes when cold)\n", dir)
	tmp := filepath.Join(dir, fmt.Sprintf(".otelcol-%d", os.Getpid()))
	if out, err := goCmd(moduleDir, "build", "-o", tmp, "./otelcol").CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go build the collector: %v\n%s", err, out)
	}
	// A rename is atomic: a concurrent run sees the whole binary or none.
	if err := os.Rename(tmp, suite.otelcol); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: built the collector in %v\n", time.Since(start).Round(time.Millisecond))
	// Binaries of other keys are stale (about 70 MB each).
	if old, _ := filepath.Glob(filepath.Join(cacheRoot, "otelcol-*")); len(old) > 0 {
		for _, o := range old {
			if o != dir {
				os.RemoveAll(o)
			}
		}
	}
	return nil
}

// loadSample reads the sample's OTLP JSON lines with pdata and regroups
// them into requestsPerSample ExportTraceServiceRequests; it counts the
// spans and distinct traces, which the reference must report.
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
	ids := map[[16]byte]bool{}
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
						ids[sp.At(k).TraceID()] = true
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
	out, err := runStormradius("analyze", "--format", "json", suite.sample)
	if err != nil {
		return err
	}
	doc, err := decodeDoc(out)
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
