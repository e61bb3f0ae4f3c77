package web_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

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
		// A window's label: "candidate 2026-03-02T10:20:00Z–2026-03-02T10:30:00Z".
		window := func(side string, from, to int) string { return side + " " + at(from) + "–" + at(to) }
		for _, c := range []struct {
			name     string
			params   []string
			status   int
			decision string
			reason   string
			cand     int // candidate max radius
			base     int // baseline max radius, -1 for none
			traces   int64
		}{
			{"canary widens the radius", append(all[:6:6], "service", "route", "baseline", "1.0", "candidate", "2.0", "max_radius_increase", "0"),
				412, "fail", "max radius 2 is 1 above route 1.0's 1 (allowed: 0)", 2, 1, 600},
			{"an equal canary passes", append(all[:6:6], "service", "route", "baseline_version", "1.0", "candidate_version", "2.1", "max_radius_increase", "0"),
				200, "pass", "", 1, 1, 600},
			// The increase is allowed, but the naive canary answers its
			// failures without a claim where 1.0 claimed every one: a
			// failure of its own (the claim checks of two versions). Its
			// 228 failed hops: the front end retries each of its ~114
			// failed requests once.
			{"an increase of one allowed, but the canary stopped claiming", append(all[:6:6], "service", "route", "baseline", "1.0", "candidate", "2.0", "max_radius_increase", "1"),
				412, "fail", "candidate route 2.0: stopped claiming errors: 0 of 228 failed hops answered a claim (baseline route 1.0: 110 of 110)", 2, 1, 600},
			{"windows: the naive phase against the first", []string{"api", fixture.API, "baseline", at(0) + "/" + at(10), "candidate", at(10) + "/" + at(20), "max_radius_increase", "0"},
				412, "fail", "above baseline", 2, 1, 600},
			{"windows: the last phase against the first", []string{"api", fixture.API, "baseline", at(0) + "/" + at(10), "candidate", at(20) + "/" + at(30), "max_radius_increase", "0", "max_amplification", "2"},
				200, "pass", "", 1, 1, 600},
			{"absolute: radius", []string{"api", fixture.API, "from", at(10), "to", at(20), "max_radius", "1"},
				412, "fail", "max radius 2 exceeds 1", 2, -1, 600},
			{"absolute: amplification (2 × 3 = 6)", []string{"api", fixture.API, "from", at(10), "to", at(20), "max_amplification", "5.5"},
				412, "fail", "max amplification 6 exceeds 5.5", 2, -1, 600},
			{"absolute: within", []string{"api", fixture.API, "from", at(20), "to", at(30), "max_radius", "1", "max_amplification", "2"},
				200, "pass", "", 1, -1, 600},
			// Too little evidence is undecided, not a fail: 412 to a GET
			// (it has no canary to be young), unless undecided=pass.
			{"min_traces: 600 are too few for 601", []string{"api", fixture.API, "from", at(20), "to", at(30), "max_radius", "9", "min_traces", "601"},
				412, "undecided", window("candidate", 20, 30) + ": effective sample size 600 below min_traces 601 (600 traces received)", 1, -1, 600},
			{"undecided=pass", []string{"api", fixture.API, "from", at(20), "to", at(30), "max_radius", "9", "min_traces", "601", "undecided", "pass"},
				200, "undecided", "effective sample size 600 below min_traces 601", 1, -1, 600},
			{"undecided=fail", []string{"api", fixture.API, "from", at(20), "to", at(30), "max_radius", "9", "min_traces", "601", "undecided", "fail"},
				412, "undecided", "effective sample size 600 below min_traces 601", 1, -1, 600},
			{"always_200", []string{"api", fixture.API, "from", at(20), "to", at(30), "max_radius", "9", "min_traces", "601", "always_200", "true"},
				200, "undecided", "effective sample size 600 below min_traces 601", 1, -1, 600},
			// Whatever the little evidence shows.
			{"too little evidence of a wider radius", []string{"api", fixture.API, "from", at(10), "to", at(20), "max_radius", "1", "min_traces", "601"},
				412, "undecided", window("candidate", 10, 20) + ": effective sample size 600 below min_traces 601 (600 traces received); not judged on that evidence: " +
					window("candidate", 10, 20) + ": max radius 2 exceeds 1", 2, -1, 600},
			{"an unknown version has no traces", append(all[:6:6], "service", "route", "baseline", "1.0", "candidate", "9.9", "max_radius_increase", "0"),
				412, "undecided", "candidate route 9.9: effective sample size 0 below min_traces 10 (0 traces received)", 0, 1, 0},
			// One minute of baseline is 60 traces: too few for 61 to judge
			// the increase by; an absolute threshold still fails.
			{"a short baseline", []string{"api", fixture.API, "baseline", at(0) + "/" + at(1), "candidate", at(10) + "/" + at(20), "max_radius_increase", "0", "min_traces", "61"},
				412, "undecided", window("baseline", 0, 1) + ": effective sample size 60 below min_traces 61 (60 traces received): max_radius_increase cannot be judged", 2, 1, 600},
			{"a short baseline, an absolute threshold exceeded", []string{"api", fixture.API, "baseline", at(0) + "/" + at(1), "candidate", at(10) + "/" + at(20), "max_radius_increase", "0", "max_radius", "1", "min_traces", "61"},
				412, "fail", window("candidate", 10, 20) + ": max radius 2 exceeds 1; " + window("baseline", 0, 1) + ": effective sample size 60", 2, 1, 600},
			// The ads service's own errors (2%) are retried once by the front
			// end: radius 1.
			{"default min_traces: one minute of traces is 60, enough", []string{"api", fixture.API, "from", at(29), "to", at(30), "max_radius", "5"},
				200, "pass", "", 1, -1, 60},
		} {
			code, b := get(t, srv, "/api/v1/gate"+q(c.params...), "")
			var d gate.Decision
			if err := json.Unmarshal(b, &d); err != nil {
				t.Errorf("%s: %d %s", c.name, code, b)
				continue
			}
			if code != c.status || d.Decision != c.decision || d.Pass != (c.decision == "pass") ||
				(c.reason != "" && !strings.Contains(strings.Join(d.Reasons, "; "), c.reason)) {
				t.Errorf("%s: %d %s; want %d, %s with %q", c.name, code, b, c.status, c.decision, c.reason)
			}
			if c.decision == "pass" && len(d.Reasons) != 0 {
				t.Errorf("%s: a pass with reasons %v", c.name, d.Reasons)
			}
			if d.Candidate.MaxRadius != c.cand || d.Candidate.Traces != c.traces ||
				d.Candidate.TracesReceived != c.traces || d.Candidate.EffectiveSampleSize != float64(c.traces) {
				t.Errorf("%s: candidate %+v, want max radius %d, %d traces (received, and the effective sample size)", c.name, d.Candidate, c.cand, c.traces)
			}
			if (c.base < 0) != (d.Baseline == nil) || (d.Baseline != nil && d.Baseline.MaxRadius != c.base) {
				t.Errorf("%s: baseline %+v, want max radius %d", c.name, d.Baseline, c.base)
			}
		}

		// A parameter the gate does not know is a 400 naming it (and every
		// other), never ignored.
		code, b := get(t, srv, "/api/v1/gate"+q("api", fixture.API, "max_radius", "1", "max_radius_increas", "0", "min_trace", "5"), "")
		if want := `{"error":"bad request: unknown parameter(s): max_radius_increas (did you mean max_radius_increase?), min_trace (did you mean min_traces?)"}`; code != 400 || strings.TrimSpace(string(b)) != want {
			t.Errorf("misspelt parameters: %d %s\nwant 400 %s", code, b, want)
		}
		if code, b := get(t, srv, "/api/v1/gate"+q("api", fixture.API, "max_radius", "1", "always_200", "yes"), ""); code != 400 || !strings.Contains(string(b), `always_200: \"yes\"`) {
			t.Errorf("always_200=yes: %d %s", code, b)
		}
		if code, b := get(t, srv, "/api/v1/gate"+q("api", fixture.API, "max_radius", "1", "undecided", "later"), ""); code != 400 || !strings.Contains(string(b), `undecided: \"later\"`) {
			t.Errorf("undecided=later: %d %s", code, b)
		}

		// As a Flagger webhook: the parameters in the payload's metadata.
		post := func(path, body string) (int, []byte) {
			resp, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b
		}
		hook := func(meta string) (int, gate.Decision) {
			code, b := post("/api/v1/gate", `{"name":"route","namespace":"prod","phase":"Progressing","checksum":"x","metadata":{`+meta+`}}`)
			var d gate.Decision
			json.Unmarshal(b, &d)
			return code, d
		}
		meta := `"api":"` + fixture.API + `","from":"` + at(0) + `","to":"` + at(30) + `","service":"route","baseline":"1.0","max_radius_increase":"0","candidate":`
		if code, d := hook(meta + `"2.0"`); code != 412 || d.Pass || d.Decision != "fail" || d.Candidate.MaxRadius != 2 {
			t.Errorf("webhook, canary 2.0: %d %+v", code, d)
		}
		if code, d := hook(meta + `"2.1"`); code != 200 || !d.Pass || d.Decision != "pass" {
			t.Errorf("webhook, canary 2.1: %d %+v", code, d)
		}
		if code, _ := hook(`"max_radius":"2"`); code != 400 {
			t.Errorf("webhook without api: %d", code)
		}
		// Numbers and booleans as written (an Argo Rollouts jsonBody by
		// hand); anything else a 400 naming the key.
		if code, d := hook(meta + `"2.0","max_radius_increase":0,"always_200":true`); code != 200 || d.Pass || d.Decision != "fail" || d.Candidate.MaxRadius != 2 {
			t.Errorf("webhook with numbers and booleans: %d %+v", code, d)
		}
		if code, d := hook(meta + `"2.1","max_radius_increase":0,"max_amplification":2.5`); code != 200 || !d.Pass {
			t.Errorf("webhook with a fraction: %d %+v", code, d)
		}
		for _, bad := range []string{`"max_radius":null`, `"max_radius":[2]`, `"max_radius":{"n":2}`} {
			code, b := post("/api/v1/gate", `{"metadata":{"api":"x",`+bad+`}}`)
			if code != 400 || !strings.Contains(string(b), "metadata.max_radius: ") || !strings.Contains(string(b), "want a string, a number or a boolean") {
				t.Errorf("webhook %s: %d %s", bad, code, b)
			}
		}
		// A misspelt metadata key is a 400 naming it; Flagger's own
		// top-level fields, and any it may add, are not parameters.
		code, b = post("/api/v1/gate", `{"name":"route","namespace":"prod","phase":"Progressing","checksum":"x","buildId":"7","metadata":{`+meta+`"2.1","max_radius_increas":"0"}}`)
		if want := `{"error":"bad request: unknown parameter(s): metadata.max_radius_increas (did you mean max_radius_increase?)"}`; code != 400 || strings.TrimSpace(string(b)) != want {
			t.Errorf("misspelt metadata: %d %s\nwant 400 %s", code, b, want)
		}
		code, b = post("/api/v1/gate?max_radius_increas=0", `{"name":"route","namespace":"prod","phase":"Progressing","checksum":"x","buildId":"7","metadata":{`+meta+`"2.1"}}`)
		if code != 400 || !strings.Contains(string(b), "unknown parameter(s): max_radius_increas (did you mean") {
			t.Errorf("a misspelt query parameter on a webhook: %d %s", code, b)
		}
		if code, b := post("/api/v1/gate", `{"name":"route","namespace":"prod","phase":"Progressing","checksum":"x","buildId":"7","metadata":{`+meta+`"2.1"}}`); code != 200 {
			t.Errorf("a webhook with a field Flagger may add: %d %s", code, b)
		}
	})
}

