package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/query/timerange"
)

// runGate asks the gate — a running server's (--url) or a store's
// directly (--data, --store) — and exits 0 on pass, 1 on fail, 2 when it
// could not decide: the decision is undecided (too little evidence), or
// there is none (a bad flag, an unknown API, an unreachable server).
func runGate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("gate", stderr)
	srvURL := fs.String("url", "", "stormradius server to ask (http://host:8080); or --data / --store")
	token := fs.String("token", "", "bearer token for --url")
	data := fs.String("data", "", "directory of an embedded store to read instead of --url")
	storeURL := fs.String("store", "", "store URL to read instead of --url: clickhouse://host:9000/db")
	api := fs.String("api", "", `root API to gate ("service operation")`)
	maxRadius := fs.String("max-radius", "", "fail when the candidate's max radius exceeds N")
	maxInc := fs.String("max-radius-increase", "", "fail when the candidate's max radius exceeds the baseline's by more than N")
	maxAmp := fs.String("max-amplification", "", "fail when the candidate's max amplification exceeds X")
	minTraces := fs.String("min-traces", "", fmt.Sprintf("effective sample size each side needs to be judged; less is undecided (default %d)", gate.DefaultMinTraces))
	from := fs.String("from", "", "start of the candidate's window (default: an hour ago); with versions, where they are looked for")
	to := fs.String("to", "", "end of that window (default: now)")
	baseline := fs.String("baseline", "", "baseline window FROM/TO (e.g. now-2h/now-1h)")
	candidate := fs.String("candidate", "", "candidate window FROM/TO (default --from/--to)")
	service := fs.String("service", "", "compare two service.versions of this service")
	baseVer := fs.String("baseline-version", "", "baseline (stable) version of --service")
	candVer := fs.String("candidate-version", "", "candidate (canary) version of --service")
	format := fs.String("format", "text", "output: text or json (the decision)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for --url")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius gate (--url URL [--token T] | --data DIR | --store URL) --api API")
		fmt.Fprintln(stderr, "         [--max-radius N] [--max-radius-increase N] [--max-amplification X] [--min-traces N]")
		fmt.Fprintln(stderr, "         [--from T] [--to T] [--baseline FROM/TO] [--candidate FROM/TO]")
		fmt.Fprintln(stderr, "         [--service S --baseline-version V --candidate-version W]")
		fmt.Fprintln(stderr, "\nDecides whether a rollout may proceed on its retry storm radius: exit 0 pass, 1 fail,")
		fmt.Fprintln(stderr, "2 undecided (too little evidence: a side below --min-traces) or no decision (an error).")
		fmt.Fprintln(stderr, "Times are RFC 3339, unix seconds or now±DURATION, within "+timerange.RangeText+".")
		fs.PrintDefaults()
	}
	if rest, err := parseArgs(fs, args); err != nil {
		return exitUsage
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "stormradius gate: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius gate: %v\n", err)
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "stormradius gate: "+format+"\n", a...)
		return exitUsage
	}
	if *format != "text" && *format != "json" {
		return fail("unknown --format %q (want text or json)", *format)
	}
	sources := 0
	for _, s := range []string{*srvURL, *data, *storeURL} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return fail("give one of --url, --data or --store")
	}
	// The same parameters the REST endpoint reads, parsed by the same code.
	v := url.Values{}
	for k, val := range map[string]string{"api": *api, "max_radius": *maxRadius, "max_radius_increase": *maxInc,
		"max_amplification": *maxAmp, "min_traces": *minTraces, "from": *from, "to": *to, "baseline": *baseline,
		"candidate": *candidate, "service": *service, "baseline_version": *baseVer, "candidate_version": *candVer} {
		if val != "" {
			v.Set(k, val)
		}
	}
	req, err := query.ParseGate(v, time.Now())
	if err != nil {
		return fail("%v", flagNames(err))
	}
	var d *gate.Decision
	if *srvURL != "" {
		d, err = askServer(ctx, *srvURL, *token, v, *timeout)
	} else {
		d, err = askStore(ctx, *data, *storeURL, req)
	}
	if err != nil {
		return fail("%v", err)
	}
	if *format == "json" {
		writeJSON(stdout, d) // the exit code is the answer; a closed stdout changes nothing
	} else {
		printDecision(stdout, d)
	}
	switch d.Decision {
	case gate.Pass:
		return exitOK
	case gate.Fail:
		return exitFail
	}
	return exitUsage
}

