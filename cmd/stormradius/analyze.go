package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/query/timerange"
)

func runAnalyze(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("analyze", stderr)
	format := fs.String("format", "json", "output format: json (docs/SPEC.md §5.2) or table")
	claimHeader := fs.String("claim-header", "x-error-claim", "header (and gRPC metadata key) that carries the error claim")
	window := fs.Duration("window", analysis.DefaultWindow, "analysis window (docs/SPEC.md §4.3): multi-trace figures are taken over the epoch-aligned window of each trace")
	from := fs.String("from", "", "count only traces whose start minute is at or after this (RFC 3339, unix seconds or now-DURATION), as `report` does")
	to := fs.String("to", "", "count only traces whose start minute is before this")
	tmp := fs.String("tmp", "", "directory of the spill files (default: the system's temporary directory)")
	memory := fs.Int("memory-mib", defaultMemoryMiB, "memory (MiB) analyze aims to stay within, whatever the input's size: spans past what it leaves go to spill files (an input that fits never touches the disk)")
	source := fs.String("source", "", "read spans from the OpenTelemetry Collector's clickhouseexporter table instead of files: "+
		"clickhouse://host:9000/DB?table=otel_traces (the store's TLS and password_file parameters; the password also from "+chsource.PasswordEnv+"); needs --from")
	slack := fs.Duration("source-slack", time.Minute, "with --source: spans of the --window windows --from and --to touch are read (a trace's figures depend on its whole window), and this much before and after, so that traces crossing their ends are whole (traces longer than it are cut)")
	limits := app.LimitFlags(fs)
	sampling := app.SamplingFlags(fs)
	fs.Usage = func() { analyzeUsage(fs, stderr) }
	files, err := parseArgs(fs, args)
	if err != nil {
		return exitUsage
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius analyze: %v\n", err)
		return exitUsage
	}
	if *format != "json" && *format != "table" {
		fmt.Fprintf(stderr, "stormradius analyze: unknown --format %q (want json or table)\n", *format)
		return exitUsage
	}
	if msg := inputsWrong(*source, *from, files); msg != "" {
		fmt.Fprintln(stderr, "stormradius analyze: "+msg)
		return exitUsage
	} else if *source == "" && len(files) == 0 {
		fs.Usage()
		return exitUsage
	}
	if *window <= 0 {
		fmt.Fprintf(stderr, "stormradius analyze: --window %v must be positive\n", *window)
		return exitUsage
	}
	rng, err := parseRange(*from, *to)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius analyze: %v\n", err)
		return exitUsage
	}
	lim, err := limits()
	if err != nil {
		fmt.Fprintf(stderr, "stormradius analyze: %v\n", err)
		return exitUsage
	}
	if *memory < minMemoryMiB {
		fmt.Fprintf(stderr, "stormradius analyze: --memory-mib %d: want at least %d\n", *memory, minMemoryMiB)
		return exitUsage
	}
	sc, err := sampling()
	if err != nil {
		fmt.Fprintf(stderr, "stormradius analyze: %v\n", err)
		return exitUsage
	}
	defer limitMemory(*memory)()
	var in *loaded
	dcfg := ingest.DecoderConfig{ClaimHeader: *claimHeader, SamplingConfig: sc}
	doc, _, stats, err := offline.Analyze(ctx, func(emit func([]graph.Span) error) (err error) {
		if *source != "" {
			in, err = readSource(ctx, *source, *window, *slack, rng, dcfg, slog.New(slog.NewTextHandler(stderr, nil)), emit)
			return err
		}
		in = readInputs(ctx, files, dcfg, stdin, stderr, emit)
		return nil
	}, offline.Config{Analysis: analysis.Config{Window: *window, Limits: lim}, Range: rng, TempDir: *tmp,
		MemoryBudget: spanBudget(*memory)})
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "stormradius analyze: interrupted")
		return exitFail
	}
	if err != nil {
		fmt.Fprintf(stderr, "stormradius analyze: %v\n", err)
		return exitFail
	}
	if msg := in.empty(); msg != "" {
		fmt.Fprintf(stderr, "stormradius analyze: %s\n", msg)
		return exitFail
	}
	if err := writeDocument(stdout, doc, *format); err != nil {
		fmt.Fprintf(stderr, "stormradius analyze: write output: %v\n", err)
		return exitFail
	}
	if msg := capped(stats, lim); msg != "" {
		fmt.Fprintf(stderr, "stormradius analyze: %s\n", msg)
	}
	if msg := in.summary(); msg != "" {
		fmt.Fprintf(stderr, "stormradius analyze: %s\n", msg)
		return exitFail
	}
	return exitOK
}

