package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/internal/corpus"
	"github.com/stormradius/stormradius/sim"
)

// refEnv makes the test binary a reference process (TestMain): pdata's
// bare unmarshal of every request of the file it names, then exit.
const refEnv = "STORMRADIUS_BENCH_PDATA"

// TestMain runs the reference process of BenchmarkAnalyzeOneCore when
// refEnv is set, the tests otherwise (and then deletes the binary
// commandBinary built, if any).
func TestMain(m *testing.M) {
	if p := os.Getenv(sampledEnv); p != "" {
		n, err := sampledCorpus(p, oneCoreScenario(2400))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(n)
		os.Exit(0)
	}
	if p := os.Getenv(refEnv); p != "" {
		n, err := pdataUnmarshal(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(n)
		os.Exit(0)
	}
	code := m.Run()
	if binPath != "" { // commandBinary's build, once per test process
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// pdataUnmarshal unmarshals every request of the file with pdata
// (length-prefixed protobuf, or OTLP JSON lines when the first byte is
// '{'), reading it through a buffered reader, and returns the spans.
func pdataUnmarshal(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	first, err := r.Peek(1)
	if err != nil {
		return 0, err
	}
	spans := 0
	if first[0] == '{' {
		var u ptrace.JSONUnmarshaler
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				td, uerr := u.UnmarshalTraces(line)
				if uerr != nil {
					return spans, uerr
				}
				spans += td.SpanCount()
			}
			if err == io.EOF {
				return spans, nil
			}
			if err != nil {
				return spans, err
			}
		}
	}
	var u ptrace.ProtoUnmarshaler
	var hdr [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
			return spans, nil
		} else if err != nil {
			return spans, err
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return spans, fmt.Errorf("%s: truncated message: %w", path, err)
		}
		td, err := u.UnmarshalTraces(buf[:n])
		if err != nil {
			return spans, err
		}
		spans += td.SpanCount()
	}
}

// oneCoreScenario is the analysis corpus's mesh (corpus.MeshScenario)
// with traces traces: 2,400 are about 366,000 spans.
func oneCoreScenario(traces int) sim.Scenario { return corpus.MeshScenario(traces) }

// writeCorpus writes the scenario to a file in format f and returns its
// path and span count.
func writeCorpus(b *testing.B, dir string, sc sim.Scenario, f sim.Format) (string, int) {
	b.Helper()
	name := "corpus.pb"
	if f == sim.JSONLines {
		name = "corpus.jsonl"
	}
	p := filepath.Join(dir, name)
	out, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	st, err := sim.Write(sc, out, f)
	if err == nil {
		err = out.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	return p, st.Spans
}

// sampledEnv makes the test binary write the sampled corpus to its path
// and print its span count (TestMain): in a process of its own, so that
// the simulation's memory never counts in the peak RSS of the processes
// the benchmark starts (a child started from a large process keeps the
// parent's high-water mark across exec).
const sampledEnv = "STORMRADIUS_BENCH_SAMPLED"

// writeSampledCorpus writes the scenario sampled as the collector's
// probabilistic sampler does at 50 % (ot=th on every kept span: every
// trace weighted 2, docs/SPEC.md §4.9) as length-prefixed protobuf, in a
// process of its own (sampledEnv), and returns its path and span count.
func writeSampledCorpus(b *testing.B, dir string) (string, int) {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(dir, "sampled.pb")
	c := exec.Command(self, "-test.run=^$")
	c.Env = append(os.Environ(), sampledEnv+"="+p)
	out, err := c.Output()
	if err != nil {
		b.Fatalf("writing the sampled corpus: %v", err)
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(out)))
	if err != nil {
		b.Fatalf("writing the sampled corpus: %q", out)
	}
	return p, n
}

