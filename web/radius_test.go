package web_test

import (
	"encoding/json"
	"testing"

	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// /radius of a root API the store holds no trace of is a 404, like /graph
// and /gate; one the store knows, over a range without its traces, is a
// series of zeros (the UI charts a quiet API).
func TestRadiusUnknownAPI(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		for _, c := range []struct{ api, params string }{
			{"nope GET /", q("api", "nope GET /")},
			{"nope GET /", q("api", "nope GET /", "from", at(0), "to", at(30))},
			{"front GET /dispatc", q("api", "front GET /dispatc", "step", "5m")}, // a typo
		} {
			code, b := get(t, srv, "/api/v1/radius"+c.params, "")
			var e struct{ Error string }
			json.Unmarshal(b, &e)
			if want := `not found: no traces of root API "` + c.api + `" in the store`; code != 404 || e.Error != want {
				t.Errorf("GET /api/v1/radius%s: %d %s, want 404 %q", c.params, code, b, want)
			}
			if code, _ := get(t, srv, "/api/v1/graph"+c.params, ""); code != 404 {
				t.Errorf("GET /api/v1/graph%s: %d, want 404 as well", c.params, code)
			}
		}
		// The day before the rollout, and two hours after it: no trace of
		// the API in the range, 60 one-minute steps of zeros.
		for _, r := range [][2]string{{"2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z"}, {at(120), at(180)}} {
			var s query.Series
			getJSON(t, srv, "/api/v1/radius"+q("api", fixture.API, "from", r[0], "to", r[1]), 200, &s)
			if s.API != fixture.API || s.Step != 60 || len(s.Points) != 60 {
				t.Fatalf("%s–%s: %+v", r[0], r[1], s)
			}
			for _, p := range s.Points {
				if p != (query.Point{Time: p.Time}) {
					t.Errorf("%s–%s: a point of a quiet range %+v", r[0], r[1], p)
				}
			}
		}
	})
}
