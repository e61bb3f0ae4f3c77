package web_test

// Browser tests of the embedded UI in a real headless Chromium (the Debian
// package chromium), driven with chromedp: every page against a server
// that holds the simulated rollout, its figures compared with the API's,
// the click path fleet → API → incident → trace, a hostile service name
// shown as text, and screenshots (STORMRADIUS_SCREENSHOTS=1 writes them to
// docs/screenshots).
//
// Without a chromium binary the tests skip (STORMRADIUS_CHROMIUM names
// one). STORMRADIUS_UI_DEV=127.0.0.1:8080 serves the same data until
// interrupted, for work on the UI:
//
//	STORMRADIUS_UI_DEV=127.0.0.1:8080 go test -run TestUIDevServer -timeout 0 ./web/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// uiHostile is the ads service's name in the browser tests: markup that
// would run script if the UI ever parsed a name as HTML.
const uiHostile = `<img src=x onerror=alert(1)>`

const uiTraceLink = "https://jaeger.example/trace/{trace_id}"

// uiHostileRollout is the rollout with the ads service renamed.
var uiHostileRollout = sync.OnceValues(func() ([][]graph.Span, error) { return fixture.Rollout(uiHostile) })

// uiStore opens an embedded store loaded with the hostile rollout.
func uiStore(t *testing.T) store.Store {
	t.Helper()
	traces, err := uiHostileRollout()
	if err != nil {
		t.Fatalf("the simulator refused the service name %q: %v", uiHostile, err)
	}
	return loadedStore(t, traces)
}

func uiConfig() web.Config {
	return web.Config{Now: func() time.Time { return fixture.End }, TraceLinkTemplate: uiTraceLink}
}

// uiChromiumPath finds the browser: STORMRADIUS_CHROMIUM, else the usual
// names on PATH.
func uiChromiumPath() string {
	if p := os.Getenv("STORMRADIUS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// uiInitScript runs in the page before the UI: it counts alert() calls and
// CSP violations, which the tests require to stay at zero.
const uiInitScript = `
window.__alerts = 0;
window.__csp = [];
(function () {
  const orig = window.alert;
  window.alert = function () { window.__alerts++; return orig.apply(this, arguments); };
  document.addEventListener('securitypolicyviolation', function (e) {
    window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || '') + ' ' + (e.sourceFile || '') + ':' + (e.lineNumber || 0));
  });
})();
`

// browser is one tab of a headless Chromium with the page's dialogs and
// console errors recorded.
type uiBrowser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	dialogs  []string
	problems []string // console errors and uncaught exceptions
}

func newUIBrowser(t *testing.T) *uiBrowser {
	t.Helper()
	path := uiChromiumPath()
	if path == "" {
		t.Skip("no Chromium found (install the Debian package chromium, or set STORMRADIUS_CHROMIUM): skipping the browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("lang", "en-US"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	b := &uiBrowser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // start the browser, no timeout
		t.Fatalf("starting %s: %v", path, err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, string(ev.Type)+": "+ev.Message)
			b.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s %s:%d: %s", m.Type, m.URL, m.Line+1, m.Text))
				b.mu.Unlock()
			}
		}
	}()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: uiInitScript}); err != nil {
		t.Fatal(err)
	}
	b.do("viewport", chromedp.EmulateViewport(1280, 800))
	return b
}

// do runs actions, failing the test on an error (after 20 s at most).
func (b *uiBrowser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fatal(what, err)
	}
}

func (b *uiBrowser) fatal(what string, err error) {
	b.t.Helper()
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.getElementById('app')||{}).outerHTML?.slice(0, 600) || ''`))
	b.t.Fatalf("%s: %v\nat %s\n%s\nconsole: %q", what, err, loc, state, b.consoleProblems())
}

// eval evaluates a JavaScript expression into v.
func uiEval[T any](b *uiBrowser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fatal("evaluating "+expr, err)
	}
	return v
}

// waitPage waits until the UI shows page with its data.
func (b *uiBrowser) waitPage(name string) {
	b.t.Helper()
	b.do("waiting for the "+name+" page", chromedp.WaitVisible(chromedp.CSS(`#app[data-page="`+name+`"][data-state="ready"]`)))
}

