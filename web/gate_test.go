package web_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// The rollout as a canary analysis: the router's 2.0 (naive retries)
// widens the radius from 1 to 2 and fails a gate that allows no increase;
// 2.1 (ownership again) keeps 1.0's radius and passes.
func TestGate(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		all := []string{"api", fixture.API, "from", at(0), "to", at(30)}
		for _, c := range []struct {
			name   string
			params []string
			status int
			reason string
			cand   int // candidate max radius
			base   int // baseline max radius, -1 for none
			traces int64
		}{
			{"canary widens the radius", append(all[:6:6], "service", "route", "baseline", "1.0", "candidate", "2.0", "max_radius_increase", "0"),
				412, "max radius 2 is 1 above route 1.0's 1 (allowed: 0)", 2, 1, 600},
			{"an equal canary passes", append(all[:6:6], "service", "route", "baseline_version", "1.0", "candidate_version", "2.1", "max_radius_increase", "0"),
				200, "", 1, 1, 600},
			{"an increase of one allowed", append(all[:6:6], "service", "route", "baseline", "1.0", "candidate", "2.0", "max_radius_increase", "1"),
				200, "", 2, 1, 600},
			{"windows: the naive phase against the first", []string{"api", fixture.API, "baseline", at(0) + "/" + at(10), "candidate", at(10) + "/" + at(20), "max_radius_increase", "0"},
				412, "above baseline", 2, 1, 600},
			{"windows: the last phase against the first", []string{"api", fixture.API, "baseline", at(0) + "/" + at(10), "candidate", at(20) + "/" + at(30), "max_radius_increase", "0", "max_amplification", "2"},
				200, "", 1, 1, 600},
			{"absolute: radius", []string{"api", fixture.API, "from", at(10), "to", at(20), "max_radius", "1"},
				412, "max radius 2 exceeds 1", 2, -1, 600},
			{"absolute: amplification (2 × 3 = 6)", []string{"api", fixture.API, "from", at(10), "to", at(20), "max_amplification", "5.5"},
				412, "max amplification 6 exceeds 5.5", 2, -1, 600},
			{"absolute: within", []string{"api", fixture.API, "from", at(20), "to", at(30), "max_radius", "1", "max_amplification", "2"},
				200, "", 1, -1, 600},
			{"min_traces: 600 are too few for 601", []string{"api", fixture.API, "from", at(20), "to", at(30), "max_radius", "9", "min_traces", "601"},
				412, "600 traces of front GET /dispatch, fewer than the 601 needed", 1, -1, 600},
			{"an unknown version has no traces", append(all[:6:6], "service", "route", "baseline", "1.0", "candidate", "9.9", "max_radius_increase", "0"),
				412, "route 9.9 has 0 traces", 0, 1, 0},
			// The ads service's own errors (2%) are retried once by the front
			// end: radius 1.
			{"default min_traces: one minute of traces is 60, enough", []string{"api", fixture.API, "from", at(29), "to", at(30), "max_radius", "5"},
				200, "", 1, -1, 60},
		} {
			code, b := get(t, srv, "/api/v1/gate"+q(c.params...), "")
			var d gate.Decision
			if err := json.Unmarshal(b, &d); err != nil {
				t.Errorf("%s: %d %s", c.name, code, b)
				continue
			}
			if code != c.status || d.Pass != (c.status == 200) || (c.reason != "" && !strings.Contains(strings.Join(d.Reasons, "; "), c.reason)) {
				t.Errorf("%s: %d %s; want %d with %q", c.name, code, b, c.status, c.reason)
			}
			if c.status == 200 && len(d.Reasons) != 0 {
				t.Errorf("%s: a pass with reasons %v", c.name, d.Reasons)
			}
			if d.Candidate.MaxRadius != c.cand || d.Candidate.Traces != c.traces {
				t.Errorf("%s: candidate %+v, want max radius %d, %d traces", c.name, d.Candidate, c.cand, c.traces)
			}
			if (c.base < 0) != (d.Baseline == nil) || (d.Baseline != nil && d.Baseline.MaxRadius != c.base) {
				t.Errorf("%s: baseline %+v, want max radius %d", c.name, d.Baseline, c.base)
			}
		}

		// As a Flagger webhook: the parameters in the payload's metadata.
		hook := func(meta string) (int, gate.Decision) {
			resp, err := srv.Client().Post(srv.URL+"/api/v1/gate", "application/json", strings.NewReader(
				`{"name":"route","namespace":"prod","phase":"Progressing","checksum":"x","metadata":{`+meta+`}}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var d gate.Decision
			json.NewDecoder(resp.Body).Decode(&d)
			return resp.StatusCode, d
		}
		meta := `"api":"` + fixture.API + `","from":"` + at(0) + `","to":"` + at(30) + `","service":"route","baseline":"1.0","max_radius_increase":"0","candidate":`
		if code, d := hook(meta + `"2.0"`); code != 412 || d.Pass || d.Candidate.MaxRadius != 2 {
			t.Errorf("webhook, canary 2.0: %d %+v", code, d)
		}
		if code, d := hook(meta + `"2.1"`); code != 200 || !d.Pass {
			t.Errorf("webhook, canary 2.1: %d %+v", code, d)
		}
		if code, _ := hook(`"max_radius":"2"`); code != 400 {
			t.Errorf("webhook without api: %d", code)
		}
		// Numbers and booleans as written (an Argo Rollouts jsonBody by
		// hand); anything else a 400 naming the key.
		if code, d := hook(meta + `"2.0","max_radius_increase":0,"always_200":true`); code != 200 || d.Pass || d.Candidate.MaxRadius != 2 {
			t.Errorf("webhook with numbers and booleans: %d %+v", code, d)
		}
		if code, d := hook(meta + `"2.1","max_radius_increase":0,"max_amplification":2.5`); code != 200 || !d.Pass {
			t.Errorf("webhook with a fraction: %d %+v", code, d)
		}
		for _, bad := range []string{`"max_radius":null`, `"max_radius":[2]`, `"max_radius":{"n":2}`} {
			resp, err := srv.Client().Post(srv.URL+"/api/v1/gate", "application/json", strings.NewReader(`{"metadata":{"api":"x",`+bad+`}}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), "metadata.max_radius: ") || !strings.Contains(string(b), "want a string, a number or a boolean") {
				t.Errorf("webhook %s: %d %s", bad, resp.StatusCode, b)
			}
		}
		// always_200 for clients that read pass (an Argo Rollouts web metric).
		code, b := get(t, srv, "/api/v1/gate"+q("api", fixture.API, "from", at(10), "to", at(20), "max_radius", "1", "always_200", "true"), "")
		var d gate.Decision
		if json.Unmarshal(b, &d); code != 200 || d.Pass {
			t.Errorf("always_200: %d %s", code, b)
		}
	})
}
