package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// rollout is the simulated rollout and its analyze document, built once.
var rollout = sync.OnceValues(func() ([][]graph.Span, *analysis.Document) {
	traces, err := fixture.Rollout("")
	if err != nil {
		panic(err)
	}
	doc, err := fixture.Analyze(traces, store.Query{})
	if err != nil {
		panic(err)
	}
	return traces, doc
})

// stores opens each store the handlers are tested against, loaded with
// the rollout: the embedded one, and ClickHouse when the environment names
// a server.
func stores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	traces, _ := rollout()
	storesWith(t, traces, fn)
}

// storesWith runs fn against each store loaded with traces.
func storesWith(t *testing.T, traces [][]graph.Span, fn func(t *testing.T, st store.Store)) {
	open := map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"clickhouse": func(t *testing.T) store.Store {
			st, err := storeurl.Open(context.Background(), storeurl.Options{URL: chtest.FreshDSN(t), Window: fixture.Window})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for _, name := range []string{"sqlite", "clickhouse"} {
		t.Run(name, func(t *testing.T) {
			st := open[name](t)
			t.Cleanup(func() { st.Close() })
			fixture.Load(t, st, traces)
			fn(t, st)
		})
	}
}

func serve(t *testing.T, st store.Store, cfg web.Config) *httptest.Server {
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return fixture.End }
	}
	srv := httptest.NewServer(web.Handler(query.New(st), cfg))
	t.Cleanup(srv.Close)
	return srv
}

