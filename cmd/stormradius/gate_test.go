package main

import (
	"context"
	"encoding/json"
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
// on pass, 1 on fail, 2 when it cannot decide.
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
		{"too few traces", []string{"--api", fixture.API, "--from", at(20), "--to", at(30), "--max-radius", "1", "--min-traces", "1000"}, 1, "fewer than the 1000"},
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
	code, out, _ := runCmd(t, "gate", "--data", dir, "--format", "json", "--api", fixture.API, "--from", at(10), "--to", at(20), "--max-amplification", "5")
	var d gate.Decision
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 1 || d.Pass || d.Candidate.MaxAmplification != 6 {
		t.Errorf("json: exit %d %s", code, out)
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
