package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/web"
)

// claimsAPI is the root API of the claim rollout (claimRollout).
const claimsAPI = "front GET /order"

// A route attempt at the driver in the claim rollout: how the driver
// answered (failed or not, its error.claim) and whether the route's
// CLIENT span said it declined a retry (retry.suppressed).
type claimAttempt struct {
	failed     bool
	claim      string // the driver's error.claim, "" for none
	suppressed bool
}

// claimTrace is one kind of trace of the claim rollout: the route's
// version, its attempts at the driver, and what it answered the front
// end when it failed (its captured x-error-claim header, "" for none).
type claimTrace struct {
	version  string
	n        int
	attempts []claimAttempt
	answer   string
}

// The claim rollout: the front end calls the route once per request, the
// route calls the driver, retrying as each kind says. 20 traces of route
// 1.1.0, which speaks the protocol, then 20 of 1.2.0, which sends no claim
// header at all and retries whatever it gets.
//
// By hand, route 1.1.0: 6 + 2 + 2 = 10 failed hops, each answering a
// captured "unclaimed" header (10 claims); 2 + 2 = 4 unclaimed answers
// from the driver, none retried; 4 suppressed retries — 2 calls marked
// retry.suppressed, 2 that failed at their first unclaimed answer after
// one attempt, fewer than the edge's most (3, the candidate's). Route
// 1.2.0: 5 + 3 = 8 failed hops, none claiming; 3 × 3 = 9 unclaimed
// answers, 3 × 2 = 6 of them retried, none suppressed (its calls retried
// their first unclaimed answer).
var claimRollout = []claimTrace{
	{"1.1.0", 6, []claimAttempt{{true, "claimed", false}, {true, "claimed", false}}, "unclaimed"},
	{"1.1.0", 2, []claimAttempt{{true, "unclaimed", true}}, "unclaimed"},
	{"1.1.0", 2, []claimAttempt{{true, "unclaimed", false}}, "unclaimed"},
	{"1.1.0", 10, []claimAttempt{{false, "", false}}, ""},
	{"1.2.0", 5, []claimAttempt{{true, "claimed", false}, {true, "claimed", false}}, ""},
	{"1.2.0", 3, []claimAttempt{{true, "unclaimed", false}, {true, "unclaimed", false}, {true, "unclaimed", false}}, ""},
	{"1.2.0", 12, []claimAttempt{{false, "", false}}, ""},
}

// The claim figures of each version, by hand (claimRollout).
var (
	claimsBaseline  = gate.ClaimFigures{FailedHops: 10, ClaimedHops: 10, UnclaimedAnswers: 4, RetriedUnclaimed: 0, SuppressedRetries: 4}
	claimsCandidate = gate.ClaimFigures{FailedHops: 8, ClaimedHops: 0, UnclaimedAnswers: 9, RetriedUnclaimed: 6, SuppressedRetries: 0}
)

// The reasons the gate must give for route 1.2.0 against 1.1.0.
var claimReasons = []string{
	"candidate route 1.2.0: stopped claiming errors: 0 of 8 failed hops answered a claim (baseline route 1.1.0: 10 of 10)",
	"candidate route 1.2.0: stopped honouring claims: retried 6 unclaimed answers, suppressed 0 (baseline route 1.1.0 suppressed 4)",
}

