package web_test

// Browser tests of the adoption plan's page (#/plan, issue 31): a plan
// known by hand shown step by step with its storm paths, the question in
// the URL, a hostile service name as text, the errors, and the empty plan.

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stormradius/stormradius/analysis/plan"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/sim"
)

// uiPlanChain is cmd/stormradius's planChain with C named uiHostile: 20
// traces of A→B→C→D→E, one naive retry per hop and no claims, D down in
// every trace.
func uiPlanChain(t *testing.T) [][]graph.Span {
	t.Helper()
	res, err := sim.Run(sim.Scenario{Services: sim.Chain([]string{"A", "B", uiHostile, "D", "E"}, sim.Policy{Retry: sim.RetryNaive, Retries: 1, ResendAttr: true}),
		Root: "A", Faults: []sim.Fault{{Service: "D", Rate: 1, Persistent: true}}, Traces: 20, Seed: 31, Start: fixture.Start})
	if err != nil {
		t.Fatal(err)
	}
	return fixture.Traces(res)
}

// uiPlanHop is a hop of a drawn storm path.
type uiPlanHop struct {
	Node     string `json:"node"`
	Requests string `json:"requests"`
	Retried  string `json:"retried"`
	Text     string `json:"text"`
}

// uiPlanPath reads the hops of step n's storm path, before or after.
func uiPlanPath(b *uiBrowser, step, when string) []uiPlanHop {
	b.t.Helper()
	return uiEval[[]uiPlanHop](b, `[...document.querySelectorAll('#plan-step-`+step+` .path-row[data-when=`+when+`] li.hop')].map((li) => ({
		node: li.dataset.node, requests: li.dataset.requests, retried: li.dataset.retried, text: li.textContent}))`)
}

// expectedStatus takes from the console problems the browser's own report
// of the given status from /api/v1/plan, which the page shows as its
// error, and leaves the rest for safe.
func expectedStatus(b *uiBrowser, status string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.problems[:0]
	for _, p := range b.problems {
		if !(strings.Contains(p, "/api/v1/plan?") && strings.Contains(p, "status of "+status)) {
			kept = append(kept, p)
		}
	}
	b.problems = kept
}

