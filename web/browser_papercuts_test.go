package web_test

// Browser tests of the UI paper cuts of issue 27 (item 8): the API page
// by ?api= as well as ?name=, the incident timeline's axis, the call
// graph's edge labels clear of the nodes, and the fleet's mean of the
// APIs' max radius named apart from the per-trace mean radius.

import (
	"math"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/web"
)

// #/api?api=X opens the page of X, as ?name=X does: REST takes api=, and
// a link written by hand after it must not say "No API named".
func TestBrowserAPIPageByAPIParam(t *testing.T) {
	b := newUIBrowser(t)
	st := uiStore(t)
	srv := httptest.NewServer(web.Handler(query.New(st), uiConfig()))
	t.Cleanup(srv.Close)
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
	srv := httptest.NewServer(web.Handler(query.New(st), uiConfig()))
	t.Cleanup(srv.Close)
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