// Flagger counts every answer above 202 to a rollout webhook as a failed
// check and rolls the canary back after a few: an undecided decision
// answers 200 while the canary is young — its first request (namespace,
// name, checksum) less than undecided ago, 10 minutes by default — and
// 412 after. A pass and a fail are answered as they are, young or not.
func TestGateUndecidedCanary(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		clock := fixture.End
		srv := serve(t, st, web.Config{Now: func() time.Time { return clock }})
		post := func(canary, meta string) (int, gate.Decision) {
			t.Helper()
			resp, err := srv.Client().Post(srv.URL+"/api/v1/gate", "application/json", strings.NewReader(
				`{"name":"route",`+canary+`"phase":"Progressing","metadata":{"api":"`+fixture.API+`","from":"`+at(20)+`","to":"`+at(30)+`"`+meta+`}}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var d gate.Decision
			if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, d
		}
		// 600 traces from 10:20 to 10:30: undecided with min_traces 601,
		// a pass and a fail without.
		const (
			undecided = `,"max_radius":"9","min_traces":"601"`
			pass      = `,"max_radius":"9"`
			fail      = `,"max_radius":"0"`
			a         = `"namespace":"prod","checksum":"a",`
			b         = `"namespace":"prod","checksum":"b",`
		)
		for _, c := range []struct {
			name    string
			after   time.Duration // since the first request of canary a
			canary  string
			meta    string
			status  int
			outcome string // the last reason
		}{
			{"the first request of a young canary", 0, a, undecided, 200,
				"undecided, answered 200 while canary prod/route is young: this gate first saw it 0s ago, undecided=10m0s"},
			{"a fail is a fail, young or not", time.Minute, a, fail, 412, "max radius 1 exceeds 0"},
			{"a pass is a pass", time.Minute, a, pass, 200, ""},
			{"young still", 9*time.Minute + 59*time.Second, a, undecided, 200,
				"this gate first saw it 9m59s ago, undecided=10m0s"},
			{"ten minutes on: no longer young", 10 * time.Minute, a, undecided, 412,
				"undecided, answered 412: this gate first saw canary prod/route 10m0s ago (2026-03-02T10:30:00Z), longer than undecided=10m0s"},
			{"a grace of its own", 10 * time.Minute, a, undecided + `,"undecided":"15m"`, 200, "10m0s ago, undecided=15m0s"},
			{"undecided=fail", 10 * time.Minute, a, undecided + `,"undecided":"fail"`, 412, "effective sample size 600 below min_traces 601 (600 traces received)"},
			{"undecided=pass", 30 * time.Minute, a, undecided + `,"undecided":"pass"`, 200, "effective sample size 600 below min_traces 601 (600 traces received)"},
			// A new revision (checksum) is a new canary; so is another
			// namespace.
			{"a new revision is young", 11 * time.Minute, b, undecided, 200, "this gate first saw it 0s ago"},
			{"its own age", 13 * time.Minute, b, undecided, 200, "this gate first saw it 2m0s ago"},
			{"another namespace", 13 * time.Minute, `"namespace":"staging","checksum":"a",`, undecided, 200, "canary staging/route is young"},
			{"the first one, old", 21 * time.Minute, a, undecided, 412, "first saw canary prod/route 21m0s ago"},
			{"always_200", 21 * time.Minute, a, undecided + `,"always_200":"true"`, 200, "effective sample size 600 below min_traces 601 (600 traces received)"},
		} {
			clock = fixture.End.Add(c.after)
			code, d := post(c.canary, c.meta)
			last := ""
			if len(d.Reasons) > 0 {
				last = d.Reasons[len(d.Reasons)-1]
			}
			if code != c.status || !strings.Contains(last, c.outcome) || (c.outcome == "") != (last == "") {
				t.Errorf("%s: %d %q, want %d with %q", c.name, code, d.Reasons, c.status, c.outcome)
			}
		}
		// Without a name there is no canary to age: a GET's answer.
		clock = fixture.End
		code, d := post(`"namespace":"prod","checksum":"a","name":"",`, undecided)
		if code != 412 || d.Decision != "undecided" || len(d.Reasons) != 1 {
			t.Errorf("no canary: %d %q", code, d.Reasons)
		}
	})
}