// The plan of the naive chain with B = 1 (cmd/stormradius TestPlanCommand,
// by hand): D fails in every trace; A+B only together (D serves 8 → 4
// requests per root request, max radius 3 → 2), then C (4 → 2, 2 → 1).
func TestBrowserPlan(t *testing.T) {
	b := newUIBrowser(t)
	st := loadedStore(t, uiPlanChain(t))
	srv := serve(t, st, uiConfig())
	const api = "A GET /A"
	hostileNode := uiHostile + " GET /" + uiHostile
	var want plan.Plan
	uiGetJSON(t, srv, "/api/v1/plan?budget=1&"+uiRange(), &want)
	if len(want.Steps) != 2 || want.Cost != 520 || want.Steps[1].Cost != 80 {
		t.Fatalf("the API's plan is not the one known by hand: %+v", want)
	}

	b.open(srv.URL, "/plan", url.Values{"budget": {"1"}})
	b.waitPage("plan")
	if loc := uiEval[string](b, `location.hash`); !strings.HasPrefix(loc, "#/plan?") || !strings.Contains(loc, "budget=1") || !strings.Contains(loc, "from=2026-03-02T10") {
		t.Errorf("the plan page's URL %q lacks the budget or the range", loc)
	}
	if cur := uiEval[string](b, `document.querySelector('a[data-nav="plan"]').getAttribute('aria-current') + ' ' + document.querySelector('a[data-nav="plan"]').textContent`); cur != "page Plan" {
		t.Errorf("the nav's Plan entry: %q", cur)
	}
	if v := uiEval[string](b, `document.getElementById('plan-budget').value`); v != "1" {
		t.Errorf("the budget field shows %q, want 1", v)
	}

	// The summary: steps, APIs, services, weights, budget, cost before → after.
	sum := uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('plan-summary'))`)
	for k, v := range map[string]float64{"steps": 2, "apis": 1, "services": 5, "budget": 1, "cost": 520, "cost_after": 80} {
		uiShows(t, "summary "+k, sum[k], v, "")
	}
	text := uiEval[string](b, `document.getElementById('plan-summary').textContent`)
	for _, w := range []string{"2 steps over 1 root API and 5 services", "observed owned-failure rate", "budget B = 1", "expected storm cost 520 → 80 after step 2 (−84.6%)"} {
		if !strings.Contains(text, w) {
			t.Errorf("the summary %q lacks %q", text, w)
		}
	}
	if s := uiEval[string](b, `document.getElementById('plan-speaking').textContent`); s != "None of the 5 services speaks the protocol yet." {
		t.Errorf("speaking: %q", s)
	}

	// The APIs before any step.
	rows := uiTableRows(b, "#plan-apis")
	if len(rows) != 1 || rows[0].Data["api"] != api {
		t.Fatalf("APIs before any step: %+v", rows)
	}
	for k, v := range map[string]float64{"weight": 20, "max_radius": 3, "mean_radius": 3, "load": 8, "spurious": 18} {
		uiShows(t, "before any step: "+k, rows[0].Fields[k], v, "")
	}

	// The steps.
	steps := uiTableRows(b, "#plan-steps")
	if len(steps) != 2 {
		t.Fatalf("%d steps listed, want 2", len(steps))
	}
	if s := steps[0]; s.Data["step"] != "1" || s.Data["together"] != "true" || !strings.Contains(s.Text, "A + B only together") ||
		!strings.Contains(s.Text, want.Steps[0].Why) || s.Fields["cost"].Text != "220" {
		t.Errorf("step 1 listed as %+v", s)
	}
	if want.Steps[0].Why != "A GET /A, while D GET /D fails: A stops retrying B GET /B: B answers unclaimed and A honours it (neither helps alone); D GET /D serves 8 → 4 requests per root request" {
		t.Errorf("step 1's why is not the one known by hand: %q", want.Steps[0].Why)
	}
	if s := steps[1]; s.Data["step"] != "2" || s.Data["together"] != "false" || strings.Contains(s.Text, "together") ||
		!strings.Contains(s.Text, want.Steps[1].Why) || s.Fields["cost"].Text != "80" {
		t.Errorf("step 2 listed as %+v", s)
	}
	if names := uiEval[[]string](b, `[...document.querySelectorAll('#plan-steps .svc-names')].map((e) => e.textContent)`); !slices.Equal(names, []string{"A + B", uiHostile}) {
		t.Errorf("the steps adopt %q, want A + B, then %q as text", names, uiHostile)
	}
	if h := uiEval[string](b, `document.getElementById('plan-step-1-title').textContent`); h != "Step 1: adopt A + B only together" {
		t.Errorf("step 1's heading %q", h)
	}
	if h := uiEval[string](b, `document.getElementById('plan-step-2-title').textContent`); h != "Step 2: adopt "+uiHostile {
		t.Errorf("step 2's heading %q", h)
	}

	// What each step changes, before → after.
	for _, tc := range []struct {
		step string
		want map[string]string
	}{
		{"1", map[string]string{"max_radius": "3 → 2", "mean_radius": "3 → 2", "load": "8 → 4", "spurious": "18 → 7"}},
		{"2", map[string]string{"max_radius": "2 → 1", "mean_radius": "2 → 1", "load": "4 → 2", "spurious": "7 → 2"}},
	} {
		rows := uiTableRows(b, "#plan-step-"+tc.step+"-apis")
		if len(rows) != 1 || rows[0].Data["api"] != api {
			t.Errorf("step %s changes %+v", tc.step, rows)
			continue
		}
		for k, v := range tc.want {
			if got := strings.TrimSpace(rows[0].Fields[k].Text); got != v {
				t.Errorf("step %s, %s: %q, want %q", tc.step, k, got, v)
			}
		}
	}

	// The storm paths: requests per root request at each hop, and whether
	// the call into it is retried, said in words as well as colour.
	type hop struct {
		node     string
		requests string
		retried  bool
	}
	A, B, C, D := hop{"A GET /A", "1", false}, hop{"B GET /B", "", false}, hop{hostileNode, "", false}, hop{"D GET /D", "", false}
	at := func(h hop, req string, retried bool) hop { h.requests, h.retried = req, retried; return h }
	for _, tc := range []struct {
		step, when string
		want       []hop
	}{
		{"1", "before", []hop{A, at(B, "2", true), at(C, "4", true), at(D, "8", true)}},
		{"1", "after", []hop{A, at(B, "1", false), at(C, "2", true), at(D, "4", true)}},
		{"2", "before", []hop{A, at(B, "1", false), at(C, "2", true), at(D, "4", true)}},
		{"2", "after", []hop{A, at(B, "1", false), at(C, "1", false), at(D, "2", true)}},
	} {
		got := uiPlanPath(b, tc.step, tc.when)
		if len(got) != len(tc.want) {
			t.Errorf("step %s %s: %d hops drawn, want %d: %+v", tc.step, tc.when, len(got), len(tc.want), got)
			continue
		}
		for i, w := range tc.want {
			g := got[i]
			if g.Node != w.node || g.Requests != w.requests || g.Retried != map[bool]string{true: "true", false: "false"}[w.retried] {
				t.Errorf("step %s %s hop %d: %+v, want %+v", tc.step, tc.when, i, g, w)
			}
			words := "→ not retried"
			if w.retried {
				words = "↻ retried ×2" // B = 1: 1 + R attempts per call
			}
			if i == 0 {
				words = "ROOT"
			}
			if !strings.Contains(g.Text, w.node+w.requests+" req") || !strings.Contains(g.Text, words) || (i == len(tc.want)-1) != strings.Contains(g.Text, "FAILING") {
				t.Errorf("step %s %s hop %d shows %q: want %q, %s req, %q", tc.step, tc.when, i, g.Text, w.node, w.requests, words)
			}
		}
	}
	if s := uiEval[string](b, `document.querySelector('#plan-step-1 .path-row[data-when=after] li.hop:last-child .hop-req').textContent`); s != "4 req (was 8)" {
		t.Errorf("step 1: the failing node after shows %q, want it to say what it served before", s)
	}
	// Accessibility: captions, column headers, labelled paths.
	if n := uiEval[int](b, `[...document.querySelectorAll('#app table')].filter((t) => !t.caption || t.querySelectorAll('th:not([scope])').length).length`); n != 0 {
		t.Errorf("%d tables without a caption or with unscoped headers", n)
	}
	if n := uiEval[int](b, `[...document.querySelectorAll('ol.storm-path')].filter((o) => !o.getAttribute('aria-label')).length`); n != 0 {
		t.Errorf("%d storm paths without a label", n)
	}
	b.safe("plan page")
	// The picture: step 1, its changes and its storm path.
	uiEval[bool](b, `(window.scrollTo(0, document.getElementById('plan-step-1').getBoundingClientRect().top + window.scrollY - document.querySelector('header.top').offsetHeight - 12), true)`)
	b.screenshot("plan")
	uiEval[bool](b, `(window.scrollTo(0, 0), true)`) // the sticky header would cover the form

	// Both themes: the retried calls in the storm colour of each.
	storm := func() string {
		return uiEval[string](b, `getComputedStyle(document.querySelector('.storm-path .call.retried')).color`)
	}
	light := storm()
	b.click("#theme")
	dark := storm()
	if uiEval[string](b, `document.documentElement.dataset.theme`) != "dark" || light == dark || light != "rgb(217, 72, 15)" || dark != "rgb(255, 138, 76)" {
		t.Errorf("retried calls: %s in the light theme, %s in the dark, want the themes' storm colours", light, dark)
	}
	b.click("#theme")

	// The form asks another question; the URL keeps it. B = 0.1: each
	// service alone caps its own retries: 8 → 4.4 → 2.2 → 1.1.
	b.do("budget 0.1", chromedp.SetValue(chromedp.CSS("#plan-budget"), "0.1"))
	b.rerender("planning with B = 0.1", chromedp.Click(chromedp.CSS("#plan-submit"), chromedp.NodeVisible))
	b.waitPage("plan")
	if loc := uiEval[string](b, `location.hash`); !strings.Contains(loc, "budget=0.1") || !strings.Contains(loc, "from=") {
		t.Errorf("after asking for B = 0.1 the URL is %q", loc)
	}
	loads := uiEval[[]string](b, `[...document.querySelectorAll('[id^=plan-step-][id$=-apis] tbody td[data-field=load]')].map((td) => td.textContent)`)
	if !slices.Equal(loads, []string{"8 → 4.4", "4.4 → 2.2", "2.2 → 1.1"}) {
		t.Errorf("with B = 0.1 the loads are %q, want 8 → 4.4 → 2.2 → 1.1", loads)
	}
	if n := uiEval[int](b, `document.querySelectorAll('#plan-steps .badge').length`); n != 0 {
		t.Errorf("with B = 0.1, %d steps marked together", n)
	}
	b.safe("plan page, B = 0.1")

	// Steps and fail: C (the hostile name) failing, one step.
	b.do("steps 1", chromedp.SetValue(chromedp.CSS("#plan-limit"), "1"))
	b.do("fail C", chromedp.SetValue(chromedp.CSS("#plan-fail"), uiHostile))
	b.rerender("planning one step for C failing", chromedp.Click(chromedp.CSS("#plan-submit"), chromedp.NodeVisible))
	loc := uiEval[string](b, `location.hash`)
	if q, err := url.ParseQuery(loc[strings.Index(loc, "?")+1:]); err != nil || q.Get("steps") != "1" || q.Get("fail") != uiHostile || q.Get("budget") != "0.1" {
		t.Errorf("after asking for one step with C failing the URL is %q", loc)
	}
	if n := len(uiTableRows(b, "#plan-steps")); n != 1 {
		t.Errorf("steps=1: %d steps shown", n)
	}
	if w := uiEval[string](b, `document.querySelector('#plan-summary [data-field=weights]').textContent`); w != "planned for "+uiHostile+" failing, each in turn" {
		t.Errorf("fail=C: the weights say %q", w)
	}
	if v := uiEval[string](b, `document.getElementById('plan-fail').value`); v != uiHostile {
		t.Errorf("the fail field shows %q", v)
	}
	b.safe("plan page, C failing")

	// Errors, as the API words them, as text.
	b.open(srv.URL, "/plan", url.Values{"fail": {"nope" + uiHostile}})
	b.waitPage("plan")
	if e := uiEval[string](b, `document.getElementById('plan-error').textContent`); !strings.HasPrefix(e, `Plan: bad request: plan: fail "nope`+uiHostile+`" is not a service`) {
		t.Errorf("an unknown failing service: %q", e)
	}
	expectedStatus(b, "400")
	b.safe("plan page, a bad request")
	b.open(srv.URL, "/plan", url.Values{"api": {"nope GET /"}})
	b.waitPage("plan")
	if e := uiEval[string](b, `document.getElementById('plan-error').textContent`); !strings.HasPrefix(e, `Plan: not found: no traces of root API "nope GET /" in the range`) {
		t.Errorf("an unknown API: %q", e)
	}
	if sel := uiEval[[]string](b, `[...document.getElementById('plan-api').selectedOptions].map((o) => o.value)`); !slices.Equal(sel, []string{"nope GET /"}) {
		t.Errorf("the API field selects %q", sel)
	}
	expectedStatus(b, "404")
	b.safe("plan page, an unknown API")
}

// The rollout's services all speak the protocol (ads, the hostile name,
// among them): the plan has no step, and says so.
func TestBrowserPlanEmpty(t *testing.T) {
	b := newUIBrowser(t)
	srv := serve(t, uiStore(t), uiConfig())
	b.open(srv.URL, "/plan", nil)
	b.waitPage("plan")
	if s := uiEval[string](b, `document.getElementById('plan-none').textContent`); s != "No step lowers the expected storm cost: every service on the storm paths already speaks the protocol, or nothing retries." {
		t.Errorf("the empty plan says %q", s)
	}
	if n := uiEval[int](b, `document.querySelectorAll('#plan-steps, .plan-step').length`); n != 0 {
		t.Errorf("the empty plan draws %d steps", n)
	}
	speaking := uiEval[[]string](b, `[...document.querySelectorAll('#plan-speaking li')].map((li) => li.textContent)`)
	if !slices.Equal(speaking, []string{uiHostile, "driver", "front", "route"}) {
		t.Errorf("speaking: %q", speaking)
	}
	uiShows(t, "empty plan: steps", uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('plan-summary'))`)["steps"], 0, "")
	b.safe("the empty plan")
}

