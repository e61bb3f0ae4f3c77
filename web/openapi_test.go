package web_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// The OpenAPI document matches the handlers: every route the router
// answers is in it, and every documented route answers (with the sample
// parameters its document asks for).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		var doc struct {
			OpenAPI string
			Paths   map[string]map[string]struct {
				OperationID string `json:"operationId"`
				Parameters  []struct {
					Name, In string
					Required bool
				}
				Responses map[string]any
			}
		}
		getJSON(t, srv, "/api/v1/openapi.json", 200, &doc)
		if !strings.HasPrefix(doc.OpenAPI, "3.") {
			t.Fatalf("openapi %q", doc.OpenAPI)
		}
		// Every route of the router is documented.
		h := web.Handler(query.New(st), web.Config{})
		routes := 0
		err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			if !strings.HasPrefix(route, "/api/v1/") {
				return nil // the UI
			}
			routes++
			if _, ok := doc.Paths[route][strings.ToLower(method)]; !ok {
				t.Errorf("%s %s is not in the OpenAPI document", method, route)
			}
			return nil
		})
		if err != nil || routes < 12 {
			t.Fatalf("walked %d routes: %v", routes, err)
		}
		// Every documented route answers.
		var list struct{ Incidents []struct{ ID string } }
		getJSON(t, srv, "/api/v1/incidents"+q("from", at(0), "to", at(30)), 200, &list)
		_, ref := rollout()
		samples := map[string]string{"api": fixture.API, "from": at(0), "to": at(30), "max_radius": "5",
			"id": list.Incidents[0].ID, "traceID": ref.Incidents[0].ExampleTraces[0]}
		for path, ops := range doc.Paths {
			for method, op := range ops {
				p := path
				v := []string{}
				for _, prm := range op.Parameters {
					switch {
					case prm.In == "path":
						p = strings.ReplaceAll(p, "{"+prm.Name+"}", samples[prm.Name])
					case prm.Required || samples[prm.Name] != "" && (prm.Name == "from" || prm.Name == "to"):
						v = append(v, prm.Name, samples[prm.Name])
					}
				}
				if op.OperationID == "gate" {
					v = append(v, "max_radius", "5")
				}
				if strings.Contains(p, "{") {
					t.Errorf("%s %s: no sample for a path parameter", method, path)
					continue
				}
				if p == "/healthz" || p == "/readyz" || p == "/metrics" {
					continue // served beside the API (internal/app tests them)
				}
				req, _ := http.NewRequest(strings.ToUpper(method), srv.URL+p+q(v...), nil)
				if method == "post" {
					body := `{"chain":["A","B"],"fail":["B"]}`
					if op.OperationID == "gateWebhook" {
						body = `{"name":"route","namespace":"prod","phase":"Progressing","metadata":{"api":"` + fixture.API +
							`","max_radius":"5","from":"` + at(0) + `","to":"` + at(30) + `"}}`
					}
					req, _ = http.NewRequest("POST", srv.URL+p+q(v...), strings.NewReader(body))
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s %s: %d", method, p, resp.StatusCode)
				}
				if _, ok := op.Responses["200"]; !ok {
					t.Errorf("%s %s documents no 200", method, path)
				}
			}
		}
	})
}

// Bearer tokens: several allowed, the others refused with 401; the
// OpenAPI document stays open; CORS is off unless origins are given.
func TestAuthCORSGzip(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{Tokens: []string{"alpha", "beta"}})
		for _, c := range []struct {
			token  string
			status int
		}{{"", 401}, {"gamma", 401}, {"alph", 401}, {"alpha", 200}, {"beta", 200}} {
			code, b := get(t, srv, "/api/v1/fleet", c.token)
			if code != c.status {
				t.Errorf("token %q: %d %s, want %d", c.token, code, b, c.status)
			}
			if code == 401 && !strings.Contains(string(b), `"error"`) {
				t.Errorf("401 without a JSON error: %s", b)
			}
		}
		// The scheme is case-insensitive (RFC 7235), the token is not.
		for h, status := range map[string]int{"bearer alpha": 200, "BEARER beta": 200, "BeArEr alpha": 200, "Bearer  alpha ": 200,
			"Bearer ALPHA": 401, "Basic alpha": 401, "Bearer": 401, "Bearer ": 401, "Beareralpha": 401, "alpha": 401} {
			req, _ := http.NewRequest("GET", srv.URL+"/api/v1/fleet", nil)
			req.Header.Set("Authorization", h)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != status {
				t.Errorf("Authorization: %q: %d, want %d", h, resp.StatusCode, status)
			}
		}
		if code, _ := get(t, srv, "/api/v1/openapi.json", ""); code != 200 {
			t.Errorf("openapi.json needs a token: %d", code)
		}
		if code, _ := get(t, srv, "/", ""); code != 200 {
			t.Errorf("the UI's page needs a token: %d", code)
		}

		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/fleet", nil)
		req.Header.Set("Authorization", "Bearer alpha")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req) // no transparent gunzip
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Error("CORS answered without configured origins")
		}
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("not gzipped: %v", resp.Header)
		}

		cors := serve(t, st, web.Config{CORSOrigins: []string{"https://grafana.example"}})
		req, _ = http.NewRequest("OPTIONS", cors.URL+"/api/v1/fleet", nil)
		req.Header.Set("Origin", "https://grafana.example")
		resp, err = cors.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://grafana.example" {
			t.Errorf("preflight from an allowed origin: %d %v", resp.StatusCode, resp.Header)
		}
	})
}