// The memory analyze aims to stay within (--memory-mib): the default, and
// the least that leaves room for the runtime, the decoder and the window
// states besides the spans.
const (
	defaultMemoryMiB = 256
	minMemoryMiB     = 64
)

// spanBudget is what of mib MiB the spans held in memory may take
// (offline.Config.MemoryBudget): three eighths (96 MiB of the default
// 256). The rest is the collector's headroom over the live heap, the
// decoder's buffers, the window states and the program itself.
func spanBudget(mib int) int64 { return int64(mib) << 20 * 3 / 8 }

// limitMemory sets the Go runtime's soft memory limit to three quarters
// of mib MiB (unless GOMEMLIMIT sets one), so that the collector works
// harder rather than let the heap grow past it, and, the limit bounding
// the heap, lets the heap grow to 5 × what is live between collections
// (GOGC=400, unless GOGC is set): an input whose spans fit then costs a
// few collections, not a dozen. It returns what restores both.
func limitMemory(mib int) func() {
	var restore []func()
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		old := debug.SetMemoryLimit(int64(mib) << 20 * 3 / 4)
		restore = append(restore, func() { debug.SetMemoryLimit(old) })
		if _, ok := os.LookupEnv("GOGC"); !ok {
			old := debug.SetGCPercent(400)
			restore = append(restore, func() { debug.SetGCPercent(old) })
		}
	}
	return func() {
		for _, f := range restore {
			f()
		}
	}
}

// capped says what the caps on names changed (a note, not a failure: the
// report counts everything), "" when nothing.
func capped(st offline.Stats, lim analysis.Limits) string {
	var parts []string
	if st.Truncated > 0 {
		parts = append(parts, fmt.Sprintf("%s with a name longer than %d bytes, cut", plural(st.Truncated, "span", "spans"), graph.MaxNameLen))
	}
	f := st.Folded
	for _, k := range []struct {
		n          int64
		what, flag string
		max        int
		into       string
	}{
		{f.APIs, "root API", "max-apis", lim.APIs, graph.OtherAPI},
		{f.Services, "service", "max-services", lim.Services, graph.OtherService},
		{f.Operations, "operation", "max-operations", lim.Operations, graph.OtherOperation},
		{f.Versions, "service version", "max-versions", lim.Versions, graph.OtherVersion},
	} {
		if k.n > 0 {
			parts = append(parts, fmt.Sprintf("%s with a %s past its window's --%s %d, counted under %s",
				plural(int(k.n), "trace", "traces"), k.what, k.flag, k.max, k.into))
		}
	}
	return strings.Join(parts, "; ")
}

func analyzeUsage(fs *flag.FlagSet, stderr io.Writer) {
	fmt.Fprintln(stderr, "usage: stormradius analyze [--format json|table] FILE... (flags may also follow the files)")
	fmt.Fprintln(stderr, "       stormradius analyze --source clickhouse://HOST:9000/DB?table=otel_traces --from T [--to T]")
	fmt.Fprintln(stderr, "\nFILE is OTLP trace data: JSON lines of ExportTraceServiceRequest or binary protobuf,")
	fmt.Fprintln(stderr, "as the collector's file exporter writes them (format json or proto, compression")
	fmt.Fprintln(stderr, "none or zstd), optionally gzip- or zstd-compressed as a whole; detected from the")
	fmt.Fprintln(stderr, "content, not the name. '-' reads stdin. --source reads the table the collector's")
	fmt.Fprintln(stderr, "clickhouseexporter writes instead (docs/operations.md, \"Already on ClickHouse?\").")
	fmt.Fprintln(stderr, "Bad lines are reported and skipped; the exit status is then 1. --from and --to take")
	fmt.Fprintln(stderr, "times within "+timerange.RangeText+".")
	fs.PrintDefaults()
}

// inputsWrong says what is wrong with the inputs given, "" when nothing
// is (or none is given: the usage says it).
func inputsWrong(source, from string, files []string) string {
	switch {
	case source != "" && len(files) > 0:
		return "--source reads a table: give no files with it"
	case source != "" && from == "":
		return "--source needs --from (and reads up to --to, default now): a table holds weeks of spans"
	}
	return ""
}