// sampledCorpus writes sc sampled at 50 % to path and returns the spans
// kept.
func sampledCorpus(path string, sc sim.Scenario) (int, error) {
	res, err := sim.Run(sc)
	if err != nil {
		return 0, err
	}
	kept, st, err := sim.Sample(res.Exports(1, 20, 0), sim.Probabilistic{Percentage: 50})
	if err != nil {
		return 0, err
	}
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	for _, td := range kept {
		if err = sim.WriteProtoMessage(out, td); err != nil {
			break
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return st.KeptSpans, err
}

// oneCoreCase is one corpus of the one-core benchmarks: a shape of the
// corpus family (internal/corpus) in a format, or (sampled) the mesh's
// traffic sampled at 50 %.
type oneCoreCase struct {
	name    string
	shape   corpus.Shape
	f       sim.Format
	sampled bool
}

// oneCoreCases are every shape as protobuf and as JSON lines, and the
// sampled mesh ("mesh/proto-sampled": what weighting costs — the same
// mesh, half its traces kept, each standing for two).
func oneCoreCases() []oneCoreCase {
	var out []oneCoreCase
	for _, s := range corpus.Shapes(corpus.DefaultSpans) {
		out = append(out, oneCoreCase{s.Name + "/proto", s, sim.Proto, false}, oneCoreCase{s.Name + "/json", s, sim.JSONLines, false})
	}
	return append(out, oneCoreCase{name: "mesh/proto-sampled", f: sim.Proto, sampled: true})
}

// corpusFile writes the case's corpus to a temporary directory and
// returns its path and span count.
func (c oneCoreCase) corpusFile(b *testing.B) (string, int) {
	b.Helper()
	if c.sampled {
		return writeSampledCorpus(b, b.TempDir())
	}
	p := filepath.Join(b.TempDir(), "corpus")
	out, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	st, err := c.shape.Write(out, c.f)
	if err == nil {
		err = out.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	return p, st.Spans
}

// run1 runs the command with GOMAXPROCS=1 and returns its wall time,
// peak RSS (bytes) and CPU time (user + system).
func run1(b *testing.B, cmd *exec.Cmd) (time.Duration, int64, time.Duration) {
	return runProcs(b, cmd, "1")
}

// runProcs is run1 with GOMAXPROCS=procs (every core when "").
func runProcs(b *testing.B, cmd *exec.Cmd, procs string) (time.Duration, int64, time.Duration) {
	b.Helper()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if procs != "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+procs)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v: %v\n%s", cmd.Args, err, errb.String())
	}
	d := time.Since(t0)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return d, ru.Maxrss << 10, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAnalyzeOneCore is `stormradius analyze FILE` (output to
// /dev/null) against pdata's bare unmarshal of every request of the same
// file, each a whole process on one core (GOMAXPROCS=1), alternating in
// every iteration, on every shape of the corpus family (internal/corpus:
// ~366,000 spans each — the analysis corpus's mesh, short traces, deep
// chains, wide fan-out, attribute-heavy spans, 1,056 services, many
// incidents in a minute), as length-prefixed protobuf and as OTLP JSON
// lines: BenchmarkAnalyzeOneCore/SHAPE/FORMAT. The reference is this
// test binary re-executed (TestMain, refEnv). Metrics: the median of the
// iterations' ratios (reference time / analyze time; ≥ 1 means analyze is
// at least as fast), the same ratio in CPU time (user + system), the
// spans/s of both, analyze's peak RSS. analyze's document is checked once
// (its span count), untimed.
//
// With STORMRADIUS_BIG_INPUT=MiB set, the sub-benchmark "big" writes a
// protobuf file of about that size to the temporary directory, runs
// analyze on it once and reports its peak RSS (the memory bound), then
// deletes it.
func BenchmarkAnalyzeOneCore(b *testing.B) {
	bin := commandBinary(b)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range oneCoreCases() {
		b.Run(tc.name, func(b *testing.B) {
			path, spans := tc.corpusFile(b)
			// Once, untimed: analyze's document counts every span.
			var doc bytes.Buffer
			c := exec.Command(bin, "analyze", path)
			c.Stdout = &doc
			run1(b, c)
			var got struct {
				Sampling struct {
					SpansReceived int `json:"spans_received"`
				}
			}
			if err := json.Unmarshal(doc.Bytes(), &got); err != nil || got.Sampling.SpansReceived != spans {
				b.Fatalf("analyze: %v, %d spans received, want %d", err, got.Sampling.SpansReceived, spans)
			}
			var ratios, cpuRatios []float64
			var ref, ana time.Duration
			var rss int64
			for i := 0; i < b.N; i++ {
				c := exec.Command(self, "-test.run=^$")
				var out bytes.Buffer
				c.Stdout = &out
				c.Env = append(os.Environ(), refEnv+"="+path)
				dr, _, cr := run1(b, c)
				if got, _ := strconv.Atoi(string(bytes.TrimSpace(out.Bytes()))); got != spans {
					b.Fatalf("reference unmarshalled %q spans, want %d", out.String(), spans)
				}
				c = exec.Command(bin, "analyze", path)
				c.Stdout = io.Discard
				da, r, ca := run1(b, c)
				ratios = append(ratios, dr.Seconds()/da.Seconds())
				cpuRatios = append(cpuRatios, cr.Seconds()/ca.Seconds())
				ref += dr
				ana += da
				rss = max(rss, r)
			}
			n := float64(spans) * float64(b.N)
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
			// CPU time (user + system) drifts less than wall time on a
			// loaded machine: the same ratio in CPU time.
			slices.Sort(cpuRatios)
			b.ReportMetric(cpuRatios[len(cpuRatios)/2], "median-cpu-ratio")
			b.ReportMetric(n/ana.Seconds(), "spans/s")
			b.ReportMetric(n/ref.Seconds(), "ref-spans/s")
			b.ReportMetric(float64(rss)/(1<<20), "peak-MiB")
			b.ReportMetric(0, "ns/op")
		})
	}
	if os.Getenv("STORMRADIUS_BIG_INPUT") == "" {
		return
	}
	b.Run("big", func(b *testing.B) {
		mib, err := strconv.Atoi(os.Getenv("STORMRADIUS_BIG_INPUT"))
		if err != nil || mib <= 0 {
			b.Fatalf("STORMRADIUS_BIG_INPUT=%q: want a size in MiB", os.Getenv("STORMRADIUS_BIG_INPUT"))
		}
		dir := b.TempDir()
		df, _ := exec.Command("df", "-h", dir).CombinedOutput()
		b.Logf("disk before writing %d MiB:\n%s", mib, df)
		// ~213 bytes a span, ~153 spans a trace.
		path, spans := writeCorpus(b, dir, oneCoreScenario(mib<<20/(213*153)), sim.Proto)
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		df, _ = exec.Command("df", "-h", dir).CombinedOutput()
		defer os.Remove(path)
		b.Logf("disk with the file:\n%s", df)
		// On one core, and on every core (more decoding goroutines and
		// workers, more memory).
		var peak int64
		for i := 0; i < b.N; i++ {
			for _, procs := range []string{"1", ""} {
				c := exec.Command(bin, "analyze", "--tmp", dir, path)
				c.Stdout = io.Discard
				d, rss, cpu := runProcs(b, c, procs)
				b.Logf("GOMAXPROCS=%q: %d MiB, %d spans: %v (CPU %v), peak RSS %d MiB", procs, st.Size()>>20, spans, d, cpu, rss>>20)
				peak = max(peak, rss)
			}
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkAnalyzeInProcess is BenchmarkAnalyzeOneCore's `analyze` of
// each corpus run in the test process, for profiles:
//
//	go test -run XXX -bench AnalyzeInProcess/short/proto -cpu 1 -cpuprofile cpu.out ./cmd/stormradius/
func BenchmarkAnalyzeInProcess(b *testing.B) {
	for _, tc := range oneCoreCases() {
		b.Run(tc.name, func(b *testing.B) {
			path, spans := tc.corpusFile(b)
			b.ReportAllocs()
			b.ResetTimer()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for i := 0; i < b.N; i++ {
				if code := run(context.Background(), []string{"analyze", path}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
					b.Fatalf("exit %d", code)
				}
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(spans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
			b.ReportMetric(float64(spans)*float64(b.N)/(float64(cpu)/1e9), "cpu-spans/s")
		})
	}
}