// open loads a route of the UI (#/path?query) with the rollout's range.
func (b *uiBrowser) open(base, route string, params url.Values) {
	b.t.Helper()
	if params == nil {
		params = url.Values{}
	}
	params.Set("from", fixture.Start.Format(time.RFC3339))
	params.Set("to", fixture.End.Format(time.RFC3339))
	b.do("opening "+route, chromedp.Navigate(base+"/#"+route+"?"+params.Encode()))
}

// rerender runs act and waits for the page it leads to be rendered (the
// UI numbers its renders): the page already on screen being ready proves
// nothing when act stays on it.
func (b *uiBrowser) rerender(what string, act chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	before := uiEval[string](b, `document.getElementById('app').dataset.rendered`)
	b.do(what, act)
	b.do("waiting for the page after "+what, chromedp.Poll[chromedp.Void](`document.getElementById('app').dataset.rendered !== `+
		uiJSString(before)+` && document.getElementById('app').dataset.state === 'ready'`, chromedp.WithPollingTimeout(10*time.Second)))
}

func (b *uiBrowser) click(sel string) {
	b.t.Helper()
	b.do("clicking "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

func (b *uiBrowser) consoleProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.problems)
}

// safe checks that nothing ran: no dialog, no alert, no CSP violation, no
// <img> (the UI has none: a name parsed as markup would make one), and no
// console error.
func (b *uiBrowser) safe(where string) {
	b.t.Helper()
	type state struct {
		Alerts int      `json:"alerts"`
		CSP    []string `json:"csp"`
		Imgs   int      `json:"imgs"`
		ImgX   bool     `json:"imgX"`
	}
	s := uiEval[state](b, `({alerts: window.__alerts, csp: window.__csp, imgs: document.getElementsByTagName('img').length,
		imgX: !!document.querySelector('img[src="x"]')})`)
	if s.Alerts != 0 || len(s.CSP) != 0 || s.Imgs != 0 || s.ImgX {
		b.t.Errorf("%s: alerts %d, CSP violations %q, <img> elements %d (src=x: %v)", where, s.Alerts, s.CSP, s.Imgs, s.ImgX)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) != 0 {
		b.t.Errorf("%s: dialogs opened: %q", where, b.dialogs)
	}
	if len(b.problems) != 0 {
		b.t.Errorf("%s: console errors: %q", where, b.problems)
		b.problems = nil
	}
}