// get returns the status and body of GET path.
func get(t *testing.T, srv *httptest.Server, path, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// getJSON GETs path, wants status, and decodes the body into v.
func getJSON(t *testing.T, srv *httptest.Server, path string, status int, v any) {
	t.Helper()
	code, b := get(t, srv, path, "")
	if code != status {
		t.Fatalf("GET %s: %d %s, want %d", path, code, b, status)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// same compares two values through their JSON.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	var gv, wv any
	json.Unmarshal(g, &gv)
	json.Unmarshal(w, &wv)
	if !reflect.DeepEqual(gv, wv) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func at(minute int) string {
	return fixture.Start.Add(time.Duration(minute) * time.Minute).Format(time.RFC3339)
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}

// Every endpoint against both stores: the figures equal analyze's.
func TestEndpoints(t *testing.T) {
	traces, doc := rollout()
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{TraceLinkTemplate: "https://jaeger.example/trace/{trace_id}"})

		var apis struct{ APIs []analysis.APIDoc }
		getJSON(t, srv, "/api/v1/apis", 200, &apis) // default: the last hour before now (10:30)
		same(t, "apis", apis.APIs, doc.APIs)

		var fleet struct {
			Fleet         analysis.Fleet
			Spans, Traces int64
		}
		getJSON(t, srv, "/api/v1/fleet"+q("from", at(0), "to", at(30)), 200, &fleet)
		same(t, "fleet", fleet.Fleet, doc.Fleet)
		if fleet.Spans != doc.Spans || fleet.Traces != 1800 {
			t.Errorf("fleet spans %d traces %d, want %d 1800", fleet.Spans, fleet.Traces, doc.Spans)
		}

		var svcs struct {
			Services []analysis.ServiceDoc
			Edges    []analysis.EdgeDoc
		}
		getJSON(t, srv, "/api/v1/services"+q("from", "1772445600", "to", "1772447400"), 200, &svcs) // unix seconds
		same(t, "services", svcs.Services, doc.Services)
		same(t, "edges", svcs.Edges, doc.Edges)

		// The radius per phase: each step's figures are analyze's over
		// that phase, and the hand-derived radius.
		var series query.Series
		getJSON(t, srv, "/api/v1/radius"+q("api", fixture.API, "from", at(0), "to", at(30), "step", "10m"), 200, &series)
		if len(series.Points) != 3 || series.Step != 600 {
			t.Fatalf("series: %+v", series)
		}
		for i, p := range series.Points {
			d := fixture.MustAnalyze(t, traces, store.Query{From: fixture.Start.Add(time.Duration(i) * fixture.Window).UnixNano(),
				To: fixture.Start.Add(time.Duration(i+1) * fixture.Window).UnixNano()})
			a := d.APIs[0]
			if p.Traces != 600 || p.MaxRadius != fixture.Phases[i].Radius || p.MeanRadius != a.MeanRadius ||
				p.FailedTraces != a.FailedTraces || p.MaxAmplification != a.MaxAmplification || p.Suppressed != a.SuppressedRetries {
				t.Errorf("phase %d point %+v; analyze says %+v", i+1, p, a)
			}
		}
		var minutes query.Series
		getJSON(t, srv, "/api/v1/radius"+q("api", fixture.API, "from", at(0), "to", at(30), "step", "60"), 200, &minutes)
		if len(minutes.Points) != 30 || minutes.Points[3].Time.Format("15:04") != "10:03" {
			t.Errorf("a minute step gives %d points", len(minutes.Points))
		}

		// The call graph: the learned graph of the windows, and the owners.
		var g struct {
			API    string
			Nodes  []analysis.GraphNode
			Edges  []analysis.GraphEdge
			Owners []analysis.OwnerDoc
		}
		getJSON(t, srv, "/api/v1/graph"+q("api", fixture.API, "from", at(0), "to", at(30)), 200, &g)
		names := []string{}
		for _, n := range g.Nodes {
			names = append(names, n.Service+" "+n.Operation)
		}
		if want := "ads GET /ads,driver GET /driver,front GET /dispatch,redis SELECT,route GET /route"; strings.Join(names, ",") != want {
			t.Errorf("graph nodes %v, want %s", names, want)
		}
		same(t, "graph owners", g.Owners, doc.APIs[0].Owners)
		found := false
		for _, e := range g.Edges {
			if e.From.Service == "route" && e.To.Service == "driver" {
				// The naive phase's router tried the driver three times.
				found = e.MaxAttempts == 3 && e.RetryEnabled && !e.FailOpen && e.Failed > 0
				if !found {
					t.Errorf("route→driver: %+v", e)
				}
			}
		}
		if !found {
			t.Error("no route→driver edge")
		}

		// Incidents: the three of the rollout, newest first, and each one
		// whole, equal to analyze's.
		var list struct{ Incidents []analysis.IncidentDoc }
		getJSON(t, srv, "/api/v1/incidents"+q("from", at(0), "to", at(30)), 200, &list)
		if len(list.Incidents) != 3 {
			t.Fatalf("%d incidents, want 3", len(list.Incidents))
		}
		for i, in := range list.Incidents {
			want := doc.Incidents[2-i]
			want.ExampleTraces = []string{} // the list leaves them to the incident
			same(t, "listed incident", in, want)
			var one analysis.IncidentDoc
			getJSON(t, srv, "/api/v1/incidents/"+in.ID, 200, &one)
			same(t, "incident "+in.ID, one, doc.Incidents[2-i])
		}
		// A range that catches only the end of the second incident finds it
		// whole, with the same id.
		getJSON(t, srv, "/api/v1/incidents"+q("from", at(15), "to", at(17)), 200, &list)
		if len(list.Incidents) != 1 || list.Incidents[0].ID != doc.Incidents[1].ID || list.Incidents[0].Start.Format("15:04") != "10:12" {
			t.Errorf("incidents of 10:15–10:17: %+v", list.Incidents)
		}
		getJSON(t, srv, "/api/v1/incidents"+q("from", at(0), "to", at(30), "limit", "1", "api", fixture.API), 200, &list)
		if len(list.Incidents) != 1 || list.Incidents[0].ID != doc.Incidents[2].ID {
			t.Errorf("limit 1: %+v", list.Incidents)
		}

		// A trace, from its spans and record.
		id := doc.Incidents[1].ExampleTraces[0]
		var tv struct {
			query.TraceView
			Link string
		}
		getJSON(t, srv, "/api/v1/traces/"+id, 200, &tv)
		if tv.TraceID != id || tv.API != fixture.API || tv.Pending || len(tv.Events) == 0 || tv.Link != "https://jaeger.example/trace/"+id {
			t.Errorf("trace %s: %+v", id, tv)
		}
		if tv.Events[0].Owner != "driver GET /driver" || tv.Events[0].Radius != 2 {
			t.Errorf("trace %s: widest event %+v, want the driver's, radius 2", id, tv.Events[0])
		}
		spans := 0
		for _, tr := range traces {
			if tr[0].TraceID.String() == id {
				spans = len(tr)
			}
		}
		if tv.Spans != spans || spans == 0 {
			t.Errorf("trace %s: %d spans, want %d", id, tv.Spans, spans)
		}

		// What-if on a chain: by formula, R = 1 naive: 1, 2, 4.
		resp, err := srv.Client().Post(srv.URL+"/api/v1/whatif", "application/json",
			strings.NewReader(`{"chain":["A","B","C"],"fail":["C"],"retries":1,"policy":"naive"}`))
		if err != nil {
			t.Fatal(err)
		}
		var wi query.WhatIfAnswer
		json.NewDecoder(resp.Body).Decode(&wi)
		resp.Body.Close()
		if resp.StatusCode != 200 || wi.Requests["A"] != 1 || wi.Requests["B"] != 2 || wi.Requests["C"] != 4 {
			t.Errorf("whatif: %d %+v", resp.StatusCode, wi)
		}
		// On the learned graph of the naive phase.
		resp, err = srv.Client().Post(srv.URL+"/api/v1/whatif"+q("from", at(10), "to", at(20)), "application/json",
			strings.NewReader(`{"api":"front GET /dispatch","fail":["driver"]}`))
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&wi)
		resp.Body.Close()
		// Observed retries: front 1, route 2 → driver 2 × 3 = 6 per request.
		if resp.StatusCode != 200 || wi.Requests["driver"] != 6 || wi.Requests["route"] != 2 {
			t.Errorf("whatif over the graph: %d %+v", resp.StatusCode, wi)
		}
	})
}

