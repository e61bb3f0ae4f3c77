package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/sim"
)

// Every numeric flag is checked, and a bad one is a usage error (exit 2)
// that names it, said once ("stormradius whatif: --budget …", never
// "whatif: whatif:"), with nothing on stdout.
func TestWhatIfBadFlags(t *testing.T) {
	chain := []string{"whatif", "--chain", "A,B,C", "--fail", "C"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--retries", "NaN"}, "--retries NaN"},
		{[]string{"--retries", "-1"}, "--retries -1"},
		{[]string{"--retries", "Inf"}, "--retries +Inf"},
		{[]string{"--budget", "5"}, "--budget 5: want a fraction of requests between 0 and 1"},
		{[]string{"--budget", "Inf"}, "--budget +Inf"},
		{[]string{"--budget", "NaN"}, "--budget NaN"},
		{[]string{"--budget", "-0.1"}, "--budget -0.1"},
		{[]string{"--error-rate", "NaN"}, "--error-rate NaN"},
		{[]string{"--error-rate", "1.5"}, "--error-rate 1.5"},
		{[]string{"--error-rate", "-1"}, "--error-rate -1"},
		{[]string{"--policy", "budget", "--budget", "2"}, "--budget 2"},
	} {
		code, out, stderr := runCmd(t, append(slices.Clone(chain), tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, "stormradius whatif: "+tc.want) || strings.Count(stderr, "whatif:") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, stderr, tc.want)
		}
	}
	// From the environment too: the message names the flag it sets.
	t.Setenv("STORMRADIUS_BUDGET", "7")
	if code, _, stderr := runCmd(t, chain...); code != exitUsage || !strings.Contains(stderr, "--budget 7") {
		t.Errorf("STORMRADIUS_BUDGET=7: exit %d, stderr %q", code, stderr)
	}
}

