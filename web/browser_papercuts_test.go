package web_test

// Browser tests of the UI paper cuts of issue 27 (item 8): the API page
// by ?api= as well as ?name=, the incident timeline's axis, the call
// graph's edge labels clear of the nodes, and the fleet's mean of the
// APIs' max radius named apart from the per-trace mean radius.

import (
	"net/http/httptest"
	"net/url"
	"testing"

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