// Every field an answer holds is in its OpenAPI schema: the documents'
// schemas are read off the Go types, so a field added to a document is
// documented with it.
func TestOpenAPIDescribesAnswers(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		var doc struct {
			Components struct{ Schemas map[string]any }
		}
		getJSON(t, srv, "/api/v1/openapi.json", 200, &doc)
		var list struct{ Incidents []struct{ ID string } }
		getJSON(t, srv, "/api/v1/incidents"+q("from", at(0), "to", at(30)), 200, &list)
		if len(list.Incidents) == 0 {
			t.Fatal("no incident to describe")
		}
		checked := 0
		for path, schema := range map[string]string{
			"/api/v1/apis" + q("from", at(0), "to", at(30)):      "APIList",
			"/api/v1/incidents" + q("from", at(0), "to", at(30)): "IncidentList",
			"/api/v1/incidents/" + list.Incidents[0].ID:          "Incident",
			"/api/v1/services" + q("from", at(0), "to", at(30)):  "Services",
			"/api/v1/gate" + q("api", fixture.API, "from", at(0), "to", at(30), "service", "route", "baseline", "1.0", "candidate", "2.0",
				"max_radius_increase", "0", "always_200", "true"): "GateDecision",
		} {
			var answer any
			getJSON(t, srv, path, 200, &answer)
			checked += undocumented(t, path, answer, doc.Components.Schemas[schema], doc.Components.Schemas)
		}
		// Objects with fields: the API rows, their owners, incidents and
		// their services, claims, the gate's sides.
		if checked < 50 {
			t.Fatalf("checked %d fields: the answers are not the fixture's", checked)
		}
	})
}

// The gate's documented parameters are the ones it takes (a parameter it
// does not know is a 400), and its decision's values are listed.
func TestOpenAPIGate(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		var doc struct {
			Paths map[string]map[string]struct {
				Parameters []struct{ Name string }
			}
			Components struct {
				Schemas map[string]struct {
					Required   []string
					Properties map[string]struct {
						Enum []string
					}
				}
			}
		}
		getJSON(t, srv, "/api/v1/openapi.json", 200, &doc)
		var names []string
		for _, p := range doc.Paths["/api/v1/gate"]["get"].Parameters {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		want := slices.Sorted(slices.Values(query.GateParams))
		if !slices.Equal(names, want) {
			t.Errorf("GET /api/v1/gate documents %v, takes %v", names, want)
		}
		d := doc.Components.Schemas["GateDecision"]
		if e := d.Properties["decision"].Enum; !slices.Equal(e, []string{"pass", "fail", "undecided"}) || !slices.Contains(d.Required, "decision") {
			t.Errorf("GateDecision: decision %v, required %v", e, d.Required)
		}
	})
}

// undocumented reports every field of v its schema does not list, and
// returns how many fields it checked.
func undocumented(t *testing.T, at string, v, schema any, schemas map[string]any) int {
	t.Helper()
	s, _ := schema.(map[string]any)
	if ref, ok := s["$ref"].(string); ok {
		s, _ = schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	if s == nil {
		t.Errorf("%s: no schema", at)
		return 0
	}
	n := 0
	switch v := v.(type) {
	case map[string]any:
		props, ok := s["properties"].(map[string]any)
		if !ok {
			return 0 // a free-form object (a map)
		}
		for k, fv := range v {
			n++
			p, ok := props[k]
			if !ok {
				t.Errorf("%s: field %q is not in the schema", at, k)
				continue
			}
			n += undocumented(t, at+"."+k, fv, p, schemas)
		}
	case []any:
		for i, e := range v {
			n += undocumented(t, at+"["+strconv.Itoa(i)+"]", e, s["items"], schemas)
		}
	}
	return n
}