// Bad parameters are 400s with a message, unknown ids 404s, never a
// stack trace.
func TestErrors(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{MaxBodyBytes: 1024})
		for _, c := range []struct {
			path   string
			status int
			msg    string
		}{
			{"/api/v1/apis?from=yesterday", 400, "from"},
			{"/api/v1/apis" + q("from", at(10), "to", at(5)), 400, "must be after from"},
			{"/api/v1/radius", 400, "api: required"},
			{"/api/v1/radius" + q("api", fixture.API, "step", "30s"), 400, "step"},
			{"/api/v1/radius" + q("api", fixture.API, "step", "banana"), 400, "step"},
			{"/api/v1/radius" + q("api", fixture.API, "from", "1", "to", "1700000000", "step", "1m"), 400, "points"},
			{"/api/v1/graph" + q("api", "nope GET /"), 404, "nope"},
			{"/api/v1/graph", 400, "api"},
			{"/api/v1/incidents/29000000-abcdefabcdef", 404, "no incident"},
			{"/api/v1/incidents/not-an-id", 404, "not an incident id"},
			{"/api/v1/incidents?limit=-3", 400, "limit"},
			{"/api/v1/traces/0123", 400, "32 hex digits"},
			{"/api/v1/traces/0123456789abcdef0123456789abcdef", 404, "no trace"},
			{"/api/v1/nope", 404, "no such endpoint"},
			{"/api/v1/gate" + q("api", fixture.API), 400, "max_radius"},
			{"/api/v1/gate" + q("api", fixture.API, "max_radius", "x"), 400, "max_radius"},
			{"/api/v1/gate" + q("api", fixture.API, "max_radius_increase", "1"), 400, "needs a baseline"},
			{"/api/v1/gate" + q("api", fixture.API, "max_radius", "1", "baseline", "yesterday"), 400, "baseline"},
			{"/api/v1/gate" + q("api", fixture.API, "max_radius", "1", "baseline_version", "1.0", "candidate_version", "2.0"), 400, "service"},
			{"/api/v1/gate" + q("api", "nope GET /", "max_radius", "1", "from", at(0), "to", at(30)), 404, "no traces"},
		} {
			code, b := get(t, srv, c.path, "")
			var e struct{ Error string }
			if code != c.status || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, c.msg) {
				t.Errorf("GET %s: %d %s; want %d with %q", c.path, code, b, c.status, c.msg)
			}
		}
		// Whole messages, each said once.
		for path, msg := range map[string]string{
			"/api/v1/incidents/not-an-id":             `not found: "not-an-id" is not an incident id`,
			"/api/v1/incidents/29000000-abcdefabcdef": `not found: no incident 29000000-abcdefabcdef`,
			"/api/v1/incidents/x-abcdefabcdef":        `not found: "x-abcdefabcdef" is not an incident id`,
		} {
			code, b := get(t, srv, path, "")
			var e struct{ Error string }
			if code != 404 || json.Unmarshal(b, &e) != nil || e.Error != msg {
				t.Errorf("GET %s: %d %s; want 404 with exactly %q", path, code, b, msg)
			}
		}
		for _, c := range []struct {
			body   string
			status int
			msg    string
		}{
			{`{"chain":["A"],"fail":["A"],"policy":"nope"}`, 400, "policy"},
			{`{"chain":["A"]}`, 400, "fail"},
			{`{"chain":["A"],"fail":["A"],"extra":1}`, 400, "unknown field"},
			{`{"chain":[` + strings.Repeat(`"A",`, 400) + `"A"],"fail":["A"]}`, 413, "larger than"},
			{`not json`, 400, "body"},
		} {
			resp, err := srv.Client().Post(srv.URL+"/api/v1/whatif", "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct{ Error string }
			if resp.StatusCode != c.status || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, c.msg) {
				t.Errorf("POST whatif %.40s: %d %s; want %d with %q", c.body, resp.StatusCode, b, c.status, c.msg)
			}
		}
		code, _ := get(t, srv, "/api/v1/apis", "")
		if code != 200 {
			t.Errorf("without tokens the API is open: %d", code)
		}
	})
}
