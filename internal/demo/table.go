package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/gate"
)

// JSON is the demo's --format json output: {"before": REPORT, "after":
// REPORT} with each REPORT the docs/SPEC.md §5.2 document of a phase's traces read
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
	var rows [][3]string
	add := func(label, b, a string) { rows = append(rows, [3]string{label, b, a}) }
	add("", "before", "after")
	add("", r.Before.Policy.Name+" retries", "error "+r.After.Policy.Name)
	add("", r.Before.Policy.Version, r.After.Policy.Version)
	apis := map[string]bool{}
	names := []string{DeepAPI} // the deep API first
	for _, d := range []*analysis.Document{r.Before.Report, r.After.Report} {
		for _, a := range d.APIs {
			if !apis[a.API] && a.API != DeepAPI {
				apis[a.API] = true
				names = append(names, a.API)
			}
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
		if a == nil && b == nil {
			continue
		}
		add(api, "", "")
		row := func(label string, f func(*analysis.APIDoc) string) { add("  "+label, cell(b, f), cell(a, f)) }
		row("traces", func(d *analysis.APIDoc) string { return count(d.Traces) })
		row("failed (root errors)", func(d *analysis.APIDoc) string { return count(d.RootErrors) })
		row("max radius", func(d *analysis.APIDoc) string { return strconv.Itoa(d.MaxRadius) })
		row("mean radius", func(d *analysis.APIDoc) string { return strconv.FormatFloat(d.MeanRadius, 'f', 2, 64) })
		row("potential radius", func(d *analysis.APIDoc) string { return strconv.Itoa(d.PotentialRadius) })
		row("max amplification", func(d *analysis.APIDoc) string { return strconv.FormatFloat(d.MaxAmplification, 'f', 0, 64) })
		if lb, la := r.Before.Load[api], r.After.Load[api]; lb > 0 || la > 0 {
			add("  "+FailingService+" requests per request", strconv.FormatFloat(lb, 'f', 2, 64), strconv.FormatFloat(la, 'f', 2, 64))
		}
		row("suppressed retries", func(d *analysis.APIDoc) string { return count(d.SuppressedRetries) })
		row("spurious requests prevented", func(d *analysis.APIDoc) string { return count(d.SpuriousRequestsPrevented) })
	}
	var width [3]int
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%-*s   %*s   %*s\n", width[0], r[0], width[1], r[1], width[2], r[2]); err != nil {
			return err
		}
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
	verdict := strings.ToUpper(d.Decision) // PASS, FAIL or UNDECIDED
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