// claimSpans builds the claim rollout as OTLP and decodes it as ingest
// does: the claims are read from the attributes SPEC §2 names.
func claimSpans(t *testing.T) [][]graph.Span {
	t.Helper()
	td := ptrace.NewTraces()
	resource := func(service, version string) ptrace.SpanSlice {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		rs.Resource().Attributes().PutStr("service.version", version)
		return rs.ScopeSpans().AppendEmpty().Spans()
	}
	var ids uint64
	span := func(to ptrace.SpanSlice, trace pcommon.TraceID, parent pcommon.SpanID, kind ptrace.SpanKind, name string,
		start time.Time, from, until time.Duration, failed bool) ptrace.Span {
		ids++
		sp := to.AppendEmpty()
		sp.SetTraceID(trace)
		var id pcommon.SpanID
		for i := range 8 {
			id[i] = byte(ids >> (8 * (7 - i)))
		}
		sp.SetSpanID(id)
		sp.SetParentSpanID(parent)
		sp.SetKind(kind)
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(from)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(until)))
		if failed {
			sp.Attributes().PutInt("http.response.status_code", 500)
		} else {
			sp.Attributes().PutInt("http.response.status_code", 200)
		}
		return sp
	}
	k := 0
	for _, kind := range claimRollout {
		for range kind.n {
			k++
			start := fixture.Start.Add(time.Duration(k) * time.Second)
			trace := pcommon.TraceID{0xc1, byte(k)}
			front, route, driver := resource("front", "1.0"), resource("route", kind.version), resource("driver", "1.0")
			failed := kind.attempts[len(kind.attempts)-1].failed
			root := span(front, trace, pcommon.SpanID{}, ptrace.SpanKindServer, "GET /order", start, 0, 200*time.Millisecond, failed)
			call := span(front, trace, root.SpanID(), ptrace.SpanKindClient, "GET /route", start, time.Millisecond, 199*time.Millisecond, failed)
			srv := span(route, trace, call.SpanID(), ptrace.SpanKindServer, "GET /route", start, 2*time.Millisecond, 198*time.Millisecond, failed)
			if failed && kind.answer != "" {
				// The captured header: a string array, its first element counts.
				srv.Attributes().PutEmptySlice("http.response.header.x-error-claim").AppendEmpty().SetStr(kind.answer)
			}
			for i, a := range kind.attempts {
				from := time.Duration(3+40*i) * time.Millisecond
				cl := span(route, trace, srv.SpanID(), ptrace.SpanKindClient, "GET /driver", start, from, from+30*time.Millisecond, a.failed)
				cl.Attributes().PutInt("http.request.resend_count", int64(i))
				if a.suppressed {
					cl.Attributes().PutBool("retry.suppressed", true)
				}
				d := span(driver, trace, cl.SpanID(), ptrace.SpanKindServer, "GET /driver", start, from+time.Millisecond, from+29*time.Millisecond, a.failed)
				if a.claim != "" {
					d.Attributes().PutStr("error.claim", a.claim)
				}
			}
		}
	}
	spans := ingest.NewDecoder(ingest.DecoderConfig{}).AppendTraces(nil, td)
	traces := graph.GroupTraces(spans)
	if len(traces) != 40 {
		t.Fatalf("%d traces, want 40", len(traces))
	}
	return traces
}