// A plan of more steps than the page opens at once: the later steps'
// changes and storm paths are drawn when opened. The chain S00→…→S13,
// S12 failing, B = 0.1: each of S00…S11 alone caps its own retries (S11
// into S12 too: 1 + min(R, B)), one step each, from the root down.
func TestBrowserPlanManySteps(t *testing.T) {
	b := newUIBrowser(t)
	var names []string
	for i := range 14 {
		names = append(names, fmt.Sprintf("S%02d", i))
	}
	res, err := sim.Run(sim.Scenario{Services: sim.Chain(names, sim.Policy{Retry: sim.RetryNaive, Retries: 1, ResendAttr: true}),
		Root: "S00", Faults: []sim.Fault{{Service: "S12", Rate: 1, Persistent: true}}, Traces: 3, Seed: 31, Start: fixture.Start})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, loadedStore(t, fixture.Traces(res)), uiConfig())
	var want plan.Plan
	uiGetJSON(t, srv, "/api/v1/plan?budget=0.1&"+uiRange(), &want)
	var adopted []string
	for _, s := range want.Steps {
		adopted = append(adopted, strings.Join(s.Services, "+"))
	}
	if want := "S00 S01 S02 S03 S04 S05 S06 S07 S08 S09 S10 S11"; strings.Join(adopted, " ") != want {
		t.Fatalf("the chain's plan adopts %q, want %q", adopted, want)
	}
	b.open(srv.URL, "/plan", url.Values{"budget": {"0.1"}})
	b.waitPage("plan")
	if n := len(uiTableRows(b, "#plan-steps")); n != 12 {
		t.Errorf("%d steps listed, want 12", n)
	}
	type step struct {
		Tag   string `json:"tag"`
		Open  bool   `json:"open"`
		Paths int    `json:"paths"`
	}
	read := func() []step {
		return uiEval[[]step](b, `[...document.querySelectorAll('.plan-step')].map((s) => ({tag: s.tagName, open: s.tagName !== 'DETAILS' || s.open,
			paths: s.querySelectorAll('.plan-path').length}))`)
	}
	got := read()
	if len(got) != 12 {
		t.Fatalf("%d step sections, want 12", len(got))
	}
	for i, s := range got {
		if i < 10 && (s.Tag != "SECTION" || s.Paths != 1) || i >= 10 && (s.Tag != "DETAILS" || s.Open || s.Paths != 0) {
			t.Errorf("step %d: %+v", i+1, s)
		}
	}
	b.click("#plan-step-11 > summary")
	b.do("step 11's details", chromedp.WaitVisible(chromedp.CSS("#plan-step-11 .plan-path"))) // drawn on the toggle event
	got = read()
	if s := got[10]; !s.Open || s.Paths != 1 {
		t.Errorf("step 11 opened: %+v", s)
	}
	last := want.Steps[10].Path.After
	hops := uiPlanPath(b, "11", "after")
	if len(hops) != len(last) || hops[len(hops)-1].Node != last[len(last)-1].Node || hops[len(hops)-1].Requests != strconv.FormatFloat(last[len(last)-1].Requests, 'f', -1, 64) {
		t.Errorf("step 11's path after: %+v, want %+v", hops, last)
	}
	b.safe("a plan of 12 steps")
}
