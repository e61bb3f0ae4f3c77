package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/analysis/plan"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/query"
)

// planCommand is a plan command line, parsed and checked.
type planCommand struct {
	req      query.PlanRequest
	files    []string
	decoder  ingest.DecoderConfig
	data     string
	storeURL string
	from, to string
	format   string
}

func runPlan(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	c, ok := parsePlan(args, stderr)
	if !ok {
		return exitUsage
	}
	var p *plan.Plan
	var err error
	if len(c.files) > 0 {
		var in *loaded
		p, in, err = planFiles(ctx, c, stdin, stderr)
		if in != nil {
			defer func() {
				if msg := in.summary(); msg != "" && code == exitOK {
					fmt.Fprintf(stderr, "stormradius plan: %s\n", strings.Replace(msg, "the report covers", "the plan is made from", 1))
					code = exitFail
				}
			}()
		}
	} else {
		p, err = planStore(ctx, c)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "stormradius plan: interrupted")
		return exitFail
	case errors.Is(err, query.ErrBadRequest):
		fmt.Fprintf(stderr, "stormradius plan: %s\n", strings.TrimPrefix(err.Error(), query.ErrBadRequest.Error()+": "))
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "stormradius plan: %v\n", err)
		return exitFail
	}
	if c.format == "json" {
		err = writeJSON(stdout, p)
	} else {
		err = writePlanTable(stdout, p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stormradius plan: write output: %v\n", err)
		return exitFail
	}
	return exitOK
}

func parsePlan(args []string, stderr io.Writer) (c planCommand, ok bool) {
	fs := newFlagSet("plan", stderr)
	data := fs.String("data", "./data", "directory of the embedded store (without trace files)")
	storeURL := fs.String("store", "", "store URL instead of --data: clickhouse://host:9000/db")
	from := fs.String("from", "", "with a store: start of the range: RFC 3339, unix seconds or now-DURATION (default: everything)")
	to := fs.String("to", "", "with a store: end of the range, exclusive (default: everything)")
	var apis listFlag
	fs.Var(&apis, "api", `only this root API, "service operation" (repeatable; default: every one)`)
	fail := fs.String("fail", "", "plan for these services or \"service operation\" nodes failing, comma-separated (default: every node, weighed by its observed owned-failure rate)")
	steps := fs.Int("steps", 0, "at most this many steps (0: every step that helps)")
	budget := fs.Float64("budget", query.DefaultBudget, "the retry budget B of an adopted service, a fraction of its requests from 0 to 1")
	format := fs.String("format", "table", "output format: table or json")
	claimHeader := fs.String("claim-header", "x-error-claim", "header that carries the error claim (trace files)")
	sampling := app.SamplingFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius plan [--format table|json] [--steps N] [--api API]... [--fail S,...] [--budget B] FILE...")
		fmt.Fprintln(stderr, "       stormradius plan [--data DIR | --store URL] [--from T] [--to T] [flags]")
		fmt.Fprintln(stderr, "\nOrders the services to move to error ownership first, from the call graphs learned from trace files")
		fmt.Fprintln(stderr, "(any format analyze reads) or from the store (docs/PLANNER.md).")
		fs.PrintDefaults()
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		return c, false
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius plan: %v\n", err)
		return c, false
	}
	usageErr := func(msg string, a ...any) (planCommand, bool) {
		fmt.Fprintf(stderr, "stormradius plan: "+msg+"\n", a...)
		return c, false
	}
	if *format != "json" && *format != "table" {
		return usageErr("unknown --format %q (want table or json)", *format)
	}
	sc, err := sampling()
	if err != nil {
		return usageErr("%v", err)
	}
	if len(files) > 0 && (app.Given(fs, "data") || app.Given(fs, "store") || *from != "" || *to != "") {
		return usageErr("give trace files, or --data/--store (with --from/--to), not both")
	}
	c = planCommand{req: query.PlanRequest{APIs: apis, Fail: splitList(*fail), Steps: *steps, Budget: budget}, files: files,
		decoder: ingest.DecoderConfig{ClaimHeader: *claimHeader, SamplingConfig: sc},
		data:    *data, storeURL: *storeURL, from: *from, to: *to, format: *format}
	if err := c.req.Check(); err != nil {
		return usageErr("%s", strings.TrimPrefix(err.Error(), query.ErrBadRequest.Error()+": "))
	}
	return c, true
}

