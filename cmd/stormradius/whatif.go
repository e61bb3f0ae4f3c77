package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/query"
)

func runWhatIf(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	q, ok := parseWhatIf(args, stderr)
	if !ok {
		return exitUsage
	}
	var state *analysis.State
	if len(q.traces) > 0 { // a call graph, not a chain
		var in *loaded
		if state, in, ok = learnCallGraph(ctx, q, stdin, stderr); !ok {
			return exitFail
		}
		// A file that broke part-way still teaches the call graph what it
		// held; the answer is given, with a warning and exit status 1.
		defer func() {
			if msg := in.summary(); msg != "" && code == exitOK {
				fmt.Fprintf(stderr, "stormradius whatif: %s\n", strings.Replace(msg, "the report covers", "the call graph is learned from", 1))
				code = exitFail
			}
		}()
	}
	out, err := query.WhatIf(q.req, state, analysis.Config{})
	switch {
	case errors.Is(err, query.ErrBadRequest):
		fmt.Fprintf(stderr, "stormradius whatif: %s\n", strings.TrimPrefix(err.Error(), query.ErrBadRequest.Error()+": "))
		return exitUsage
	case err != nil:
		// An unknown API, or the answer not fitting in a float64
		// (radius.ErrOverflow): both are about the input.
		fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
		return exitFail
	}
	return writeWhatIf(stdout, stderr, q, out)
}

// whatIfQuestion is a whatif command line, parsed and checked.
type whatIfQuestion struct {
	// req is the question: a chain (Chain set), or a root API whose call
	// graph is learned from traces.
	req     query.WhatIfRequest
	traces  []string             // trace files, with no --chain
	decoder ingest.DecoderConfig // how they are decoded
	format  string               // json or table
}

// parseWhatIf parses and checks whatif's flags; when one is wrong it says
// so on stderr and ok is false.
func parseWhatIf(args []string, stderr io.Writer) (q whatIfQuestion, ok bool) {
	fs := newFlagSet("whatif", stderr)
	chain := fs.String("chain", "", "a call chain, root first: A,B,C")
	fail := fs.String("fail", "", "the failing node(s) (chain) or service(s) (call graph), comma-separated")
	retries := fs.Float64("retries", 1, "retries per hop R (call graph: overrides the retries observed per edge)")
	budget := fs.Float64("budget", 0.1, "retry budget B, a fraction of requests from 0 to 1 (budget and ownership policies)")
	policy := fs.String("policy", "naive", "retry policy: naive, budget or ownership")
	format := fs.String("format", "json", "output format: json or table")
	api := fs.String("api", "", `root API of the call graph to use with --traces, as "service operation"`)
	var traces listFlag
	fs.Var(&traces, "traces", "OTLP trace file to learn the call graph from, in any format analyze reads (repeatable; more files may follow the flags)")
	errorRate := fs.Float64("error-rate", -1, "also print the error rate after retries for this independent error rate (0..1)")
	claimHeader := fs.String("claim-header", "x-error-claim", "header that carries the error claim (with --traces)")
	sampling := app.SamplingFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius whatif --chain A,B,C --fail C [--retries 1] [--budget 0.1] [--policy naive] [--format json]")
		fmt.Fprintln(stderr, `       stormradius whatif --traces FILE... --api "svc op" --fail SERVICE [--retries R] [--policy ...]`)
		fs.PrintDefaults()
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		return q, false
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
		return q, false
	}
	traces = append(traces, files...)
	usageErr := func(msg string, a ...any) (whatIfQuestion, bool) {
		fmt.Fprintf(stderr, "stormradius whatif: "+msg+"\n", a...)
		return q, false
	}
	if *format != "json" && *format != "table" {
		return usageErr("unknown --format %q (want json or table)", *format)
	}
	// Flags are checked here, naming them; the question is checked again
	// by query.WhatIf, which the REST API shares.
	if err := checkWhatIfNumbers(fs, *retries, *budget, *errorRate); err != nil {
		return usageErr("%v", err)
	}
	sc, err := sampling()
	if err != nil {
		return usageErr("%v", err)
	}
	req := query.WhatIfRequest{Fail: splitList(*fail), Policy: *policy, Budget: budget}
	if len(req.Fail) == 0 {
		return usageErr("--fail is required")
	}
	if (*chain == "") == (len(traces) == 0) {
		return usageErr("give either --chain or --traces (with --api)")
	}
	if app.Given(fs, "error-rate") {
		req.ErrorRate = errorRate
	}
	if *chain != "" {
		req.Chain, req.Retries = splitList(*chain), retries
	} else {
		if *api == "" {
			return usageErr("--traces needs --api \"service operation\"")
		}
		req.API = *api
		if app.Given(fs, "retries") {
			req.Retries = retries
		}
	}
	return whatIfQuestion{req: req, traces: traces, decoder: ingest.DecoderConfig{ClaimHeader: *claimHeader, SamplingConfig: sc}, format: *format}, true
}

