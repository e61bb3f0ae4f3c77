package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// stormradius gate asks a server (--url) or a store (--data) and exits 0
// on pass, 1 on fail, 2 when it cannot decide: undecided (too little
// evidence), or no decision at all.
func TestGateCommand(t *testing.T) {
	dir, st := rolloutStore(t)
	srv := httptest.NewServer(web.Handler(query.New(st), web.Config{Tokens: []string{"tok"}}))
	at := func(m int) string { return fixture.Start.Add(time.Duration(m) * time.Minute).Format(time.RFC3339) }
	versions := []string{"--api", fixture.API, "--from", at(0), "--to", at(30), "--service", "route", "--baseline-version", "1.0"}
	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"canary widens the radius", append(versions[:10:10], "--candidate-version", "2.0", "--max-radius-increase", "0"), 1,
			"FAIL  front GET /dispatch"},
		{"equal canary", append(versions[:10:10], "--candidate-version", "2.1", "--max-radius-increase", "0"), 0, "PASS  front GET /dispatch"},
		{"windows", []string{"--api", fixture.API, "--baseline", at(0) + "/" + at(10), "--candidate", at(10) + "/" + at(20), "--max-radius-increase", "0"}, 1,
			"max radius 2 is 1 above"},
		{"absolute", []string{"--api", fixture.API, "--from", at(20), "--to", at(30), "--max-radius", "1"}, 0, "PASS"},
		// 600 traces from 10:20 to 10:30: undecided, not failed.
		{"too few traces", []string{"--api", fixture.API, "--from", at(20), "--to", at(30), "--max-radius", "1", "--min-traces", "1000"}, 2,
			"UNDECIDED  front GET /dispatch\n  candidate 2026-03-02T10:20:00Z–2026-03-02T10:30:00Z traces 600, failed "},
		{"too few traces: why", []string{"--api", fixture.API, "--from", at(20), "--to", at(30), "--max-radius", "1", "--min-traces", "1000"}, 2,
			", max radius 1, mean radius 1.00, max amplification 2\n" +
				"  - candidate 2026-03-02T10:20:00Z–2026-03-02T10:30:00Z: effective sample size 600 below min_traces 1000 (600 traces received)\n"},
		{"too few traces, whatever they show", []string{"--api", fixture.API, "--from", at(10), "--to", at(20), "--max-radius", "1", "--min-traces", "601"}, 2,
			"not judged on that evidence: candidate 2026-03-02T10:10:00Z–2026-03-02T10:20:00Z: max radius 2 exceeds 1"},
		{"a canary without traces", append(versions[:10:10], "--candidate-version", "9.9", "--max-radius-increase", "0"), 2,
			"candidate route 9.9: effective sample size 0 below min_traces 10 (0 traces received)"},
		{"no threshold", []string{"--api", fixture.API}, 2, "give --max-radius"},
		{"bad number", []string{"--api", fixture.API, "--max-radius", "two"}, 2, "--max-radius"},
		{"unknown api", []string{"--api", "nope GET /", "--from", at(0), "--to", at(30), "--max-radius", "1"}, 2, "no traces"},
	}
	for _, src := range []string{"url", "data"} {
		for _, c := range cases {
			args := append([]string{"gate"}, c.args...)
			if src == "url" {
				args = append(args, "--url", srv.URL, "--token", "tok")
			} else {
				args = append(args, "--data", dir)
			}
			code, out, errOut := runCmd(t, args...)
			if code != c.code || !strings.Contains(out+errOut, c.out) {
				t.Errorf("%s (%s): exit %d\n%s%s\nwant %d with %q", c.name, src, code, out, errOut, c.code, c.out)
			}
		}
		if src == "url" {
			// A wrong token, an unreachable server: errors, never a pass.
			if code, _, e := runCmd(t, "gate", "--url", srv.URL, "--token", "nope", "--api", fixture.API, "--max-radius", "9"); code != 2 || !strings.Contains(e, "401") {
				t.Errorf("wrong token: exit %d %s", code, e)
			}
			srv.Close()
			if code, _, _ := runCmd(t, "gate", "--url", srv.URL, "--api", fixture.API, "--max-radius", "9"); code != 2 {
				t.Errorf("server down: exit %d", code)
			}
			st.Close() // --data opens the store itself
		}
	}
	// --format json prints the decision.
	for _, c := range []struct {
		args     []string
		code     int
		decision string
	}{
		{[]string{"--from", at(10), "--to", at(20), "--max-amplification", "5"}, 1, "fail"},
		{[]string{"--from", at(10), "--to", at(20), "--max-amplification", "6"}, 0, "pass"},
		{[]string{"--from", at(10), "--to", at(20), "--max-amplification", "5", "--min-traces", "601"}, 2, "undecided"},
	} {
		code, out, _ := runCmd(t, append([]string{"gate", "--data", dir, "--format", "json", "--api", fixture.API}, c.args...)...)
		var d struct {
			Decision  string
			Pass      *bool
			Candidate gate.Figures
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil || code != c.code || d.Decision != c.decision || d.Pass == nil || *d.Pass != (c.decision == "pass") ||
			d.Candidate.MaxAmplification != 6 || d.Candidate.TracesReceived != 600 || d.Candidate.EffectiveSampleSize != 600 {
			t.Errorf("json %v: exit %d %s, want %d and %s", c.args, code, out, c.code, c.decision)
		}
	}
	// A server's answer is checked: 200 is a pass, 412 a fail or
	// undecided; a server from before undecided said pass or not.
	for _, c := range []struct {
		status int
		body   string
		code   int
		out    string
	}{
		{200, `{"decision":"pass","pass":true,"reasons":[],"api":"a"}`, 0, "PASS  a"},
		{412, `{"decision":"undecided","pass":false,"reasons":["too little"],"api":"a"}`, 2, "UNDECIDED  a"},
		{412, `{"decision":"fail","pass":false,"reasons":["wide"],"api":"a"}`, 1, "FAIL  a"},
		{412, `{"pass":false,"reasons":["wide"],"api":"a"}`, 1, "FAIL  a"},
		{200, `{"pass":true,"reasons":[],"api":"a"}`, 0, "PASS  a"},
		{200, `{"decision":"undecided","pass":false,"reasons":[],"api":"a"}`, 2, `answered 200 OK with decision "undecided", pass=false`},
		{412, `{"decision":"pass","pass":true,"reasons":[],"api":"a"}`, 2, `answered 412 Precondition Failed with decision "pass"`},
		{412, `{"decision":"maybe","pass":false,"reasons":[],"api":"a"}`, 2, `decision "maybe"`},
	} {
		fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			io.WriteString(w, c.body)
		}))
		code, out, errOut := runCmd(t, "gate", "--url", fake.URL, "--api", "a", "--max-radius", "1")
		fake.Close()
		if code != c.code || !strings.Contains(out+errOut, c.out) {
			t.Errorf("%d %s: exit %d %s%s, want %d with %q", c.status, c.body, code, out, errOut, c.code, c.out)
		}
	}
	// Neither or both sources: usage errors.
	if code, _, _ := runCmd(t, "gate", "--api", fixture.API, "--max-radius", "1"); code != 2 {
		t.Errorf("no source: exit %d", code)
	}
}

// rolloutStore returns an embedded store in a new directory, loaded with
// the rollout fixture (a stable and a canary version, fixture.Rollout).
func rolloutStore(t *testing.T) (string, store.Store) {
	t.Helper()
	traces, err := fixture.Rollout("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: dir, Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Load(t, st, traces)
	return dir, st
}