// screenshot writes docs/screenshots/NAME.png when STORMRADIUS_SCREENSHOTS
// is set (the viewport, 1280×800).
func (b *uiBrowser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("STORMRADIUS_SCREENSHOTS") == "" {
		return
	}
	// Let the fonts and layout settle; no focus ring in the pictures.
	uiEval[bool](b, `(document.activeElement && document.activeElement.blur && document.activeElement.blur(), true)`)
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.fatal("screenshot "+name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.t.Fatal(err)
	}
	if r := img.Bounds(); r.Dx() != 1280 || r.Dy() != 800 {
		b.t.Errorf("screenshot %s is %v, want 1280×800", name, r)
	}
	dir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if len(buf) > 300<<10 {
		b.t.Errorf("screenshot %s: %d KB, keep it under 300 KB", name, len(buf)>>10)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// fmtNum is the UI's number format (lib.js num): whole numbers with
// thousands separators, others with two decimals.
func uiNum(x float64) string {
	if x != math.Trunc(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	s := strconv.FormatInt(int64(math.Abs(x)), 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if x < 0 {
		return "-" + string(out)
	}
	return string(out)
}

// cell is a figure as the UI shows it: its text and exact value.
type uiCell struct {
	Text  string  `json:"text"`
	Value *string `json:"value"`
}

// shows checks that a figure is shown as want: its exact value in
// data-value and its text as the UI formats it (with a prefix, e.g. ×).
func uiShows(t *testing.T, what string, c uiCell, want float64, prefix string) {
	t.Helper()
	if c.Value == nil {
		t.Errorf("%s: no value shown, want %v", what, want)
		return
	}
	got, err := strconv.ParseFloat(*c.Value, 64)
	if err != nil || got != want {
		t.Errorf("%s: value %q, want %v", what, *c.Value, want)
	}
	if text := strings.TrimSpace(c.Text); text != prefix+uiNum(want) {
		t.Errorf("%s: shows %q, want %q", what, text, prefix+uiNum(want))
	}
}

// uiCellsJS reads the figures of an element's [data-field] descendants.
const uiCellsJS = `(el) => Object.fromEntries([...el.querySelectorAll('[data-field]')].map((c) => [c.dataset.field,
	{text: (c.querySelector('.value') || c).textContent, value: c.dataset.value === undefined ? null : c.dataset.value}]))`

// rows reads the rows of a table: their data attributes and figures.
type uiRow struct {
	Data   map[string]string `json:"data"`
	Fields map[string]uiCell `json:"fields"`
	Text   string            `json:"text"`
}

func uiTableRows(b *uiBrowser, sel string) []uiRow {
	b.t.Helper()
	return uiEval[[]uiRow](b, `[...document.querySelectorAll(`+uiJSString(sel+` tbody tr`)+`)].map((tr) => ({data: {...tr.dataset},
		fields: (`+uiCellsJS+`)(tr), text: tr.textContent}))`)
}

func uiJSString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// apiJSON GETs an API path from the test server.
func uiGetJSON(t *testing.T, srv *httptest.Server, path string, v any) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func uiRange() string {
	return "from=" + fixture.Start.Format(time.RFC3339) + "&to=" + fixture.End.Format(time.RFC3339)
}

// TestBrowser walks the UI as a user would: fleet → API → incident →
// trace, then the incidents, services and what-if pages, comparing every
// figure shown with the API's answer.
func TestBrowser(t *testing.T) {
	b := newUIBrowser(t)
	st := uiStore(t)
	srv := serve(t, st, uiConfig())
	rq := uiRange()

	// ---- fleet ----
	var apis struct{ APIs []analysis.APIDoc }
	uiGetJSON(t, srv, "/api/v1/apis?"+rq, &apis)
	var fleet struct{ Fleet analysis.Fleet }
	uiGetJSON(t, srv, "/api/v1/fleet?"+rq, &fleet)
	if len(apis.APIs) != 1 || apis.APIs[0].API != fixture.API {
		t.Fatalf("apis: %+v", apis.APIs)
	}
	b.open(srv.URL, "/", nil)
	b.waitPage("fleet")
	cards := uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('fleet-cards'))`)
	uiShows(t, "fleet max radius", cards["max_radius"], float64(fleet.Fleet.MaxRadius), "")
	uiShows(t, "fleet mean of the APIs' max radius", cards["mean_max_radius"], fleet.Fleet.MeanMaxRadius, "")
	rows := uiTableRows(b, "#apis")
	if len(rows) != len(apis.APIs) {
		t.Fatalf("fleet shows %d APIs, the API answers %d", len(rows), len(apis.APIs))
	}
	for i, a := range apis.APIs {
		r := rows[i]
		if r.Data["api"] != a.API {
			t.Errorf("fleet row %d is %q, want %q", i, r.Data["api"], a.API)
		}
		uiShows(t, "fleet max_radius", r.Fields["max_radius"], float64(a.MaxRadius), "")
		uiShows(t, "fleet mean_radius", r.Fields["mean_radius"], a.MeanRadius, "")
		uiShows(t, "fleet traces", r.Fields["traces"], float64(a.Traces), "")
		uiShows(t, "fleet failed_traces", r.Fields["failed_traces"], float64(a.FailedTraces), "")
		uiShows(t, "fleet potential_radius", r.Fields["potential_radius"], float64(a.PotentialRadius), "")
		uiShows(t, "fleet max_amplification", r.Fields["max_amplification"], a.MaxAmplification, "×")
		uiShows(t, "fleet suppressed", r.Fields["suppressed_retries"], float64(a.SuppressedRetries), "")
		uiShows(t, "fleet spurious", r.Fields["spurious_requests_prevented"], float64(a.SpuriousRequestsPrevented), "")
	}
	b.do("sparklines", chromedp.WaitVisible(chromedp.CSS(`#app[data-sparks="done"] #apis .spark svg polyline`)))
	var latest struct{ Incidents []analysis.IncidentDoc }
	uiGetJSON(t, srv, "/api/v1/incidents?limit=5&"+rq, &latest)
	if n := len(uiTableRows(b, "#fleet-incidents")); n != len(latest.Incidents) {
		t.Errorf("fleet lists %d latest incidents, want %d", n, len(latest.Incidents))
	}
	// "/" focuses the filter; typing filters the rows.
	b.do("keyboard /", chromedp.KeyEvent("/"))
	if id := uiEval[string](b, `document.activeElement.id`); id != "filter-apis" {
		t.Errorf(`"/" focused %q, want the filter`, id)
	}
	b.do("filter", chromedp.KeyEvent("nothing-like-this"))
	if n := uiEval[int](b, `document.querySelectorAll('#apis tbody tr:not(.hidden)').length`); n != 0 {
		t.Errorf("the filter left %d rows", n)
	}
	b.do("clear filter", chromedp.KeyEvent("\u001b")) // Escape clears it
	if n := uiEval[int](b, `document.querySelectorAll('#apis tbody tr:not(.hidden)').length`); n != len(apis.APIs) {
		t.Errorf("after Escape %d rows, want %d", n, len(apis.APIs))
	}
	// "r" refreshes in place.
	b.rerender("keyboard r", chromedp.KeyEvent("r"))
	if n := len(uiTableRows(b, "#apis")); n != len(apis.APIs) {
		t.Errorf("after a refresh the fleet lists %d APIs", n)
	}
	b.safe("fleet")
	b.screenshot("fleet")

	// ---- fleet → API ----
	var g struct {
		API    string
		Nodes  []analysis.GraphNode
		Edges  []analysis.GraphEdge
		Owners []analysis.OwnerDoc
	}
	uiGetJSON(t, srv, "/api/v1/graph?api="+url.QueryEscape(fixture.API)+"&"+rq, &g)
	b.click(`#apis a[data-api-link]`)
	b.waitPage("api")
	if loc := uiEval[string](b, `location.hash`); !strings.Contains(loc, "from=2026-03-02T10") || !strings.Contains(loc, "name=front") {
		t.Errorf("the API page's URL %q lacks the range or the API", loc)
	}
	if h := uiEval[string](b, `document.getElementById('api-name').textContent`); h != fixture.API {
		t.Errorf("API page heading %q", h)
	}
	a := apis.APIs[0]
	cards = uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('api-cards'))`)
	uiShows(t, "API max radius", cards["max_radius"], float64(a.MaxRadius), "")
	uiShows(t, "API mean radius", cards["mean_radius"], a.MeanRadius, "")
	uiShows(t, "API potential radius", cards["potential_radius"], float64(a.PotentialRadius), "")
	uiShows(t, "API traces", cards["traces"], float64(a.Traces), "")
	uiShows(t, "API max amplification", cards["max_amplification"], a.MaxAmplification, "×")
	uiShows(t, "API suppressed retries", cards["suppressed_retries"], float64(a.SuppressedRetries), "")

	// The call graph: one node per graph node with its requests,
	// attempts and amplification; the top owner highlighted, and the
	// retried edges from the root down to it.
	type dagNode struct {
		Node, Service, Requests, Attempts, Amplification, Classes, Text string
	}
	nodes := uiEval[[]dagNode](b, `[...document.querySelectorAll('.dag svg g.node')].map((n) => ({Node: n.dataset.node, Service: n.dataset.service,
		Requests: n.dataset.requests, Attempts: n.dataset.attempts, Amplification: n.dataset.amplification,
		Classes: n.getAttribute('class'), Text: [...n.querySelectorAll('text')].map((t) => t.textContent).join('|')}))`)
	if len(nodes) != len(g.Nodes) {
		t.Fatalf("the DAG draws %d nodes, the graph has %d", len(nodes), len(g.Nodes))
	}
	into := map[string][2]int64{} // calls, attempts into a node
	for _, e := range g.Edges {
		k := e.To.Service + " " + e.To.Operation
		v := into[k]
		into[k] = [2]int64{v[0] + e.Calls, v[1] + e.Attempts}
	}
	byName := map[string]dagNode{}
	for _, n := range nodes {
		byName[n.Node] = n
	}
	owner := g.Owners[0].Service + " " + g.Owners[0].Operation
	for _, gn := range g.Nodes {
		name := gn.Service + " " + gn.Operation
		n, ok := byName[name]
		if !ok {
			t.Errorf("node %q not drawn", name)
			continue
		}
		if n.Requests != strconv.FormatInt(gn.Requests, 10) || !strings.Contains(n.Text, "req "+uiNum(float64(gn.Requests))) {
			t.Errorf("node %q: requests %s (%q), want %d", name, n.Requests, n.Text, gn.Requests)
		}
		if c := into[name]; c[0] > 0 {
			amp := float64(c[1]) / float64(c[0])
			if n.Attempts != strconv.FormatInt(c[1], 10) || !strings.Contains(n.Text, "att "+uiNum(float64(c[1]))) ||
				!strings.Contains(n.Text, fmt.Sprintf("×%.2f", amp)) {
				t.Errorf("node %q: attempts %s (%q), want %d, ×%.2f", name, n.Attempts, n.Text, c[1], amp)
			}
		}
		isOwner := strings.Contains(" "+n.Classes+" ", " owner ")
		if isOwner != (name == owner) {
			t.Errorf("node %q: classes %q; the owner is %q", name, n.Classes, owner)
		}
		if gn.Service == uiHostile && !strings.HasPrefix(n.Text, uiHostile+"|") {
			t.Errorf("the hostile node shows %q, want its name as text", n.Text)
		}
	}
	storm := uiEval[[]string](b, `[...document.querySelectorAll('.dag g.edge.storm')].map((e) => e.dataset.from + ' -> ' + e.dataset.to)`)
	slices.Sort(storm)
	if want := []string{"front GET /dispatch -> route GET /route", "route GET /route -> driver GET /driver"}; !slices.Equal(storm, want) {
		t.Errorf("storm path %q, want %q", storm, want)
	}
	b.do("radius chart", chromedp.WaitVisible(chromedp.CSS(`[data-chart="radius"] svg path.s-max`)))
	owners := uiTableRows(b, "#owners")
	if len(owners) != len(g.Owners) {
		t.Errorf("%d owners listed, want %d", len(owners), len(g.Owners))
	}
	b.safe("API page")
	b.screenshot("api")
	// The dark theme, persisted.
	b.click("#theme")
	if th := uiEval[string](b, `document.documentElement.dataset.theme + ' ' + localStorage.getItem('stormradius.theme')`); th != "dark dark" {
		t.Errorf("after the toggle the theme is %q", th)
	}
	b.screenshot("api-dark")
	b.click("#theme")

	// ---- API → incident → trace ----
	var list struct{ Incidents []analysis.IncidentDoc }
	uiGetJSON(t, srv, "/api/v1/incidents?"+rq, &list)
	if len(list.Incidents) != 3 {
		t.Fatalf("the API lists %d incidents, the rollout has 3", len(list.Incidents))
	}
	shown := uiTableRows(b, "#incidents")
	if len(shown) != 3 {
		t.Errorf("the API page lists %d incidents, want 3", len(shown))
	}
	var in analysis.IncidentDoc
	uiGetJSON(t, srv, "/api/v1/incidents/"+list.Incidents[1].ID, &in) // the naive phase's: radius 2
	b.click(`#incidents a[data-incident-link="` + in.ID + `"]`)
	b.waitPage("incident")
	cards = uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('incident-cards'))`)
	uiShows(t, "incident max radius", cards["max_radius"], float64(in.MaxRadius), "")
	uiShows(t, "incident mean radius", cards["mean_radius"], in.MeanRadius, "")
	uiShows(t, "incident max amplification", cards["max_amplification"], in.MaxAmplification, "×")
	uiShows(t, "incident suppressed retries", cards["suppressed_retries"], float64(in.SuppressedRetries), "")
	uiShows(t, "incident spurious requests prevented", cards["spurious_requests_prevented"], float64(in.SpuriousRequestsPrevented), "")
	uiShows(t, "incident owned failures", cards["owned_failures"], float64(in.OwnedFailures), "")
	if o := uiEval[string](b, `document.getElementById('incident-owner').textContent`); o != in.Service+" "+in.Operation {
		t.Errorf("incident owner %q", o)
	}
	affected := uiEval[[]string](b, `[...document.querySelectorAll('#affected-apis li')].map((li) => li.dataset.api)`)
	if !slices.Equal(affected, in.AffectedAPIs) {
		t.Errorf("affected APIs %q, want %q", affected, in.AffectedAPIs)
	}
	examples := uiEval[[]string](b, `[...document.querySelectorAll('#example-traces a')].map((a) => a.dataset.trace + ' ' + a.textContent)`)
	var want []string
	for _, id := range in.ExampleTraces {
		want = append(want, id+" "+id)
	}
	if len(want) == 0 || !slices.Equal(examples, want) {
		t.Errorf("example traces %q, want %q", examples, want)
	}
	svcRows := uiTableRows(b, "#incident-services")
	if len(svcRows) != len(in.Services) {
		t.Errorf("incident: %d services, want %d", len(svcRows), len(in.Services))
	}
	b.safe("incident page")
	b.screenshot("incident")

	id := in.ExampleTraces[0]
	var tv struct {
		query.TraceView
		Link string
	}
	uiGetJSON(t, srv, "/api/v1/traces/"+id, &tv)
	b.click(`#example-traces a[data-trace="` + id + `"]`)
	b.waitPage("trace")
	type hopRow struct {
		Hop, Service, Attempt, Claim, Failed, Owner, Text string
	}
	hops := uiEval[[]hopRow](b, `[...document.querySelectorAll('.wf-row')].map((r) => ({Hop: r.dataset.hop, Service: r.dataset.service,
		Attempt: r.dataset.attempt, Claim: r.dataset.claim, Failed: r.dataset.failed, Owner: r.dataset.owner, Text: r.querySelector('.wf-name').textContent}))`)
	if len(hops) != len(tv.Hops) {
		t.Fatalf("the waterfall has %d rows, the trace %d hops", len(hops), len(tv.Hops))
	}
	seen := map[string]bool{}
	for _, r := range hops {
		i, err := strconv.Atoi(r.Hop)
		if err != nil || i < 0 || i >= len(tv.Hops) || seen[r.Hop] {
			t.Errorf("waterfall row for hop %q", r.Hop)
			continue
		}
		seen[r.Hop] = true
		h := tv.Hops[i]
		if r.Service != h.Service || r.Attempt != strconv.Itoa(int(h.Attempt)) || r.Claim != h.Claim ||
			r.Failed != strconv.FormatBool(h.Failed) || r.Owner != strconv.FormatBool(h.Owner) {
			t.Errorf("hop %d shown as %+v, the API says %+v", i, r, h)
		}
		if h.Failed != strings.Contains(r.Text, "✕ failed") || (h.Attempt > 0) != strings.Contains(r.Text, "↻ retry") ||
			h.Owner != strings.Contains(r.Text, "owner") || !strings.Contains(r.Text, h.Service) {
			t.Errorf("hop %d's marks %q do not match %+v", i, r.Text, h)
		}
	}
	if l := uiEval[string](b, `document.getElementById('trace-link').href`); l != tv.Link || tv.Link == "" {
		t.Errorf("trace viewer link %q, want %q", l, tv.Link)
	}
	if s := uiEval[string](b, `document.getElementById('trace-id').textContent`); s != id {
		t.Errorf("trace id shown %q", s)
	}
	cards = uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.querySelector('.cards'))`)
	uiShows(t, "trace hops", cards["hops"], float64(len(tv.Hops)), "")
	uiShows(t, "trace spans", cards["spans"], float64(tv.Spans), "")
	uiShows(t, "trace radius", cards["radius"], float64(tv.Events[0].Radius), "")
	b.safe("trace page")
	b.screenshot("trace")

	// ---- incidents (the nav keeps the range) ----
	b.click(`a[data-nav="incidents"]`)
	b.waitPage("incidents")
	shown = uiTableRows(b, "#incidents")
	if len(shown) != len(list.Incidents) {
		t.Fatalf("the incidents page lists %d, the API %d", len(shown), len(list.Incidents))
	}
	for i, r := range shown {
		d := list.Incidents[i]
		if r.Data["incident"] != d.ID {
			t.Errorf("incident row %d is %s, want %s (newest first)", i, r.Data["incident"], d.ID)
		}
		uiShows(t, "listed max radius", r.Fields["max_radius"], float64(d.MaxRadius), "")
		uiShows(t, "listed mean radius", r.Fields["mean_radius"], d.MeanRadius, "")
	}
	b.safe("incidents page")
	b.screenshot("incidents")

	// ---- services: claim integrity ----
	var svcs struct{ Services []analysis.ServiceDoc }
	uiGetJSON(t, srv, "/api/v1/services?"+rq, &svcs)
	b.click(`a[data-nav="services"]`)
	b.waitPage("services")
	srows := uiTableRows(b, "#services")
	if len(srows) != len(svcs.Services) {
		t.Fatalf("%d service rows, the API has %d", len(srows), len(svcs.Services))
	}
	sawHostile := false
	for i, s := range svcs.Services {
		r := srows[i]
		if r.Data["service"] != s.Service {
			t.Errorf("service row %d is %q, want %q", i, r.Data["service"], s.Service)
		}
		sawHostile = sawHostile || (s.Service == uiHostile && strings.HasPrefix(r.Text, uiHostile))
		for k, v := range map[string]int64{"correct": s.Claims.Correct, "false_claim": s.Claims.FalseClaim, "false_unclaim": s.Claims.FalseUnclaim,
			"missing": s.Claims.Missing, "invalid": s.Claims.Invalid, "misattributed_errors": s.MisattributedErrors, "context_drops": s.ContextDrops} {
			uiShows(t, s.Service+" "+k, r.Fields[k], float64(v), "")
		}
	}
	if !sawHostile {
		t.Errorf("the service %q is not shown as text", uiHostile)
	}
	b.safe("services page")
	b.screenshot("services")

	// ---- what-if: the form against POST /whatif ----
	b.click(`a[data-nav="whatif"]`)
	b.waitPage("whatif")
	b.do("what-if form", chromedp.WaitVisible(chromedp.CSS(`#app[data-form="ready"] #wi-fail input[type=checkbox]`)))
	checked := uiEval[[]string](b, `[...document.querySelectorAll('#wi-fail input:checked')].map((c) => c.value)`)
	if !slices.Equal(checked, []string{g.Owners[0].Service}) {
		t.Errorf("the what-if form fails %q by default, want the top owner %q", checked, g.Owners[0].Service)
	}
	b.click("#wi-submit")
	b.do("what-if answer", chromedp.WaitVisible(chromedp.CSS(`#whatif-result[data-state="ready"] #whatif-table`)))
	uiWhatIf(t, b, srv, map[string]any{"api": fixture.API, "fail": checked, "budget": 0.1})
	b.screenshot("whatif")
	// A chain, the seed's: A→…→G, D failing, R = 1 by default.
	b.click("#wi-mode-chain")
	b.click("#wi-submit")
	b.do("what-if chain answer", chromedp.WaitVisible(chromedp.CSS(`#whatif-result[data-state="ready"] #whatif-table tr[data-node="G"]`)))
	uiWhatIf(t, b, srv, map[string]any{"chain": strings.Split("A,B,C,D,E,F,G", ","), "fail": []string{"D"}, "budget": 0.1})
	b.safe("what-if page")

	// ---- a deep link by path (/traces/ID) opens the page ----
	b.do("deep link", chromedp.Navigate(srv.URL+"/traces/"+id))
	b.waitPage("trace")
	if n := uiEval[int](b, `document.querySelectorAll('.wf-row').length`); n != len(tv.Hops) {
		t.Errorf("deep link: %d hops shown, want %d", n, len(tv.Hops))
	}

	// ---- the hostile name everywhere it appears, as text ----
	b.open(srv.URL, "/api", url.Values{"name": {fixture.API}, "owner": {uiHostile + " GET /ads"}})
	b.waitPage("api")
	if o := uiEval[string](b, `document.getElementById('dag-owner').textContent`); o != uiHostile+" GET /ads" {
		t.Errorf("highlighted owner %q", o)
	}
	if n := uiEval[int](b, `[...document.querySelectorAll('.dag g.node.owner')].filter((n) => n.dataset.service === `+uiJSString(uiHostile)+`).length`); n != 1 {
		t.Errorf("selecting the hostile owner highlights %d nodes", n)
	}
	b.safe("API page with the hostile owner")
}