// planFiles plans from trace files: the call graphs of all their windows
// and the owned failures of their document.
func planFiles(ctx context.Context, c planCommand, stdin io.Reader, stderr io.Writer) (*plan.Plan, *loaded, error) {
	var in *loaded
	doc, windows, _, err := offline.Analyze(ctx, func(emit func([]graph.Span) error) error {
		in = readInputs(ctx, c.files, c.decoder, stdin, stderr, emit)
		return nil
	}, offline.Config{})
	if err != nil {
		return nil, in, err
	}
	if msg := in.empty(); msg != "" {
		return nil, nil, errors.New(msg)
	}
	p, err := query.Plan(c.req, windows.Merged(), doc, analysis.Config{})
	return p, in, err
}

// planStore plans from the stored traces of c's range.
func planStore(ctx context.Context, c planCommand) (*plan.Plan, error) {
	q, err := parseRange(c.from, c.to)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", query.ErrBadRequest, err)
	}
	st, err := storeurl.Open(ctx, storeurl.Options{Data: c.data, URL: c.storeURL, Existing: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return query.New(st).PlanOver(ctx, c.req, q)
}

// writePlanTable writes the plan as tables: the APIs before any step,
// then each step with the APIs it changes.
func writePlanTable(w io.Writer, p *plan.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	last := p.Cost
	if n := len(p.Steps); n > 0 {
		last = p.Steps[n-1].Cost
	}
	fmt.Fprintf(tw, "adoption plan: %d steps over %d root APIs, %d services (failing nodes weighed: %s; B=%s); expected storm cost %s -> %s\n",
		len(p.Steps), len(p.APIs), p.Services, p.Weights, fig(p.Budget), fig(p.Cost), fig(last))
	if len(p.Speaking) > 0 {
		fmt.Fprintf(tw, "already speaking the claim protocol: %s\n", analysis.Printable(strings.Join(p.Speaking, ", ")))
	}
	fmt.Fprintln(tw, "\nAPI\tMAX RADIUS\tMEAN RADIUS\tLOAD AT FAILING NODE\tSPURIOUS")
	for _, a := range p.APIs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", analysis.Printable(a.API), a.MaxRadius, fig(a.MeanRadius), fig(a.Load), fig(a.Spurious))
	}
	for _, s := range p.Steps {
		together := ""
		if s.Together {
			together = " (together: neither helps alone)"
		}
		fmt.Fprintf(tw, "\nstep %d: adopt %s%s; cost %s\n  why: %s\n", s.Step, analysis.Printable(strings.Join(s.Services, " + ")), together,
			fig(s.Cost), analysis.Printable(s.Why))
		fmt.Fprintln(tw, "  API\tMAX RADIUS\tMEAN RADIUS\tLOAD AT FAILING NODE\tSPURIOUS")
		for _, a := range s.APIs {
			fmt.Fprintf(tw, "  %s\t%d -> %d\t%s -> %s\t%s -> %s\t%s -> %s\n", analysis.Printable(a.API), a.Before.MaxRadius, a.After.MaxRadius,
				fig(a.Before.MeanRadius), fig(a.After.MeanRadius), fig(a.Before.Load), fig(a.After.Load),
				fig(a.Before.Spurious), fig(a.After.Spurious))
		}
	}
	return tw.Flush()
}

// fig formats a plan's figure for a table: three decimals at most.
func fig(x float64) string { return formatNumber(math.Round(x*1000) / 1000) }