// A chain visits each node once: naming one twice is a usage error (the
// JSON map would list it once, the table twice).
func TestWhatIfChainRepeatsANode(t *testing.T) {
	code, out, stderr := runCmd(t, "whatif", "--chain", "A,B,A,C", "--fail", "C")
	if code != exitUsage || out != "" || !strings.Contains(stderr, `names "A" twice: a chain visits each node once`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// 1001 attempts per level over a 200-level chain: node i serves 1001^i,
// and 1001^103 ≈ 1.1e309 is beyond a float64 (log10(1001) = 3.000434): the
// answer is an overflow at n103, exit 1, not a JSON encoding error and not
// half a document.
func TestWhatIfOverflow(t *testing.T) {
	names := make([]string, 201)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	for _, format := range []string{"json", "table"} {
		code, out, stderr := runCmd(t, "whatif", "--chain", strings.Join(names, ","), "--fail", "n200", "--retries", "1000", "--format", format)
		want := `stormradius whatif: requests overflow: more than 1.8e+308 requests per root request at "n103"`
		if code != exitFail || out != "" || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and %q", format, code, out, stderr, want)
		}
	}
}

// Table figures: integers as integers, decimals without exponent. Naive,
// R = 24, chain n0…n5 failing at n5: node i serves 25^i, n5 25^5 =
// 9765625 (which %g printed 9.765625e+06). Budget B = 0.1, R = 1: 1.1^i,
// n3 1.331. The rows are the JSON document's keys.
func TestWhatIfTableNumbers(t *testing.T) {
	chain := []string{"whatif", "--chain", "n0,n1,n2,n3,n4,n5", "--fail", "n5"}
	code, out, stderr := runCmd(t, append(slices.Clone(chain), "--retries", "24", "--format", "table")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := map[string]string{"n0": "1", "n1": "25", "n2": "625", "n3": "15625", "n4": "390625", "n5": "9765625"}
	if got := tableRows(out, "NODE"); !maps.Equal(got, want) {
		t.Errorf("rows %v, want %v\n%s", got, want, out)
	}
	if !strings.Contains(out, "R=24, B=0.1") {
		t.Errorf("header:\n%s", out)
	}
	code, out, stderr = runCmd(t, append(slices.Clone(chain), "--policy", "budget", "--format", "table")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want = map[string]string{"n0": "1", "n1": "1.1", "n2": "1.21", "n3": "1.331", "n4": "1.4641", "n5": "1.61051"}
	if got := tableRows(out, "NODE"); !maps.Equal(got, want) {
		t.Errorf("rows %v, want %v\n%s", got, want, out)
	}
}

// tableRows returns name → figure for the rows of the section whose header
// starts with header.
func tableRows(out, header string) map[string]string {
	rows := map[string]string{}
	in := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == header:
			in = true
		case len(f) == 0:
			in = false
		case in:
			rows[strings.Join(f[:len(f)-1], " ")] = f[len(f)-1]
		}
	}
	return rows
}

func TestFormatNumber(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{0, "0"},
		{8, "8"},
		{1.331, "1.331"},
		{0.1, "0.1"},
		{998.49122807, "998.49122807"},
		{9565468.192982456, "9565468.192982456"},
		{0.000000001, "0.000000001"},
		{123456789012345, "123456789012345"}, // 1.2e14: still whole digits
		{1e15, "1e+15"},
		{math.Ldexp(1, 200), "1.60693804e+60"}, // 2^200 = 1.6069380442…e60
		{math.Inf(1), "+Inf"},
	} {
		if got := formatNumber(c.x); got != c.want {
			t.Errorf("formatNumber(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

// cycleTracesFile writes n traces of a GET /x → b GET /y → a GET /x as OTLP
// JSON lines, retried at both levels: the root a calls b twice (the first
// attempt fails with a 500), and each b hop calls a twice (the first
// attempt fails). Per trace: a 5 hops, b 2; a→b 1 call (2 attempts), b→a
// 2 calls (2 attempts each).
func cycleTracesFile(t *testing.T, n int) string {
	t.Helper()
	var buf bytes.Buffer
	for tr := range n {
		td := ptrace.NewTraces()
		spans := map[string]ptrace.SpanSlice{}
		for _, svc := range []string{"a", "b"} {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", svc)
			spans[svc] = rs.ScopeSpans().AppendEmpty().Spans()
		}
		var traceID pcommon.TraceID
		traceID[0], traceID[15] = 0xcc, byte(tr+1)
		next := uint64(0)
		// span adds a span and returns its id.
		span := func(svc string, kind ptrace.SpanKind, parent pcommon.SpanID, route string, start, end int64, failed bool, resend int) pcommon.SpanID {
			next++
			var id pcommon.SpanID
			binary.BigEndian.PutUint64(id[:], next)
			sp := spans[svc].AppendEmpty()
			sp.SetTraceID(traceID)
			sp.SetSpanID(id)
			sp.SetParentSpanID(parent)
			sp.SetKind(kind)
			sp.SetName("GET " + route)
			sp.SetStartTimestamp(pcommon.Timestamp(start * 1_000_000))
			sp.SetEndTimestamp(pcommon.Timestamp(end * 1_000_000))
			a := sp.Attributes()
			a.PutStr("http.request.method", "GET")
			status := int64(200)
			if failed {
				status = 500
			}
			a.PutInt("http.response.status_code", status)
			if kind == ptrace.SpanKindServer {
				a.PutStr("http.route", route)
			} else if resend > 0 {
				a.PutInt("http.request.resend_count", int64(resend))
			}
			return id
		}
		// call adds a CLIENT span of caller and the callee's SERVER span.
		call := func(caller, callee string, parent pcommon.SpanID, route string, start, end int64, failed bool, resend int) pcommon.SpanID {
			c := span(caller, ptrace.SpanKindClient, parent, route, start, end, failed, resend)
			return span(callee, ptrace.SpanKindServer, c, route, start, end, failed, 0)
		}
		root := span("a", ptrace.SpanKindServer, pcommon.SpanID{}, "/x", 0, 100, false, 0)
		for i, at := range []int64{1, 50} {
			b := call("a", "b", root, "/y", at, at+40, i == 0, i)
			call("b", "a", b, "/x", at+1, at+10, true, 0)
			call("b", "a", b, "/x", at+11, at+20, false, 1)
		}
		if err := sim.WriteJSONLine(&buf, td); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), "cycle.jsonl")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The cycle end to end. Under ownership with B = 0 no level adds a retry,
// so b serves its calls per request: 1 (not 0.2 = 1 call / 5 hops of a).
// Under naive retries with b failing, a→b (max 2 attempts observed: R = 1)
// doubles it: 2. The root a serves 1. The table lists the JSON document's
// services and nodes.
func TestWhatIfTracesCycle(t *testing.T) {
	p := cycleTracesFile(t, 3)
	for _, tc := range []struct {
		policy []string
		b      float64
	}{{[]string{"--policy", "ownership", "--budget", "0"}, 1}, {[]string{"--policy", "naive"}, 2}} {
		args := append([]string{"whatif", "--traces", p, "--api", "a GET /x", "--fail", "b"}, tc.policy...)
		code, out, stderr := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var got struct {
			Requests map[string]float64
			Nodes    map[string]float64
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.Requests["a"] != 1 || got.Requests["b"] != tc.b || got.Nodes["a GET /x"] != 1 || got.Nodes["b GET /y"] != tc.b || len(got.Requests) != 2 || len(got.Nodes) != 2 {
			t.Errorf("%v: requests %v nodes %v, want a 1, b %v", tc.policy, got.Requests, got.Nodes, tc.b)
		}
		code, out, stderr = runCmd(t, append(args, "--format", "table")...)
		if code != 0 {
			t.Fatalf("table: exit %d: %s", code, stderr)
		}
		bs := fmt.Sprint(tc.b) // 1 or 2
		if s := tableRows(out, "SERVICE"); !maps.Equal(s, map[string]string{"a": "1", "b": bs}) {
			t.Errorf("%v: service rows %v\n%s", tc.policy, s, out)
		}
		if n := tableRows(out, "NODE"); !maps.Equal(n, map[string]string{"a GET /x": "1", "b GET /y": bs}) {
			t.Errorf("%v: node rows %v\n%s", tc.policy, n, out)
		}
	}
}
