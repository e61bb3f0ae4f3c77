package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/analysis/plan"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// offlinePlan is the plan of traces made as `stormradius plan FILE` makes
// it: from the offline engine's windows and document.
func offlinePlan(t *testing.T, traces [][]graph.Span, req query.PlanRequest) *plan.Plan {
	t.Helper()
	doc, windows, _, err := offline.Analyze(context.Background(), func(emit func([]graph.Span) error) error {
		for _, tr := range traces {
			if err := emit(append([]graph.Span(nil), tr...)); err != nil {
				return err
			}
		}
		return nil
	}, offline.Config{Analysis: analysis.Config{Window: fixture.Window}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := query.Plan(req, windows.Merged(), doc, analysis.Config{Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// GET /api/v1/plan over both stores equals the plan of the same spans
// made offline; its parameters are checked.
func TestPlanEndpoint(t *testing.T) {
	traces, _ := rollout()
	// Every service of the rollout speaks the protocol (the router but in
	// its naive phase): the plan has no step; asked for the driver
	// failing with B = 1, the API's figures are the router's observed
	// retries into it, within the budget: 1 → 2 attempts.
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		all := q("from", at(0), "to", at(30))
		var got plan.Plan
		getJSON(t, srv, "/api/v1/plan"+all, http.StatusOK, &got)
		same(t, "plan", got, offlinePlan(t, traces, query.PlanRequest{}))
		one := q("from", at(0), "to", at(30), "steps", "1", "budget", "1", "fail", "driver", "api", fixture.API)
		getJSON(t, srv, "/api/v1/plan"+one, http.StatusOK, &got)
		b := 1.0
		same(t, "plan, one step, driver failing", got, offlinePlan(t, traces, query.PlanRequest{Steps: 1, Budget: &b, Fail: []string{"driver"}, APIs: []string{fixture.API}}))
		if got.Weights != plan.WeightsFail || len(got.APIs) != 1 || got.APIs[0].API != fixture.API || len(got.Steps) != 0 ||
			strings.Join(got.Speaking, ",") != "ads,driver,front,route" || got.APIs[0].Load != 2 || got.APIs[0].MaxRadius != 1 {
			t.Errorf("fail=driver: weights %q, speaking %v, apis %+v, %d steps", got.Weights, got.Speaking, got.APIs, len(got.Steps))
		}
		for _, tc := range []struct {
			query  string
			status int
			want   string
		}{
			{q("steps", "-1"), 400, "steps"},
			{q("steps", "x"), 400, "steps"},
			{q("budget", "1.5"), 400, "budget"},
			{q("from", at(0), "to", at(30), "api", "nope GET /"), 404, `no traces of root API \"nope GET /\"`},
			{q("from", at(0), "to", at(30), "fail", "nope"), 400, `fail \"nope\" is not a service`},
		} {
			code, body := get(t, srv, "/api/v1/plan"+tc.query, "")
			if code != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("GET /api/v1/plan%s: %d %s, want %d with %q", tc.query, code, body, tc.status, tc.want)
			}
		}
	})
}
