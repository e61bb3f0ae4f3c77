package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stormradius/stormradius/internal/fixture"
)

// The API page of a known API over a range without its traces charts a
// series of zeros, and that of an API the store never saw says so; neither
// shows an error.
func TestBrowserQuietAndUnknownAPI(t *testing.T) {
	b := newUIBrowser(t)
	st := uiStore(t)
	srv := serve(t, st, uiConfig())
	open := func(api string) {
		v := url.Values{"name": {api}, "from": {"2026-03-02T12:00:00Z"}, "to": {"2026-03-02T13:00:00Z"}} // two hours after the rollout
		b.do("opening the API page of "+api, chromedp.Navigate(srv.URL+"/#/api?"+v.Encode()))
		b.waitPage("api")
		if errs := uiEval[[]string](b, `[...document.querySelectorAll('#app .error')].map((e) => e.textContent)`); len(errs) != 0 {
			t.Errorf("%s: the page shows errors %q", api, errs)
		}
	}
	open(fixture.API)
	rows := uiEval[[][]string](b, `[...document.querySelectorAll('#series tbody tr')].map((tr) => [...tr.cells].slice(1).map((c) => c.textContent.trim()))`)
	if len(rows) != 60 {
		t.Fatalf("the quiet hour's series has %d rows, want 60 minutes", len(rows))
	}
	for _, r := range rows {
		if strings.Join(r, " ") != "0 0 0 0 0 0 0" {
			t.Errorf("a step of the quiet hour shows %q", r)
		}
	}
	if n := uiEval[int](b, `document.querySelectorAll('#app .charts svg').length`); n != 2 {
		t.Errorf("the quiet hour draws %d charts, want 2", n)
	}
	expected404s(b, "/api/v1/graph?") // no call graph in the range: the page says so
	b.safe("a quiet API")

	open("nope GET /")
	if text := uiEval[string](b, `document.getElementById('app').textContent`); !strings.Contains(text, "No traces of this API in the store.") {
		t.Errorf("an unknown API's page does not say the store holds none of its traces:\n%s", text)
	}
	expected404s(b, "/api/v1/graph?", "/api/v1/radius?")
	b.safe("an unknown API")
}

// expected404s takes from the console problems the browser's own report of
// 404 answers to the given API paths, which the page shows as "nothing
// here", and leaves the rest for safe.
func expected404s(b *uiBrowser, paths ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.problems[:0]
	for _, p := range b.problems {
		expected := false
		for _, path := range paths {
			expected = expected || strings.Contains(p, path) && strings.Contains(p, "status of 404")
		}
		if !expected {
			kept = append(kept, p)
		}
	}
	b.problems = kept
}
