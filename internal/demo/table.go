package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/gate"
)

// JSON is the demo's --format json output: {"before": REPORT, "after":
// REPORT} with each REPORT the SPEC §5.2 document of a phase's traces read
// from the store; "demo" adds what the demo did and the gate's decisions.
type JSON struct {
	Before *analysis.Document `json:"before"`
	After  *analysis.Document `json:"after"`
	Demo   JSONDemo           `json:"demo"`
}

// JSONDemo describes the run.
type JSONDemo struct {
	FailingService string         `json:"failing_service"`
	DeepAPI        string         `json:"deep_api"`
	Phases         []JSONPhase    `json:"phases"`
	Gate           *gate.Decision `json:"gate"`
	GateBack       *gate.Decision `json:"gate_reversed"`
}

// JSONPhase is one phase.
type JSONPhase struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	From    string `json:"from"`
	To      string `json:"to"`
	Sent    int64  `json:"requests_sent"`
	Failed  int64  `json:"requests_failed"`
	// FailingLoad: per root API, requests at the failing service per root
	// request.
	FailingLoad map[string]float64 `json:"failing_service_requests_per_request"`
}

// JSONOf is r as --format json prints it.
func JSONOf(r *Result) JSON {
	phase := func(p Phase) JSONPhase {
		return JSONPhase{Name: p.Policy.Name, Version: p.Policy.Version, From: p.From.UTC().Format("2006-01-02T15:04:05Z"),
			To: p.To.UTC().Format("2006-01-02T15:04:05Z"), Sent: p.Sent, Failed: p.Failed, FailingLoad: p.Load}
	}
	return JSON{Before: r.Before.Report, After: r.After.Report, Demo: JSONDemo{FailingService: FailingService + " " + FailingOperation,
		DeepAPI: DeepAPI, Phases: []JSONPhase{phase(r.Before), phase(r.After)}, Gate: r.Gate, GateBack: r.GateBack}}
}

// WriteJSON prints r as JSON.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(JSONOf(r))
}

// WriteTable prints, per root API, the figures before and after.
func WriteTable(w io.Writer, r *Result, errorRate float64) error {
	fmt.Fprintf(w, "\n%s %s degraded (%.0f%% of requests fail every time, %.0f%% of the rest now and then), run twice;\nfigures read back from the store\n\n",
		FailingService, FailingOperation, 100*errorRate, 100*TransientRate)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tbefore\tafter\t\n")
	fmt.Fprintf(tw, "\t%s retries\terror %s\t\n", r.Before.Policy.Name, r.After.Policy.Name)
	fmt.Fprintf(tw, "\t%s\t%s\t\n", r.Before.Policy.Version, r.After.Policy.Version)
	apis := map[string]bool{}
	var names []string
	for _, d := range []*analysis.Document{r.Before.Report, r.After.Report} {
		for _, a := range d.APIs {
			if !apis[a.API] {
				apis[a.API] = true
				names = append(names, a.API)
			}
		}
	}
	// The deep API first.
	for i, n := range names {
		if n == DeepAPI && i > 0 {
			names[0], names[i] = names[i], names[0]
		}
	}
	find := func(d *analysis.Document, api string) *analysis.APIDoc {
		for i := range d.APIs {
			if d.APIs[i].API == api {
				return &d.APIs[i]
			}
		}
		return nil
	}
	for _, api := range names {
		b, a := find(r.Before.Report, api), find(r.After.Report, api)
		fmt.Fprintf(tw, "%s\t\t\t\n", api)
		row := func(label string, f func(*analysis.APIDoc) string) {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", label, cell(b, f), cell(a, f))
		}
		row("traces", func(d *analysis.APIDoc) string { return count(d.Traces) })
		row("failed (root errors)", func(d *analysis.APIDoc) string { return count(d.RootErrors) })
		row("max radius", func(d *analysis.APIDoc) string { return strconv.Itoa(d.MaxRadius) })
		row("mean radius", func(d *analysis.APIDoc) string { return strconv.FormatFloat(d.MeanRadius, 'f', 2, 64) })
		row("potential radius", func(d *analysis.APIDoc) string { return strconv.Itoa(d.PotentialRadius) })
		row("max amplification", func(d *analysis.APIDoc) string { return strconv.FormatFloat(d.MaxAmplification, 'f', 0, 64) })
		lb, la := r.Before.Load[api], r.After.Load[api]
		if lb > 0 || la > 0 {
			fmt.Fprintf(tw, "  %s requests per request\t%.2f\t%.2f\t\n", FailingService, lb, la)
		}
		row("suppressed retries", func(d *analysis.APIDoc) string { return count(d.SuppressedRetries) })
		row("spurious requests prevented", func(d *analysis.APIDoc) string { return count(d.SpuriousRequestsPrevented) })
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if lb, la := r.Before.Load[DeepAPI], r.After.Load[DeepAPI]; lb > 0 {
		fmt.Fprintf(w, "Load on %s per %s request: %.2f → %.2f (%+.0f%%).\n", FailingService, DeepAPI, lb, la, 100*(la/lb-1))
	}
	writeGate(w, "Gate", r.Gate)
	writeGate(w, "The same gate the other way round", r.GateBack)
	return nil
}

func writeGate(w io.Writer, title string, d *gate.Decision) {
	if d == nil {
		return
	}
	verdict := "PASS"
	if !d.Pass {
		verdict = "FAIL"
	}
	base := ""
	if d.Baseline != nil {
		base = " vs " + d.Baseline.Label
	}
	fmt.Fprintf(w, "%s (%s%s on %s, max radius %d, no increase): %s", title, d.Candidate.Label, base, d.API,
		*d.Thresholds.MaxRadius, verdict)
	if len(d.Reasons) > 0 {
		fmt.Fprintf(w, " — %s", strings.Join(d.Reasons, "; "))
	}
	fmt.Fprintln(w)
}

func cell(d *analysis.APIDoc, f func(*analysis.APIDoc) string) string {
	if d == nil {
		return "-"
	}
	return f(d)
}

// count prints n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