// learnCallGraph reads q's trace files and returns the state of all their
// windows, which holds the call graphs, and what was read; when nothing
// could be learned it says why on stderr and ok is false.
func learnCallGraph(ctx context.Context, q whatIfQuestion, stdin io.Reader, stderr io.Writer) (state *analysis.State, in *loaded, ok bool) {
	_, windows, _, err := offline.Analyze(ctx, func(emit func([]graph.Span) error) error {
		in = readInputs(ctx, q.traces, q.decoder, stdin, stderr, emit)
		return nil
	}, offline.Config{})
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "stormradius whatif: interrupted")
		return nil, nil, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
		return nil, nil, false
	}
	if msg := in.empty(); msg != "" {
		fmt.Fprintf(stderr, "stormradius whatif: %s\n", msg)
		return nil, nil, false
	}
	return windows.Merged(), in, true
}

// writeWhatIf writes the answer in q's format and returns the exit code.
func writeWhatIf(stdout, stderr io.Writer, q whatIfQuestion, out *query.WhatIfAnswer) int {
	if q.format == "json" {
		if err := writeJSON(stdout, out); err != nil {
			fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	if err := writeWhatIfTable(stdout, q, out); err != nil {
		return exitFail
	}
	return exitOK
}

// writeWhatIfTable writes the answer as a table: what the JSON document
// holds, requests per node of the chain, or per service and then per node
// of a call graph.
func writeWhatIfTable(w io.Writer, q whatIfQuestion, out *query.WhatIfAnswer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	r := "R observed per edge"
	if out.Retries != nil {
		r = "R=" + formatNumber(*out.Retries)
	}
	fmt.Fprintf(tw, "policy %s, %s, B=%s, failing %s\n", out.Policy, r, formatNumber(out.Budget), analysis.Printable(strings.Join(out.Failing, ",")))
	if out.Nodes == nil {
		fmt.Fprintln(tw, "NODE\tREQUESTS PER ROOT REQUEST")
		for _, name := range out.Order {
			fmt.Fprintf(tw, "%s\t%s\n", analysis.Printable(name), formatNumber(out.Requests[name]))
		}
	} else {
		fmt.Fprintln(tw, "SERVICE\tREQUESTS PER ROOT REQUEST")
		for _, svc := range sortedKeys(out.Requests) {
			fmt.Fprintf(tw, "%s\t%s\n", analysis.Printable(svc), formatNumber(out.Requests[svc]))
		}
		fmt.Fprintln(tw, "\nNODE\tREQUESTS PER ROOT REQUEST")
		for _, name := range sortedKeys(out.Nodes) {
			fmt.Fprintf(tw, "%s\t%s\n", analysis.Printable(name), formatNumber(out.Nodes[name]))
		}
	}
	if out.ErrorRateAfterRetries != nil {
		fmt.Fprintf(tw, "error rate %s%% -> %s%% after retries (budget %s)\n",
			formatNumber(100**q.req.ErrorRate), formatNumber(100**out.ErrorRateAfterRetries), formatNumber(out.Budget))
	}
	return tw.Flush()
}

// checkWhatIfNumbers checks the numeric flags of whatif, naming the one
// that is wrong. R may be any finite number ≥ 0 (a fraction is an expected
// number of retries); a result too large for a float64 is reported by
// Requests. The budget and the error rate are fractions. A flag set to its
// default is valid, and --error-rate counts only when given.
func checkWhatIfNumbers(fs *flag.FlagSet, retries, budget, errorRate float64) error {
	if math.IsNaN(retries) || math.IsInf(retries, 0) || retries < 0 {
		return fmt.Errorf("--retries %v: want a finite number of retries per hop, 0 or more", retries)
	}
	if !(budget >= 0 && budget <= 1) { // NaN fails both
		return fmt.Errorf("--budget %v: want a fraction of requests between 0 and 1 (0.1 is 10%%)", budget)
	}
	if app.Given(fs, "error-rate") && !(errorRate >= 0 && errorRate <= 1) {
		return fmt.Errorf("--error-rate %v: want a fraction between 0 and 1 (0.05 is 5%%)", errorRate)
	}
	return nil
}

// formatNumber formats a figure for a table: whole numbers without
// decimals, others with at most 9 decimals (Requests rounds to 9 places;
// trailing zeros dropped), never in exponent form below 1e15. From 1e15 up
// a float64 no longer holds every integer and the digits would be noise,
// so 9 significant digits with an exponent are shown.
func formatNumber(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= 1e15 {
		return strconv.FormatFloat(x, 'g', 9, 64)
	}
	s := strconv.FormatFloat(x, 'f', 9, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
