package web_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// The first and the last instant of int64 unix nanoseconds, and the
// nanoseconds just outside them.
const (
	firstInstant  = "1677-09-21T00:12:43.145224192Z"
	lastInstant   = "2262-04-11T23:47:16.854775807Z"
	beforeFirst   = "1677-09-21T00:12:43.145224191Z"
	afterLast     = "2262-04-11T23:47:16.854775808Z"
	rangeInErrors = firstInstant + " … " + lastInstant
)

// Times outside what int64 nanoseconds hold are 400s naming the parameter
// and the range, on every endpoint that takes a time; the widest range
// they allow answers exactly what a range around the data does.
func TestTimeBoundaries(t *testing.T) {
	_, doc := rollout()
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		ranged := []string{"/api/v1/apis", "/api/v1/fleet", "/api/v1/services", "/api/v1/incidents",
			"/api/v1/graph?api=" + strings.ReplaceAll(fixture.API, " ", "%20"),
			"/api/v1/radius?api=" + strings.ReplaceAll(fixture.API, " ", "%20"),
			"/api/v1/gate?max_radius=9&api=" + strings.ReplaceAll(fixture.API, " ", "%20")}
		for _, c := range []struct {
			params []string
			param  string // named in the error
		}{
			{[]string{"from", afterLast}, "from"},
			{[]string{"from", beforeFirst, "to", at(30)}, "from"},
			{[]string{"from", at(0), "to", afterLast}, "to"},
			{[]string{"to", beforeFirst}, "to"},
			// Echoed as 1678 and answered with everything, before.
			{[]string{"from", "2263-01-01T00:00:00Z"}, "from"},
			// Answered with nothing although data exists, before.
			{[]string{"from", "0001-01-01T00:00:00Z", "to", "9999-12-31T23:59:59Z"}, "from"},
			{[]string{"from", at(0), "to", "9999-12-31T23:59:59Z"}, "to"},
			{[]string{"from", "100000000000"}, "from"}, // unix seconds of the year 5138
			{[]string{"from", "9223372036.854775808"}, "from"},
			{[]string{"to", "now+2562047h"}, "to"}, // a valid Go duration, 2318
		} {
			for _, path := range ranged {
				p := path + strings.Replace(q(c.params...), "?", sep(path), 1)
				code, b := get(t, srv, p, "")
				var e struct{ Error string }
				if code != 400 || json.Unmarshal(b, &e) != nil || !strings.HasPrefix(e.Error, "bad request: "+c.param+": ") ||
					!strings.Contains(e.Error, "outside the range times can take ("+rangeInErrors+")") {
					t.Errorf("GET %s: %d %s; want 400 naming %s and the range", p, code, b, c.param)
				}
			}
			resp, err := srv.Client().Post(srv.URL+"/api/v1/whatif"+q(c.params...), "application/json",
				strings.NewReader(`{"api":"`+fixture.API+`","fail":["driver"]}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), c.param) {
				t.Errorf("POST whatif %v: %d %s", c.params, resp.StatusCode, b)
			}
		}

		// The gate's windows and its webhook's metadata too.
		gateAPI := "/api/v1/gate" + q("api", fixture.API, "max_radius_increase", "0")
		for _, c := range []struct{ param, value string }{
			{"baseline", at(0) + "/" + afterLast},
			{"baseline", beforeFirst + "/" + at(10)},
			{"candidate", "2263-01-01T00:00:00Z/2264-01-01T00:00:00Z"},
			{"candidate", "0001-01-01T00:00:00Z/" + at(30)},
		} {
			other := map[string]string{"baseline": "candidate", "candidate": "baseline"}[c.param]
			code, b := get(t, srv, gateAPI+"&"+q(c.param, c.value, other, at(0)+"/"+at(10))[1:], "")
			var e struct{ Error string }
			if code != 400 || json.Unmarshal(b, &e) != nil || !strings.HasPrefix(e.Error, "bad request: "+c.param+": ") || !strings.Contains(e.Error, rangeInErrors) {
				t.Errorf("gate %s=%s: %d %s", c.param, c.value, code, b)
			}
		}
		for _, meta := range []string{`"from":"` + afterLast + `"`, `"to":"2263-01-01T00:00:00Z"`, `"from":"100000000000"`} {
			resp, err := srv.Client().Post(srv.URL+"/api/v1/gate", "application/json", strings.NewReader(
				`{"name":"route","namespace":"prod","phase":"Progressing","metadata":{"api":"`+fixture.API+`","max_radius":"9",`+meta+`}}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), rangeInErrors) {
				t.Errorf("webhook %s: %d %s", meta, resp.StatusCode, b)
			}
		}

		// The widest range: the first and the last instant are taken, and
		// answer what the range of the data does.
		widest := q("from", firstInstant, "to", lastInstant)
		var apis struct {
			APIs     []analysis.APIDoc
			From, To string
		}
		getJSON(t, srv, "/api/v1/apis"+widest, 200, &apis)
		same(t, "apis over every instant", apis.APIs, doc.APIs)
		if apis.From != firstInstant || apis.To != lastInstant {
			t.Errorf("echoed %s – %s, want %s – %s", apis.From, apis.To, firstInstant, lastInstant)
		}
		var fleet struct {
			Fleet         analysis.Fleet
			Spans, Traces int64
		}
		getJSON(t, srv, "/api/v1/fleet"+widest, 200, &fleet)
		same(t, "fleet over every instant", fleet.Fleet, doc.Fleet)
		if fleet.Traces != 1800 || fleet.Spans != doc.Spans {
			t.Errorf("fleet over every instant: %d traces %d spans, want 1800 and %d", fleet.Traces, fleet.Spans, doc.Spans)
		}
		var svcs struct{ Services []analysis.ServiceDoc }
		getJSON(t, srv, "/api/v1/services"+widest, 200, &svcs)
		same(t, "services over every instant", svcs.Services, doc.Services)
		var list struct{ Incidents []analysis.IncidentDoc }
		getJSON(t, srv, "/api/v1/incidents"+widest, 200, &list)
		if len(list.Incidents) != 3 {
			t.Errorf("%d incidents over every instant, want the rollout's 3", len(list.Incidents))
		}
		var g, g30 query.GraphAnswer
		getJSON(t, srv, "/api/v1/graph"+widest+"&api="+strings.ReplaceAll(fixture.API, " ", "%20"), 200, &g)
		getJSON(t, srv, "/api/v1/graph"+q("from", at(0), "to", at(30), "api", fixture.API), 200, &g30)
		same(t, "graph over every instant", g, g30)

		// The series: the default step is a sixtieth of the range in whole
		// minutes, (2^64 − 1) ns / 60 = 307445734561825860 ns, that is
		// 5124095 whole minutes (9.7 years); the 584 years in 61 steps
		// from the first whole minute, every trace of the rollout in one
		// of them.
		var series query.Series
		getJSON(t, srv, "/api/v1/radius"+widest+"&api="+strings.ReplaceAll(fixture.API, " ", "%20"), 200, &series)
		var traces int64
		for _, p := range series.Points {
			traces += p.Traces
		}
		if series.Step != 5124095*60 || len(series.Points) != 61 || traces != 1800 ||
			series.Points[0].Time.Format(time.RFC3339) != "1677-09-21T00:13:00Z" {
			t.Errorf("series over every instant: step %d s, %d points, %d traces, from %v; want %d s, 61, 1800, 1677-09-21T00:13:00Z",
				series.Step, len(series.Points), traces, series.Points[0].Time, 5124095*60)
		}
		// The last steps, to the last instant: no step wraps around.
		getJSON(t, srv, "/api/v1/radius"+q("api", fixture.API, "from", "2262-04-11T20:00:00Z", "to", lastInstant, "step", "1h"), 200, &series)
		if len(series.Points) != 4 || series.Points[3].Time.Format(time.RFC3339) != "2262-04-11T23:00:00Z" {
			t.Errorf("the last hours: %+v", series.Points)
		}

		// The gate: every instant holds the three phases (max radius 2).
		var d gate.Decision
		getJSON(t, srv, "/api/v1/gate"+widest+"&always_200=true&max_radius=1&api="+strings.ReplaceAll(fixture.API, " ", "%20"), 200, &d)
		if d.Pass || d.Candidate.Traces != 1800 || d.Candidate.MaxRadius != 2 {
			t.Errorf("gate over every instant: %+v", d)
		}
		getJSON(t, srv, "/api/v1/gate"+q("api", fixture.API, "max_radius_increase", "0", "always_200", "true",
			"baseline", firstInstant+"/"+at(10), "candidate", at(20)+"/"+lastInstant), 200, &d)
		if !d.Pass || d.Candidate.Traces != 600 || d.Baseline.Traces != 600 {
			t.Errorf("gate windows to the first and the last instant: %+v", d)
		}

		// A range ending at the epoch holds nothing (a zero end is not
		// "open"), and one from the epoch everything.
		getJSON(t, srv, "/api/v1/fleet"+q("from", "1960-01-01T00:00:00Z", "to", "1970-01-01T00:00:00Z"), 200, &fleet)
		if fleet.Traces != 0 {
			t.Errorf("before the epoch: %d traces", fleet.Traces)
		}
		getJSON(t, srv, "/api/v1/fleet"+q("to", "0"), 200, &fleet)
		if fleet.Traces != 0 {
			t.Errorf("the hour before the epoch: %d traces", fleet.Traces)
		}
		getJSON(t, srv, "/api/v1/fleet"+q("from", "0", "to", lastInstant), 200, &fleet)
		if fleet.Traces != 1800 {
			t.Errorf("from the epoch: %d traces, want 1800", fleet.Traces)
		}
		getJSON(t, srv, "/api/v1/gate"+q("api", fixture.API, "from", "1970-01-01T00:00:00Z", "to", lastInstant, "max_radius", "9"), 200, &d)
		if d.Candidate.Traces != 1800 {
			t.Errorf("gate from the epoch: %+v", d)
		}

		// from after to, and from later than now without to.
		for _, p := range []string{q("from", at(10), "to", at(10)), q("from", lastInstant, "to", firstInstant), q("from", "now+1m")} {
			code, b := get(t, srv, "/api/v1/apis"+p, "")
			if code != 400 || !strings.Contains(string(b), "must be after from") {
				t.Errorf("GET /api/v1/apis%s: %d %s", p, code, b)
			}
		}
	})
}

// sep is the separator that appends a query to path.
func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}
