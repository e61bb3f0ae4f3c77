package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/fixture"
)

// The first and the last instant of int64 unix nanoseconds, and the
// nanoseconds just outside them.
const (
	firstInstant  = "1677-09-21T00:12:43.145224192Z"
	lastInstant   = "2262-04-11T23:47:16.854775807Z"
	beforeFirst   = "1677-09-21T00:12:43.145224191Z"
	afterLast     = "2262-04-11T23:47:16.854775808Z"
	rangeInErrors = "outside the range times can take (" + firstInstant + " … " + lastInstant + ")"
)

// report, analyze and gate refuse times int64 nanoseconds cannot hold
// (exit 2, the flag and the range named, nothing printed) and take the
// first and the last instant.
func TestTimeBoundaries(t *testing.T) {
	dir, st := rolloutStore(t)
	st.Close()
	file, _ := naiveChainFile(t, 4)
	at := func(m int) string { return fixture.Start.Add(time.Duration(m) * time.Minute).Format(time.RFC3339) }
	gate := []string{"gate", "--data", dir, "--api", fixture.API}

	for _, c := range []struct {
		args []string
		flag string
	}{
		// `report --from 2263-…` printed the whole store.
		{[]string{"report", "--data", dir, "--from", "2263-01-01T00:00:00Z"}, "--from"},
		{[]string{"report", "--data", dir, "--from", afterLast}, "--from"},
		{[]string{"report", "--data", dir, "--from", beforeFirst}, "--from"},
		{[]string{"report", "--data", dir, "--from", "0001-01-01T00:00:00Z", "--to", "9999-12-31T23:59:59Z"}, "--from"},
		{[]string{"report", "--data", dir, "--to", "9999-12-31T23:59:59Z"}, "--to"},
		{[]string{"report", "--data", dir, "--from", "100000000000"}, "--from"},
		{[]string{"report", "--data", dir, "--to", "now+2562047h"}, "--to"},
		{[]string{"analyze", "--from", afterLast, file}, "--from"},
		{[]string{"analyze", "--to", "0001-01-01T00:00:00Z", file}, "--to"},
		{append(gate, "--max-radius", "9", "--from", afterLast), "from"},
		{append(gate, "--max-radius", "9", "--from", at(0), "--to", "2263-01-01T00:00:00Z"), "to"},
		{append(gate, "--max-radius-increase", "0", "--baseline", at(0)+"/"+afterLast, "--candidate", at(10)+"/"+at(20)), "baseline"},
		{append(gate, "--max-radius-increase", "0", "--baseline", at(0)+"/"+at(10), "--candidate", beforeFirst+"/"+at(20)), "candidate"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.flag) || !strings.Contains(errOut, rangeInErrors) {
			t.Errorf("%s: exit %d, stdout %.80q, stderr %q; want 2 naming %s and the range", strings.Join(c.args, " "), code, out, errOut, c.flag)
		}
	}

	// The first and the last instant: everything, as without a range.
	code, whole, errOut := runCmd(t, "report", "--data", dir)
	if code != 0 || !strings.Contains(whole, `"traces": 1800`) {
		t.Fatalf("report: exit %d %s", code, errOut)
	}
	if code, out, errOut := runCmd(t, "report", "--data", dir, "--from", firstInstant, "--to", lastInstant); code != 0 || out != whole {
		t.Errorf("report over every instant: exit %d %s\n%.300s", code, errOut, out)
	}
	code, all, _ := runCmd(t, "analyze", file)
	if code, out, errOut := runCmd(t, "analyze", "--from", firstInstant, "--to", lastInstant, file); code != 0 || out != all {
		t.Errorf("analyze over every instant: exit %d %s", code, errOut)
	}
	// A range ending at the epoch holds nothing ("0" is not "open").
	code, out, _ := runCmd(t, "report", "--data", dir, "--to", "1970-01-01T00:00:00Z")
	var doc struct{ Traces int64 }
	if json.Unmarshal([]byte(out), &doc); code != 0 || doc.Traces != 0 {
		t.Errorf("report --to the epoch: exit %d, %d traces", code, doc.Traces)
	}
	if code, out, _ := runCmd(t, "analyze", "--to", "0", file); !strings.Contains(out, `"traces": 0`) {
		t.Errorf("analyze --to 0: exit %d %.200s", code, out)
	}
	// Gate windows reaching the first and the last instant: the first
	// phase (radius 1) against the last (radius 1).
	code, out, errOut = runCmd(t, append(gate, "--format", "json", "--max-radius-increase", "0",
		"--baseline", firstInstant+"/"+at(10), "--candidate", at(20)+"/"+lastInstant)...)
	var d struct {
		Pass                bool
		Candidate, Baseline struct{ Traces int64 }
	}
	if json.Unmarshal([]byte(out), &d); code != 0 || !d.Pass || d.Candidate.Traces != 600 || d.Baseline.Traces != 600 {
		t.Errorf("gate over windows to the ends: exit %d %s %s", code, out, errOut)
	}
	// --from after --to.
	if code, _, errOut := runCmd(t, "report", "--data", dir, "--from", lastInstant, "--to", firstInstant); code != exitUsage || !strings.Contains(errOut, "--to must be after --from") {
		t.Errorf("from after to: exit %d %s", code, errOut)
	}
}