// flagNames turns the REST parameter names of an error into the flags'.
func flagNames(err error) string {
	s := err.Error()
	for _, p := range []string{"max_radius_increase", "max_radius", "max_amplification", "min_traces", "baseline_version", "candidate_version"} {
		s = strings.ReplaceAll(s, p, "--"+strings.ReplaceAll(p, "_", "-"))
	}
	return s
}

func askStore(ctx context.Context, data, storeURL string, req query.GateRequest) (*gate.Decision, error) {
	st, err := storeurl.Open(ctx, storeurl.Options{Data: data, URL: storeURL, Existing: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return query.New(st).Gate(ctx, req)
}

func askServer(ctx context.Context, base, token string, v url.Values, timeout time.Duration) (*gate.Decision, error) {
	u, err := url.Parse(strings.TrimRight(base, "/") + "/api/v1/gate")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http(s)://host:port", base)
	}
	u.RawQuery = v.Encode()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPreconditionFailed {
		var d gate.Decision
		if err := json.Unmarshal(body, &d); err != nil {
			return nil, fmt.Errorf("%s answered %s with an unreadable decision: %v", u.Host, resp.Status, err)
		}
		if d.Decision == "" && d.Pass {
			d.Decision = gate.Pass // a server from before undecided: it said pass or not
		} else if d.Decision == "" {
			d.Decision = gate.Fail
		}
		// Asked without undecided or always_200, the server answers 200 to
		// a pass only.
		if d.Pass != (d.Decision == gate.Pass) || (d.Decision == gate.Pass) != (resp.StatusCode == http.StatusOK) ||
			!slices.Contains([]string{gate.Pass, gate.Fail, gate.Undecided}, d.Decision) {
			return nil, fmt.Errorf("%s answered %s with decision %q, pass=%v", u.Host, resp.Status, d.Decision, d.Pass)
		}
		return &d, nil
	}
	var e struct{ Error string }
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return nil, errors.New(resp.Status + ": " + e.Error)
	}
	return nil, fmt.Errorf("%s answered %s", u.Host, resp.Status)
}

func printDecision(w io.Writer, d *gate.Decision) {
	fmt.Fprintf(w, "%s  %s\n", strings.ToUpper(d.Decision), d.API)
	side := func(f *gate.Figures) {
		evidence := ""
		if f.TracesReceived != f.Traces || f.EffectiveSampleSize != float64(f.TracesReceived) {
			evidence = fmt.Sprintf(" (%d received, effective sample size %.1f)", f.TracesReceived, f.EffectiveSampleSize)
		}
		fmt.Fprintf(w, "  %-40s traces %d%s, failed %d, max radius %d, mean radius %.2f, max amplification %.3g\n",
			f.Label, f.Traces, evidence, f.FailedTraces, f.MaxRadius, f.MeanRadius, f.MaxAmplification)
		if c := f.Claims; c != nil {
			fmt.Fprintf(w, "  %-40s failed hops %d (%d answered a claim), unclaimed answers %d (%d retried), suppressed retries %d\n",
				"", c.FailedHops, c.ClaimedHops, c.UnclaimedAnswers, c.RetriedUnclaimed, c.SuppressedRetries)
		}
	}
	side(&d.Candidate)
	if d.Baseline != nil {
		side(d.Baseline)
	}
	for _, r := range d.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
}
