package web_test

// Browser tests of the UI paper cuts of issue 27 (item 8): the API page
// by ?api= as well as ?name=, the incident timeline's axis, the call
// graph's edge labels clear of the nodes, and the fleet's mean of the
// APIs' max radius named apart from the per-trace mean radius.

import (
	"context"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/sim"
)

// #/api?api=X opens the page of X, as ?name=X does: REST takes api=, and
// a link written by hand after it must not say "No API named".
func TestBrowserAPIPageByAPIParam(t *testing.T) {
	b := newUIBrowser(t)
	st := uiStore(t)
	srv := serve(t, st, uiConfig())
	var apis struct{ APIs []analysis.APIDoc }
	uiGetJSON(t, srv, "/api/v1/apis?"+uiRange(), &apis)
	if len(apis.APIs) != 1 || apis.APIs[0].API != fixture.API {
		t.Fatalf("apis: %+v", apis.APIs)
	}
	a := apis.APIs[0]
	for _, param := range []string{"api", "name"} {
		b.open(srv.URL, "/api", url.Values{param: {fixture.API}})
		b.waitPage("api")
		if h := uiEval[string](b, `(document.getElementById('api-name') || document.querySelector('#app h1')).textContent`); h != fixture.API {
			t.Errorf("#/api?%s=%s: heading %q", param, fixture.API, h)
			continue
		}
		cards := uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('api-cards'))`)
		uiShows(t, param+"= traces", cards["traces"], float64(a.Traces), "")
		uiShows(t, param+"= max radius", cards["max_radius"], float64(a.MaxRadius), "")
		if n := uiEval[int](b, `document.querySelectorAll('.dag svg g.node').length`); n == 0 {
			t.Errorf("#/api?%s=: no call graph drawn", param)
		}
		b.safe("the API page by " + param + "=")
	}
	// Both: name= is the UI's own and wins.
	b.open(srv.URL, "/api", url.Values{"name": {fixture.API}, "api": {"nope GET /"}})
	b.waitPage("api")
	if h := uiEval[string](b, `document.getElementById('api-name').textContent`); h != fixture.API {
		t.Errorf("with name= and api=: heading %q, want %q", h, fixture.API)
	}
	b.safe("the API page by name= and api=")
}

// The incident timeline's axis labels each a distinct instant, and each
// sits where that instant is on the chart: the scale is worked out from
// the bar of an incident (its hot minutes run from start to end) and the
// incident's times from REST. Over 10:22–10:24 the only incident is the
// rollout's last (10:22–10:26, open): seven labels spaced evenly over it
// and its margins, cut to the minute, read 10:21, 10:22, 10:23, 10:24,
// 10:24, 10:25, 10:26, each up to a minute off its place.
func TestBrowserIncidentTimelineAxis(t *testing.T) {
	b := newUIBrowser(t)
	st := uiStore(t)
	srv := serve(t, st, uiConfig())
	day := fixture.Start.Truncate(24 * time.Hour)
	for _, r := range [][2]time.Time{{fixture.Start, fixture.End}, {day.Add(10*time.Hour + 22*time.Minute), day.Add(10*time.Hour + 24*time.Minute)}} {
		q := url.Values{"from": {r[0].Format(time.RFC3339)}, "to": {r[1].Format(time.RFC3339)}}
		var list struct{ Incidents []analysis.IncidentDoc }
		uiGetJSON(t, srv, "/api/v1/incidents?"+q.Encode(), &list)
		if len(list.Incidents) == 0 {
			t.Fatalf("no incident over %v", r)
		}
		b.do("opening the incidents", chromedp.Navigate(srv.URL+"/#/incidents?"+q.Encode()))
		b.waitPage("incidents")
		type bar struct {
			Href  string  `json:"href"`
			X     float64 `json:"x"`
			Width float64 `json:"width"`
		}
		bars := uiEval[[]bar](b, `[...document.querySelectorAll('[data-chart="incidents"] svg a')].map((a) => {
			const r = a.querySelector('rect.hot');
			return {href: a.getAttribute('href'), x: r.x.baseVal.value, width: r.width.baseVal.value};
		})`)
		// The scale from the widest bar: x(start) and x(end).
		var ref *analysis.IncidentDoc
		var refBar bar
		for _, br := range bars {
			for i, in := range list.Incidents {
				if strings.Contains(br.Href, "/incidents/"+in.ID) && br.Width > refBar.Width {
					ref, refBar = &list.Incidents[i], br
				}
			}
		}
		if ref == nil || refBar.Width <= 3 {
			t.Fatalf("over %v: no incident bar to take the scale from: %+v", r, bars)
		}
		pxPerMs := refBar.Width / float64(ref.End.Sub(ref.Start).Milliseconds())
		type label struct {
			Text string  `json:"text"`
			X    float64 `json:"x"`
		}
		labels := uiEval[[]label](b, `[...document.querySelectorAll('[data-chart="incidents"] svg .axis text')].map((t) => ({text: t.textContent, x: t.x.baseVal[0].value}))`)
		if len(labels) < 2 {
			t.Errorf("over %v: %d axis labels: %+v", r, len(labels), labels)
		}
		seen := map[string]bool{}
		for _, l := range labels {
			if seen[l.Text] {
				t.Errorf("over %v: the axis repeats %q: %+v", r, l.Text, labels)
			}
			seen[l.Text] = true
			at, err := time.Parse("15:04", l.Text)
			if err != nil {
				t.Errorf("over %v: axis label %q is not HH:MM", r, l.Text)
				continue
			}
			at = day.Add(time.Duration(at.Hour())*time.Hour + time.Duration(at.Minute())*time.Minute)
			want := refBar.X + float64(at.Sub(ref.Start).Milliseconds())*pxPerMs
			if math.Abs(l.X-want) > 0.5 {
				t.Errorf("over %v: the label %s is at x %.1f, where %s is %.1f", r, l.Text, l.X, l.Text, want)
			}
		}
		b.safe("the incident timeline")
	}
}

// dagLabelsJS reads the call graph's drawn edge labels and node boxes in
// client coordinates, with the distance from each label's box to its
// edge's line (sampled every 2 px along the path).
const dagLabelsJS = `(() => {
	const box = (el) => { const r = el.getBoundingClientRect(); return {l: r.left, t: r.top, r: r.right, b: r.bottom}; };
	const nodes = [...document.querySelectorAll('.dag svg g.node')].map((n) => ({name: n.dataset.node, box: box(n.querySelector('rect'))}));
	const labels = [...document.querySelectorAll('.dag svg g.edge')].filter((e) => e.querySelector('text')).map((e) => {
		const t = e.querySelector('text'), p = e.querySelector('path.line'), b = box(t);
		const m = p.getScreenCTM(), len = p.getTotalLength();
		let dist = Infinity;
		for (let s = 0; s <= len; s += 2) {
			const q = new DOMPoint(p.getPointAtLength(s).x, p.getPointAtLength(s).y).matrixTransform(m);
			const dx = Math.max(b.l - q.x, 0, q.x - b.r), dy = Math.max(b.t - q.y, 0, q.y - b.b);
			dist = Math.min(dist, Math.hypot(dx, dy));
		}
		return {edge: e.dataset.from + ' -> ' + e.dataset.to, text: t.textContent, box: b, dist, back: e.classList.contains('back')};
	});
	// Points of a forward edge's line inside a node's box (1 px in).
	const under = [];
	for (const e of document.querySelectorAll('.dag svg g.edge:not(.back)')) {
		const p = e.querySelector('path.line'), m = p.getScreenCTM(), len = p.getTotalLength();
		for (let s = 0; s <= len; s += 2) {
			const q = new DOMPoint(p.getPointAtLength(s).x, p.getPointAtLength(s).y).matrixTransform(m);
			const n = nodes.find((n) => q.x > n.box.l + 1 && q.x < n.box.r - 1 && q.y > n.box.t + 1 && q.y < n.box.b - 1);
			if (n) { under.push(e.dataset.from + ' -> ' + e.dataset.to + ' under ' + n.name); break; }
		}
	}
	return {nodes, labels, under};
})()`

type dagBox struct{ L, T, R, B float64 }

func (a dagBox) overlaps(b dagBox) bool { return a.L < b.R && b.L < a.R && a.T < b.B && b.T < a.B }

type dagDrawn struct {
	Nodes []struct {
		Name string
		Box  dagBox
	}
	Labels []struct {
		Edge, Text string
		Box        dagBox
		Dist       float64
		Back       bool
	}
	Under []string
}

// checkDAGLabels: every edge label is clear of every node and of the other
// labels, and close to its own line (but a back edge's, which is below
// every node); no line of a forward edge passes under a node.
func checkDAGLabels(t *testing.T, where string, d dagDrawn) {
	t.Helper()
	for _, u := range d.Under {
		t.Errorf("%s: the line of %s", where, u)
	}
	for i, l := range d.Labels {
		if l.Box.R-l.Box.L <= 0 || l.Box.B-l.Box.T <= 0 {
			t.Errorf("%s: the label %q of %s has no box: %+v", where, l.Text, l.Edge, l.Box)
		}
		for _, n := range d.Nodes {
			if l.Box.overlaps(n.Box) {
				t.Errorf("%s: the label %q of %s %+v is under the node %q %+v", where, l.Text, l.Edge, l.Box, n.Name, n.Box)
			}
		}
		for _, o := range d.Labels[i+1:] {
			if l.Box.overlaps(o.Box) {
				t.Errorf("%s: the labels %q of %s %+v and %q of %s %+v overlap", where, l.Text, l.Edge, l.Box, o.Text, o.Edge, o.Box)
			}
		}
		if l.Dist > 12 && !l.Back {
			t.Errorf("%s: the label %q of %s is %.1f px from its line", where, l.Text, l.Edge, l.Dist)
		}
	}
}

// An edge that skips a layer of the call graph (a calls b and c, b calls
// c: a, b and c in one row) had its label at its middle, under b; the
// labels of a → b and b → c stay where they were.
func TestBrowserDAGEdgeLabelsClearOfNodes(t *testing.T) {
	b := newUIBrowser(t)
	naive := sim.Policy{Retry: sim.RetryNaive, Retries: 1, ResendAttr: true}
	res, err := sim.Run(sim.Scenario{
		Services: []sim.Service{
			{Name: "a", Operation: "GET /a", Policy: naive, Calls: []sim.Edge{{To: "b"}, {To: "c"}}},
			{Name: "b", Operation: "GET /b", Policy: naive, Calls: []sim.Edge{{To: "c"}}},
			{Name: "c", Operation: "GET /c", Policy: naive},
		},
		Root: "a", Traces: 60, Seed: 5, Start: fixture.Start, Spacing: time.Second,
		Faults: []sim.Fault{{Service: "c", Rate: 0.5, Persistent: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fixture.Load(t, st, fixture.Traces(res))
	srv := serve(t, st, uiConfig())

	var g struct{ Edges []analysis.GraphEdge }
	uiGetJSON(t, srv, "/api/v1/graph?api="+url.QueryEscape("a GET /a")+"&"+uiRange(), &g)
	var want []string
	for _, e := range g.Edges {
		if e.Retried > 0 || e.FailOpen {
			want = append(want, e.From.Service+" "+e.From.Operation+" -> "+e.To.Service+" "+e.To.Operation)
		}
	}
	slices.Sort(want)
	if !slices.Equal(want, []string{"a GET /a -> b GET /b", "a GET /a -> c GET /c", "b GET /b -> c GET /c"}) {
		t.Fatalf("retried edges %q: the scenario did not come out as meant", want)
	}
	b.open(srv.URL, "/api", url.Values{"name": {"a GET /a"}})
	b.waitPage("api")
	d := uiEval[dagDrawn](b, dagLabelsJS)
	var drawn []string
	for _, l := range d.Labels {
		drawn = append(drawn, l.Edge)
	}
	slices.Sort(drawn)
	if !slices.Equal(drawn, want) {
		t.Errorf("labelled edges %q, want the retried and fail-open ones %q", drawn, want)
	}
	checkDAGLabels(t, "a, b, c", d)
	b.safe("the call graph a, b, c")
}

// dagTestGraph is a call graph drawn by the UI's renderDAG in the page:
// a root fanning out to three nodes of which the middle one calls itself
// (its label above it, under the node above), edges skipping one and two
// layers, labels wider than the gap between columns, a fail-open edge and
// a cycle.
const dagTestGraph = `(() => {
	const n = (svc, requests, failed) => ({service: svc, operation: 'GET /' + svc, requests, failed});
	const e = (from, to, calls, attempts, retried, failOpen) => ({from: {service: from, operation: 'GET /' + from}, to: {service: to, operation: 'GET /' + to},
		calls, attempts, retried_calls: retried, failed_calls: retried, max_attempts: retried ? 3 : 1, retry_enabled: retried > 0,
		suppressed_calls: 0, fail_open: !!failOpen, fail_open_source: failOpen ? 'declared' : 'default'});
	return {api: 'r GET /r', nodes: [n('r', 1000, 10), n('a', 1000, 0), n('b', 1000, 5), n('c', 1000, 0), n('d', 1000, 0), n('e', 1000, 0), n('f', 1000, 0), n('g', 1000, 100)],
		edges: [e('r', 'a', 1000, 2470, 123456), e('r', 'b', 1000, 1500, 500), e('r', 'c', 1000, 1000, 0), e('a', 'd', 1000, 1000, 0),
			e('b', 'd', 1000, 2000, 99999), e('c', 'd', 1000, 1000, 0), e('r', 'd', 1000, 1800, 800), e('b', 'b', 1000, 1300, 300),
			e('a', 'e', 1000, 1000, 0), e('e', 'f', 1000, 1000, 0), e('r', 'f', 1000, 3000, 2000), e('c', 'g', 1000, 1000, 0, true),
			e('d', 'a', 10, 20, 10)],
		owners: [{service: 'b', operation: 'GET /b', owned_failures: 5}]};
})()`

// The call graph's labels on a graph made to crowd them, drawn by the UI's
// own renderDAG in the page (a module import, as the UI makes).
func TestBrowserDAGEdgeLabelsCrowded(t *testing.T) {
	b := newUIBrowser(t)
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := serve(t, st, uiConfig())
	b.open(srv.URL, "/", nil)
	b.waitPage("fleet")
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`import('/js/dag.js').then((m) => {
		const g = `+dagTestGraph+`;
		document.getElementById('app').replaceChildren(m.renderDAG(g, {}).el);
		return document.querySelectorAll('.dag svg g.node').length;
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fatal("drawing the test graph", err)
	}
	if n != 8 {
		t.Fatalf("%d nodes drawn, want 8", n)
	}
	d := uiEval[dagDrawn](b, dagLabelsJS)
	var drawn []string
	for _, l := range d.Labels {
		drawn = append(drawn, l.Edge+" "+l.Text)
	}
	slices.Sort(drawn)
	want := []string{"b GET /b -> b GET /b ↻ 300 · ×1.30", "b GET /b -> d GET /d ↻ 99,999 · ×2.00", "c GET /c -> g GET /g fail-open",
		"d GET /d -> a GET /a ↻ 10 · ×2.00", "r GET /r -> a GET /a ↻ 123,456 · ×2.47", "r GET /r -> b GET /b ↻ 500 · ×1.50",
		"r GET /r -> d GET /d ↻ 800 · ×1.80", "r GET /r -> f GET /f ↻ 2,000 · ×3.00"}
	if !slices.Equal(drawn, want) {
		t.Errorf("labels %q, want %q", drawn, want)
	}
	checkDAGLabels(t, "the crowded graph", d)
	b.safe("the crowded graph")
}

// The fleet's mean of the APIs' max radius and an API's mean radius per
// trace are shown under names of their own. Over the rollout the one API's
// max radius is 2, so the fleet's mean of the APIs' max radius is 2, while
// the API's mean radius over its failed traces (radius 1 in two phases, 2
// in one) lies between 1 and 2: one "Mean radius" above the other read as
// the same figure, twice different.
func TestBrowserFleetMeanOfMaxRadiusNamedApart(t *testing.T) {
	b := newUIBrowser(t)
	st := uiStore(t)
	srv := serve(t, st, uiConfig())
	var apis struct{ APIs []analysis.APIDoc }
	uiGetJSON(t, srv, "/api/v1/apis?"+uiRange(), &apis)
	if len(apis.APIs) != 1 || apis.APIs[0].MaxRadius != 2 || !(apis.APIs[0].MeanRadius > 1 && apis.APIs[0].MeanRadius < 2) {
		t.Fatalf("apis %+v: want one, max radius 2, mean radius strictly between 1 and 2", apis.APIs)
	}
	a := apis.APIs[0]
	labelsJS := `[...document.querySelectorAll('#app .card')].map((c) => [c.dataset.field, c.querySelector('.label').textContent])`
	cardLabel := func(field string) string {
		for _, c := range uiEval[[][2]string](b, labelsJS) {
			if c[0] == field {
				return c[1]
			}
		}
		return ""
	}

	b.open(srv.URL, "/", nil)
	b.waitPage("fleet")
	cards := uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('fleet-cards'))`)
	uiShows(t, "the fleet's mean of the APIs' max radius", cards["mean_max_radius"], 2, "")
	if l := cardLabel("mean_max_radius"); l != "Mean of the APIs\u2019 max radius" {
		t.Errorf("the fleet's card is labelled %q", l)
	}
	heads := uiEval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('#apis thead th')].map((th, i) => [
		document.querySelector('#apis tbody tr').cells[i].dataset.field || '', th.textContent.replace(/[▲▼]/g, '').trim()]))`)
	if h := heads["mean_radius"]; h != "Mean radius / trace" {
		t.Errorf("the APIs' mean radius column is headed %q", h)
	}
	rows := uiTableRows(b, "#apis")
	uiShows(t, "the API's mean radius per trace", rows[0].Fields["mean_radius"], a.MeanRadius, "")
	b.safe("fleet")

	b.open(srv.URL, "/api", url.Values{"name": {fixture.API}})
	b.waitPage("api")
	cards = uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('api-cards'))`)
	uiShows(t, "the API page's mean radius per trace", cards["mean_radius"], a.MeanRadius, "")
	if l := cardLabel("mean_radius"); l != "Mean radius per trace" {
		t.Errorf("the API page's card is labelled %q", l)
	}
	b.safe("API page")
}
