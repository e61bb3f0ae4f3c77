package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/flagenv"
	"github.com/stormradius/stormradius/radius"
)

// whatIfOutput is the JSON form of a what-if answer (SPEC §5.2).
type whatIfOutput struct {
	Policy string `json:"policy"`
	// Requests per node name (chain) or per service (call graph), per
	// request at the root.
	Requests map[string]float64 `json:"requests"`
	// Nodes, for a call graph: per "service operation".
	Nodes   map[string]float64 `json:"nodes,omitempty"`
	Failing []string           `json:"failing"`
	Retries *float64           `json:"retries,omitempty"`
	Budget  float64            `json:"budget"`
	API     string             `json:"api,omitempty"`
	// ErrorRateAfterRetries answers --error-rate: the error rate a caller
	// sees after retries within the budget, errors being independent.
	ErrorRateAfterRetries *float64 `json:"error_rate_after_retries,omitempty"`
}

func runWhatIf(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("whatif", stderr)
	chain := fs.String("chain", "", "a call chain, root first: A,B,C")
	fail := fs.String("fail", "", "the failing node(s) (chain) or service(s) (call graph), comma-separated")
	retries := fs.Float64("retries", 1, "retries per hop R (call graph: overrides the retries observed per edge)")
	budget := fs.Float64("budget", 0.1, "retry budget B, a fraction of requests (budget and ownership policies)")
	policy := fs.String("policy", "naive", "retry policy: naive, budget or ownership")
	format := fs.String("format", "json", "output format: json or table")
	api := fs.String("api", "", `root API of the call graph to use with --traces, as "service operation"`)
	var traces listFlag
	fs.Var(&traces, "traces", "OTLP trace file to learn the call graph from (repeatable; more files may follow the flags)")
	errorRate := fs.Float64("error-rate", -1, "also print the error rate after retries for this independent error rate (0..1)")
	claimHeader := fs.String("claim-header", "x-error-claim", "header that carries the error claim (with --traces)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius whatif --chain A,B,C --fail C [--retries 1] [--budget 0.1] [--policy naive] [--format json]")
		fmt.Fprintln(stderr, `       stormradius whatif --traces FILE... --api "svc op" --fail SERVICE [--retries R] [--policy ...]`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if err := flagenv.Apply(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
		return exitUsage
	}
	traces = append(traces, fs.Args()...)
	usageErr := func(msg string, a ...any) int {
		fmt.Fprintf(stderr, "stormradius whatif: "+msg+"\n", a...)
		return exitUsage
	}
	pol, err := radius.ParsePolicy(*policy)
	if err != nil {
		return usageErr("%v", err)
	}
	if *format != "json" && *format != "table" {
		return usageErr("unknown --format %q (want json or table)", *format)
	}
	if *retries < 0 || *budget < 0 {
		return usageErr("--retries and --budget must not be negative")
	}
	failing := splitList(*fail)
	if len(failing) == 0 {
		return usageErr("--fail is required")
	}
	if (*chain == "") == (len(traces) == 0) {
		return usageErr("give either --chain or --traces (with --api)")
	}
	out := whatIfOutput{Policy: pol.String(), Failing: failing, Budget: *budget, Requests: map[string]float64{}}
	scenario := radius.Scenario{Retries: *retries, Budget: *budget, Policy: pol}
	var model *radius.Model
	var nodes []graph.Node
	if *chain != "" {
		names := splitList(*chain)
		model = radius.ChainModel(names)
		scenario.Failing = make([]bool, len(names))
		for _, f := range failing {
			i := indexOf(names, f)
			if i < 0 {
				return usageErr("--fail %q is not in --chain %q", f, *chain)
			}
			scenario.Failing[i] = true
		}
		out.Retries = retries
	} else {
		if *api == "" {
			return usageErr("--traces needs --api \"service operation\"")
		}
		in := readInputs(ctx, traces, *claimHeader, stdin, stderr)
		if in.failed == len(traces) {
			fmt.Fprintln(stderr, "stormradius whatif: no trace file could be read")
			return exitFail
		}
		_, state := analysis.Batch(in.traces.Group(), analysis.Config{}, 0)
		model, nodes, err = state.WhatIfModel(*api, analysis.Config{})
		if err != nil {
			fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
			return exitFail
		}
		if flagenv.Given(fs, "retries") {
			for i := range model.Edges {
				model.Edges[i].Retries = -1
			}
			out.Retries = retries
		}
		scenario.Failing = make([]bool, len(nodes))
		for _, f := range failing {
			found := false
			for i, n := range nodes {
				if n.Service == f || n.String() == f {
					scenario.Failing[i], found = true, true
				}
			}
			if !found {
				return usageErr("--fail %q is not a service in the call graph of %q", f, *api)
			}
		}
		out.API = *api
		out.Nodes = map[string]float64{}
	}
	req, err := model.Requests(scenario)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
		return exitFail
	}
	for i, name := range model.Nodes {
		if nodes == nil {
			out.Requests[name] = req[i]
			continue
		}
		out.Nodes[name] = req[i]
		out.Requests[nodes[i].Service] += req[i]
	}
	if *errorRate >= 0 {
		if *errorRate > 1 {
			return usageErr("--error-rate must be between 0 and 1")
		}
		e := radius.ErrorRateAfterRetries(*errorRate, *budget)
		out.ErrorRateAfterRetries = &e
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "stormradius whatif: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	r := fmt.Sprintf("R=%g", *retries)
	if out.Retries == nil {
		r = "R observed per edge"
	}
	fmt.Fprintf(tw, "policy %s, %s, B=%g, failing %s\n", out.Policy, r, *budget, strings.Join(failing, ","))
	fmt.Fprintln(tw, "NODE\tREQUESTS PER ROOT REQUEST")
	for i, name := range model.Nodes {
		fmt.Fprintf(tw, "%s\t%g\n", name, req[i])
	}
	if out.ErrorRateAfterRetries != nil {
		fmt.Fprintf(tw, "error rate %.6g%% -> %.6g%% after retries (budget %g)\n", 100**errorRate, 100**out.ErrorRateAfterRetries, *budget)
	}
	if err := tw.Flush(); err != nil {
		return exitFail
	}
	return exitOK
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

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}