// whatif compares the what-if table with POST /api/v1/whatif for each
// policy.
func uiWhatIf(t *testing.T, b *uiBrowser, srv *httptest.Server, q map[string]any) {
	t.Helper()
	type cellv struct{ Node, Policy, Value, Text string }
	cells := uiEval[[]cellv](b, `[...document.querySelectorAll('#whatif-table tbody td[data-policy]')].map((td) => ({Node: td.closest('tr').dataset.node,
		Policy: td.dataset.policy, Value: td.dataset.value, Text: td.textContent}))`)
	got := map[string]map[string]float64{}
	for _, c := range cells {
		if got[c.Policy] == nil {
			got[c.Policy] = map[string]float64{}
		}
		v, err := strconv.ParseFloat(c.Value, 64)
		if err != nil {
			t.Errorf("what-if cell %+v", c)
		}
		got[c.Policy][c.Node] = v
	}
	for _, pol := range []string{"naive", "budget", "ownership"} {
		q["policy"] = pol
		body, _ := json.Marshal(q)
		resp, err := srv.Client().Post(srv.URL+"/api/v1/whatif?"+uiRange(), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var ans query.WhatIfAnswer
		json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(ans.Requests) == 0 {
			t.Fatalf("POST whatif %s: %d %+v", body, resp.StatusCode, ans)
		}
		if !uiMapsEqual(got[pol], ans.Requests) {
			t.Errorf("what-if %s %s: the page shows %v, the API answers %v", pol, body, got[pol], ans.Requests)
		}
	}
}

func uiMapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestBrowserToken: with tokens, the UI asks for one, keeps it in
// sessionStorage and sends it.
func TestBrowserToken(t *testing.T) {
	b := newUIBrowser(t)
	st := uiStore(t)
	cfg := uiConfig()
	cfg.Tokens = []string{"s3cret"}
	srv := httptest.NewServer(web.Handler(query.New(st), cfg))
	t.Cleanup(srv.Close)
	b.open(srv.URL, "/", nil)
	b.do("token form", chromedp.WaitVisible(chromedp.CSS(`#app[data-state="auth"] #token-form`)))
	b.do("wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "wrong\n"))
	b.do("token refused", chromedp.WaitVisible(chromedp.CSS(`#app[data-state="auth"] #token-form`)))
	if why := uiEval[string](b, `document.getElementById('token-why').textContent`); !strings.Contains(why, "refused") {
		t.Errorf("after a wrong token: %q", why)
	}
	b.do("token", chromedp.SendKeys(chromedp.CSS("#token"), "s3cret\n"))
	b.waitPage("fleet")
	if tok := uiEval[string](b, `sessionStorage.getItem('stormradius.token')`); tok != "s3cret" {
		t.Errorf("sessionStorage holds %q", tok)
	}
	if n := len(uiTableRows(b, "#apis")); n != 1 {
		t.Errorf("with the token the fleet lists %d APIs", n)
	}
	// The range presets keep the page; "now" is the server's (10:30).
	b.rerender("the 1h preset", chromedp.Click(chromedp.CSS(`#presets a[title="The last 1h"]`), chromedp.NodeVisible))
	b.waitPage("fleet")
	if loc := uiEval[string](b, `location.hash`); !strings.Contains(loc, "from=now-1h") {
		t.Errorf("the 1h preset went to %q", loc)
	}
	if n := len(uiTableRows(b, "#apis")); n != 1 {
		t.Errorf("over the last hour the fleet lists %d APIs", n)
	}
	// Auto-refresh is a toggle.
	b.click("#auto")
	if p := uiEval[string](b, `document.getElementById('auto').getAttribute('aria-pressed')`); p != "true" {
		t.Errorf("auto-refresh pressed %q", p)
	}
	b.click("#auto")
	// The failed requests with the wrong token are the only console
	// errors allowed here.
	b.mu.Lock()
	for _, p := range b.problems {
		if !strings.Contains(p, "401") {
			t.Errorf("console: %s", p)
		}
	}
	b.problems = nil
	b.mu.Unlock()
	b.safe("token")
}

// TestUIDevServer serves the hostile rollout for work on the UI.
func TestUIDevServer(t *testing.T) {
	addr := os.Getenv("STORMRADIUS_UI_DEV")
	if addr == "" {
		t.Skip("set STORMRADIUS_UI_DEV=127.0.0.1:8080 to serve the UI over the rollout")
	}
	st := uiStore(t)
	t.Logf("serving on http://%s/#/?%s", addr, uiRange())
	t.Fatal(http.ListenAndServe(addr, web.Handler(query.New(st), uiConfig())))
}