// A candidate version that sends no claim header and retries unclaimed
// answers, against a baseline that claimed and suppressed: the gate fails
// it with both claim reasons, and the claim figures are the hand-counted
// ones — from each store, through GET /api/v1/gate and through
// `stormradius gate` on the store (--data, --store) and on the server
// (--url). The other way round, nothing stopped: a pass.
func TestGateClaims(t *testing.T) {
	traces := claimSpans(t)
	at := func(m int) string { return fixture.Start.Add(time.Duration(m) * time.Minute).Format(time.RFC3339) }
	params := func(base, cand string) []string {
		return []string{"--api", claimsAPI, "--from", at(0), "--to", at(10), "--service", "route",
			"--baseline-version", base, "--candidate-version", cand, "--max-radius", "10"}
	}
	for _, name := range []string{"sqlite", "clickhouse"} {
		t.Run(name, func(t *testing.T) {
			opts := storeurl.Options{Window: fixture.Window}
			flag := []string{}
			if name == "sqlite" {
				opts.Data = t.TempDir()
				flag = []string{"--data", opts.Data}
			} else {
				opts.URL = chtest.FreshDSN(t) // skips without a server
				flag = []string{"--store", opts.URL}
			}
			st, err := storeurl.Open(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			fixture.Load(t, st, traces)
			srv := httptest.NewServer(web.Handler(query.New(st), web.Config{Now: func() time.Time { return fixture.End }}))
			defer srv.Close()

			// GET /api/v1/gate.
			v := url.Values{"api": {claimsAPI}, "from": {at(0)}, "to": {at(10)}, "service": {"route"},
				"baseline_version": {"1.1.0"}, "candidate_version": {"1.2.0"}, "max_radius": {"10"}}
			resp, err := srv.Client().Get(srv.URL + "/api/v1/gate?" + v.Encode())
			if err != nil {
				t.Fatal(err)
			}
			var d gate.Decision
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 412 {
				t.Fatalf("GET /api/v1/gate: %d %v", resp.StatusCode, err)
			}
			checkClaimDecision(t, "GET /api/v1/gate", &d)

			// stormradius gate on the server, then on the store itself.
			for _, src := range [][]string{{"--url", srv.URL}, flag} {
				code, out, errOut := runCmd(t, append(append([]string{"gate", "--format", "json"}, params("1.1.0", "1.2.0")...), src...)...)
				var d gate.Decision
				if err := json.Unmarshal([]byte(out), &d); err != nil || code != exitFail {
					t.Fatalf("gate %s: exit %d %s%s", src[0], code, out, errOut)
				}
				checkClaimDecision(t, "gate "+src[0], &d)
				code, out, _ = runCmd(t, append(append([]string{"gate"}, params("1.1.0", "1.2.0")...), src...)...)
				want := "FAIL  " + claimsAPI + "\n"
				for _, l := range []string{"failed hops 8 (0 answered a claim), unclaimed answers 9 (6 retried), suppressed retries 0",
					"failed hops 10 (10 answered a claim), unclaimed answers 4 (0 retried), suppressed retries 4",
					"  - " + claimReasons[0] + "\n  - " + claimReasons[1] + "\n"} {
					if code != exitFail || !strings.HasPrefix(out, want) || !strings.Contains(out, l) {
						t.Errorf("gate %s (text): exit %d\n%s\nwant %q", src[0], code, out, l)
					}
				}
				// The other way round: the candidate claims and suppresses.
				code, out, errOut = runCmd(t, append(append([]string{"gate"}, params("1.2.0", "1.1.0")...), src...)...)
				if code != exitOK || !strings.HasPrefix(out, "PASS  ") {
					t.Errorf("gate %s, 1.1.0 against 1.2.0: exit %d %s%s", src[0], code, out, errOut)
				}
			}
			srv.Close()
			st.Close()
		})
	}
}

// checkClaimDecision checks a decision of route 1.2.0 against 1.1.0: a
// fail for the claim reasons alone, with the hand-counted claim figures.
func checkClaimDecision(t *testing.T, what string, d *gate.Decision) {
	t.Helper()
	if d.Decision != gate.Fail || d.Pass || !reflect.DeepEqual(d.Reasons, claimReasons) {
		t.Errorf("%s: %s %q, want fail %q", what, d.Decision, d.Reasons, claimReasons)
	}
	if d.Candidate.Claims == nil || *d.Candidate.Claims != claimsCandidate {
		t.Errorf("%s: candidate claims %+v, want %+v", what, d.Candidate.Claims, claimsCandidate)
	}
	if d.Baseline == nil || d.Baseline.Claims == nil || *d.Baseline.Claims != claimsBaseline {
		t.Errorf("%s: baseline %+v, want claims %+v", what, d.Baseline, claimsBaseline)
	}
	if d.Candidate.Traces != 20 || d.Baseline == nil || d.Baseline.Traces != 20 {
		t.Errorf("%s: candidate %d traces, baseline %+v: want 20 each", what, d.Candidate.Traces, d.Baseline)
	}
}
