package ingest

import (
	"hash/fnv"
	"testing"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// spanDef describes one test span.
type spanDef struct {
	kind   ptrace.SpanKind
	name   string
	attrs  map[string]any
	status ptrace.StatusCode
	// traceState is the span's W3C tracestate.
	traceState string
}

// tracesOf builds a request with one resource (resource attributes res) and
// the given spans.
func tracesOf(t testing.TB, res map[string]any, defs ...spanDef) ptrace.Traces {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if err := rs.Resource().Attributes().FromRaw(res); err != nil {
		t.Fatal(err)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	for i, def := range defs {
		sp := ss.Spans().AppendEmpty()
		sp.SetKind(def.kind)
		sp.SetName(def.name)
		sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, 0, byte(i + 1)})
		sp.Status().SetCode(def.status)
		sp.TraceState().FromRaw(def.traceState)
		if err := sp.Attributes().FromRaw(def.attrs); err != nil {
			t.Fatal(err)
		}
	}
	return td
}

// decodeOne decodes a single span with the default configuration.
func decodeOne(t *testing.T, def spanDef) graph.Span {
	t.Helper()
	return decodeOneWith(t, NewDecoder(DecoderConfig{}), def)
}

func decodeOneWith(t *testing.T, d *Decoder, def spanDef) graph.Span {
	t.Helper()
	if def.name == "" {
		def.name = "span-name"
	}
	got := d.AppendTraces(nil, tracesOf(t, map[string]any{"service.name": "svc"}, def))
	if len(got) != 1 {
		t.Fatalf("got %d spans, want 1", len(got))
	}
	return got[0]
}

func TestCopiedFields(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	rs.Resource().Attributes().PutStr("service.version", "1.4.2")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb})
	sp.SetSpanID(pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1})
	sp.SetParentSpanID(pcommon.SpanID{2, 2, 2, 2, 2, 2, 2, 2})
	sp.SetKind(ptrace.SpanKindClient)
	sp.SetName("HTTP GET")
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	sp.SetEndTimestamp(1_700_000_000_250_000_000)

	got := NewDecoder(DecoderConfig{}).AppendTraces(nil, td)
	if len(got) != 1 {
		t.Fatalf("got %d spans", len(got))
	}
	s := got[0]
	want := graph.Span{
		TraceID:   graph.TraceID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb},
		SpanID:    graph.SpanID{1, 1, 1, 1, 1, 1, 1, 1},
		ParentID:  graph.SpanID{2, 2, 2, 2, 2, 2, 2, 2},
		Kind:      graph.KindClient,
		Service:   "checkout",
		Version:   "1.4.2",
		Name:      "HTTP GET",
		Operation: "HTTP GET",
		Peer:      "unknown",
		Start:     1_700_000_000_000_000_000,
		End:       1_700_000_000_250_000_000,
	}
	if s != want {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
}

func TestServiceDefaults(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	got := d.AppendTraces(nil, tracesOf(t, map[string]any{}, spanDef{kind: ptrace.SpanKindServer, name: "x"}))
	if got[0].Service != "unknown_service" || got[0].Version != "" {
		t.Fatalf("service %q version %q, want unknown_service and empty", got[0].Service, got[0].Version)
	}
	got = d.AppendTraces(nil, tracesOf(t, map[string]any{"service.name": "", "service.version": "v2"}, spanDef{name: "x"}))
	if got[0].Service != "unknown_service" || got[0].Version != "v2" {
		t.Fatalf("service %q version %q", got[0].Service, got[0].Version)
	}
}

func TestKinds(t *testing.T) {
	for k, want := range map[ptrace.SpanKind]graph.Kind{
		ptrace.SpanKindUnspecified: graph.KindUnspecified,
		ptrace.SpanKindInternal:    graph.KindInternal,
		ptrace.SpanKindServer:      graph.KindServer,
		ptrace.SpanKindClient:      graph.KindClient,
		ptrace.SpanKindProducer:    graph.KindProducer,
		ptrace.SpanKindConsumer:    graph.KindConsumer,
		ptrace.SpanKind(77):        graph.KindUnspecified,
		ptrace.SpanKind(-3):        graph.KindUnspecified,
	} {
		if got := decodeOne(t, spanDef{kind: k}).Kind; got != want {
			t.Errorf("kind %d: got %v, want %v", k, got, want)
		}
	}
}

func TestOperation(t *testing.T) {
	srv, cli := ptrace.SpanKindServer, ptrace.SpanKindClient
	tests := []struct {
		name string
		def  spanDef
		want string
	}{
		{"http new names", spanDef{kind: srv, name: "GET", attrs: map[string]any{"http.request.method": "GET", "http.route": "/dispatch"}}, "GET /dispatch"},
		{"http old method", spanDef{kind: srv, name: "POST", attrs: map[string]any{"http.method": "POST", "http.route": "/orders/{id}"}}, "POST /orders/{id}"},
		{"new method beats old", spanDef{kind: srv, attrs: map[string]any{"http.method": "PUT", "http.request.method": "PATCH", "http.route": "/a"}}, "PATCH /a"},
		{"method without route", spanDef{kind: srv, name: "GET /customer", attrs: map[string]any{"http.request.method": "GET", "url.path": "/customer"}}, "GET /customer"},
		{"route without method", spanDef{kind: srv, name: "handler", attrs: map[string]any{"http.route": "/x"}}, "handler"},
		{"grpc service and method", spanDef{kind: srv, name: "/driver.DriverService/FindNearest", attrs: map[string]any{"rpc.system": "grpc", "rpc.service": "driver.DriverService", "rpc.method": "FindNearest"}}, "driver.DriverService/FindNearest"},
		{"grpc fully-qualified method", spanDef{kind: srv, name: "grpc span", attrs: map[string]any{"rpc.method": "driver.DriverService/FindNearest"}}, "driver.DriverService/FindNearest"},
		{"grpc method only, not qualified", spanDef{kind: srv, name: "FindNearest span", attrs: map[string]any{"rpc.method": "FindNearest"}}, "FindNearest span"},
		{"grpc service only", spanDef{kind: srv, name: "svc span", attrs: map[string]any{"rpc.service": "driver.DriverService"}}, "svc span"},
		{"http beats rpc", spanDef{kind: srv, attrs: map[string]any{"http.request.method": "POST", "http.route": "/rpc", "rpc.service": "a.B", "rpc.method": "C"}}, "POST /rpc"},
		{"nothing: span name", spanDef{kind: srv, name: "HandleThing"}, "HandleThing"},
		{"client: span name", spanDef{kind: cli, name: "HTTP GET", attrs: map[string]any{"http.request.method": "GET", "http.route": "/dispatch", "rpc.service": "a.B", "rpc.method": "C"}}, "HTTP GET"},
		{"internal: span name", spanDef{kind: ptrace.SpanKindInternal, name: "work", attrs: map[string]any{"rpc.method": "a.B/C"}}, "work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeOne(t, tt.def).Operation; got != tt.want {
				t.Fatalf("operation %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFailed(t *testing.T) {
	errS, okS, unset := ptrace.StatusCodeError, ptrace.StatusCodeOk, ptrace.StatusCodeUnset
	tests := []struct {
		name       string
		attrs      map[string]any
		status     ptrace.StatusCode
		wantFailed bool
		wantCode   int32
	}{
		{"404 with span ERROR is the caller's error", map[string]any{"http.response.status_code": 404}, errS, false, 404},
		{"503 failed", map[string]any{"http.response.status_code": 503}, unset, true, 503},
		{"500 failed even with span OK", map[string]any{"http.response.status_code": 500}, okS, true, 500},
		{"499 not failed", map[string]any{"http.response.status_code": 499}, errS, false, 499},
		{"old http.status_code 502", map[string]any{"http.status_code": 502}, unset, true, 502},
		{"new beats old", map[string]any{"http.response.status_code": 200, "http.status_code": 502}, unset, false, 200},
		{"status as string", map[string]any{"http.response.status_code": "503"}, unset, true, 503},
		{"status as double", map[string]any{"http.response.status_code": 504.0}, unset, true, 504},
		{"http beats grpc", map[string]any{"http.response.status_code": 200, "rpc.grpc.status_code": 14}, errS, false, 200},
		{"grpc 14 failed", map[string]any{"rpc.grpc.status_code": 14}, unset, true, 1014},
		{"grpc 5 NOT_FOUND not failed", map[string]any{"rpc.grpc.status_code": 5}, errS, false, 1005},
		{"grpc 0 OK", map[string]any{"rpc.grpc.status_code": 0}, errS, false, 1000},
		{"rpc.response.status_code DEADLINE_EXCEEDED", map[string]any{"rpc.response.status_code": "DEADLINE_EXCEEDED"}, unset, true, 1004},
		{"rpc.response.status_code unavailable lower case", map[string]any{"rpc.response.status_code": "unavailable"}, unset, true, 1014},
		{"rpc.response.status_code UNAVAILABLE", map[string]any{"rpc.response.status_code": "UNAVAILABLE"}, unset, true, 1014},
		{"rpc.response.status_code \"14\"", map[string]any{"rpc.response.status_code": "14"}, unset, true, 1014},
		{"rpc.response.status_code 14 int", map[string]any{"rpc.response.status_code": 14}, unset, true, 1014},
		{"rpc.response.status_code NOT_FOUND", map[string]any{"rpc.response.status_code": "NOT_FOUND"}, errS, false, 1005},
		{"grpc beats rpc.response", map[string]any{"rpc.grpc.status_code": 5, "rpc.response.status_code": "UNAVAILABLE"}, unset, false, 1005},
		{"no status attrs, span ERROR", nil, errS, true, 0},
		{"no status attrs, span OK", nil, okS, false, 0},
		{"no status attrs, span unset", nil, unset, false, 0},
		{"unparsable http status falls through to span status", map[string]any{"http.response.status_code": "oops"}, errS, true, 0},
		{"http status 0 (no response) falls through to span status", map[string]any{"http.response.status_code": 0}, errS, true, 0},
		{"unknown grpc name falls through", map[string]any{"rpc.response.status_code": "MELTED"}, errS, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := decodeOne(t, spanDef{kind: ptrace.SpanKindClient, attrs: tt.attrs, status: tt.status})
			if s.Failed != tt.wantFailed || s.StatusCode != tt.wantCode {
				t.Fatalf("failed=%v code=%d, want failed=%v code=%d", s.Failed, s.StatusCode, tt.wantFailed, tt.wantCode)
			}
		})
	}
}

func TestGRPCCodes(t *testing.T) {
	// docs/SPEC.md §2: failed iff UNKNOWN, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
	// ABORTED, INTERNAL, UNAVAILABLE or DATA_LOSS.
	failing := map[int]bool{2: true, 4: true, 8: true, 10: true, 13: true, 14: true, 15: true}
	names := []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}
	for code := 0; code <= 16; code++ {
		for _, attrs := range []map[string]any{
			{"rpc.grpc.status_code": code},
			{"rpc.response.status_code": names[code]},
		} {
			s := decodeOne(t, spanDef{kind: ptrace.SpanKindServer, attrs: attrs, status: ptrace.StatusCodeError})
			if s.Failed != failing[code] || s.StatusCode != int32(1000+code) {
				t.Errorf("%v: failed=%v code=%d, want failed=%v code=%d", attrs, s.Failed, s.StatusCode, failing[code], 1000+code)
			}
		}
	}
}

func TestClaim(t *testing.T) {
	const hdr = "http.response.header.x-error-claim"
	const md = "rpc.response.metadata.x-error-claim"
	tests := []struct {
		name  string
		attrs map[string]any
		want  graph.Claim
	}{
		{"absent", nil, graph.ClaimMissing},
		{"claimed", map[string]any{"error.claim": "claimed"}, graph.ClaimClaimed},
		{"Claim", map[string]any{"error.claim": "Claim"}, graph.ClaimClaimed},
		{"UNCLAIM", map[string]any{"error.claim": "UNCLAIM"}, graph.ClaimUnclaimed},
		{"unclaimed", map[string]any{"error.claim": "unclaimed"}, graph.ClaimUnclaimed},
		{"padded claimed", map[string]any{"error.claim": " claimed "}, graph.ClaimClaimed},
		{"bogus", map[string]any{"error.claim": "bogus"}, graph.ClaimInvalid},
		{"empty string", map[string]any{"error.claim": ""}, graph.ClaimInvalid},
		{"not a string", map[string]any{"error.claim": true}, graph.ClaimInvalid},
		{"attribute beats header", map[string]any{"error.claim": "unclaimed", hdr: "claimed"}, graph.ClaimUnclaimed},
		{"attribute beats metadata", map[string]any{"error.claim": "claimed", md: "unclaimed"}, graph.ClaimClaimed},
		{"header beats metadata", map[string]any{hdr: "claimed", md: "unclaimed"}, graph.ClaimClaimed},
		{"metadata alone", map[string]any{md: "unclaimed"}, graph.ClaimUnclaimed},
		{"header string array", map[string]any{hdr: []any{"unclaimed"}}, graph.ClaimUnclaimed},
		{"header array: first element", map[string]any{hdr: []any{"Claimed", "unclaimed"}}, graph.ClaimClaimed},
		{"metadata string array", map[string]any{md: []any{"unclaim"}}, graph.ClaimUnclaimed},
		{"empty header array is absent", map[string]any{hdr: []any{}}, graph.ClaimMissing},
		{"empty header array, metadata next", map[string]any{hdr: []any{}, md: "claimed"}, graph.ClaimClaimed},
		{"first present wins even when invalid", map[string]any{"error.claim": "bogus", hdr: "claimed"}, graph.ClaimInvalid},
		{"invalid header beats valid metadata", map[string]any{hdr: "yes", md: "claimed"}, graph.ClaimInvalid},
		{"header name case-insensitive", map[string]any{"http.response.header.X-Error-Claim": "claimed"}, graph.ClaimClaimed},
		{"old underscore header normalisation", map[string]any{"http.response.header.x_error_claim": []any{"unclaimed"}}, graph.ClaimUnclaimed},
		{"other header ignored", map[string]any{"http.response.header.x-error-claims": "claimed"}, graph.ClaimMissing},
		{"request header ignored", map[string]any{"http.request.header.x-error-claim": "claimed"}, graph.ClaimMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, kind := range []ptrace.SpanKind{ptrace.SpanKindServer, ptrace.SpanKindClient} {
				if got := decodeOne(t, spanDef{kind: kind, attrs: tt.attrs}).Claim; got != tt.want {
					t.Fatalf("%v: claim %v, want %v", kind, got, tt.want)
				}
			}
		})
	}
}

func TestClaimHeaderConfigurable(t *testing.T) {
	d := NewDecoder(DecoderConfig{ClaimHeader: "X-Uber-Error-Claim"})
	tests := []struct {
		attrs map[string]any
		want  graph.Claim
	}{
		{map[string]any{"http.response.header.x-uber-error-claim": "unclaimed"}, graph.ClaimUnclaimed},
		{map[string]any{"rpc.response.metadata.x-uber-error-claim": []any{"claimed"}}, graph.ClaimClaimed},
		{map[string]any{"http.response.header.x-error-claim": "unclaimed"}, graph.ClaimMissing},
		{map[string]any{"error.claim": "claimed", "http.response.header.x-uber-error-claim": "unclaimed"}, graph.ClaimClaimed},
	}
	for _, tt := range tests {
		if got := decodeOneWith(t, d, spanDef{kind: ptrace.SpanKindClient, attrs: tt.attrs}).Claim; got != tt.want {
			t.Errorf("%v: claim %v, want %v", tt.attrs, got, tt.want)
		}
	}
}

func TestResend(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]any
		has   bool
		n     int32
	}{
		{"absent", nil, false, 0},
		{"resend_count 0", map[string]any{"http.request.resend_count": 0}, true, 0},
		{"resend_count 2", map[string]any{"http.request.resend_count": 2}, true, 2},
		{"resend_count beats retry.attempt", map[string]any{"http.request.resend_count": 1, "retry.attempt": 3}, true, 1},
		{"retry.attempt alone", map[string]any{"retry.attempt": 3}, true, 3},
		{"retry.attempt as string", map[string]any{"retry.attempt": "2"}, true, 2},
		{"resend_count as double", map[string]any{"http.request.resend_count": 1.0}, true, 1},
		{"not a number", map[string]any{"retry.attempt": "again"}, false, 0},
		{"bad resend_count falls back to retry.attempt", map[string]any{"http.request.resend_count": "x", "retry.attempt": 4}, true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := decodeOne(t, spanDef{kind: ptrace.SpanKindClient, attrs: tt.attrs})
			if s.HasResend != tt.has || s.Resend != tt.n {
				t.Fatalf("has=%v n=%d, want has=%v n=%d", s.HasResend, s.Resend, tt.has, tt.n)
			}
		})
	}
}

func TestRetryFlags(t *testing.T) {
	tests := []struct {
		attrs     map[string]any
		criteria  bool
		suppessed bool
		failOpen  graph.Tri
	}{
		{nil, false, false, graph.Unset},
		{map[string]any{"retry.criteria_satisfied": true}, true, false, graph.Unset},
		{map[string]any{"retry.criteria_satisfied": "TRUE"}, true, false, graph.Unset},
		{map[string]any{"retry.criteria_satisfied": false}, false, false, graph.Unset},
		{map[string]any{"retry.suppressed": true}, false, true, graph.Unset},
		{map[string]any{"retry.suppressed": " true"}, false, true, graph.Unset},
		{map[string]any{"dependency.fail_open": true}, false, false, graph.True},
		{map[string]any{"dependency.fail_open": false}, false, false, graph.False},
		{map[string]any{"dependency.fail_open": "False"}, false, false, graph.False},
		{map[string]any{"dependency.fail_open": "yes"}, false, false, graph.Unset},
		{map[string]any{"dependency.fail_open": 1}, false, false, graph.Unset},
	}
	for _, tt := range tests {
		s := decodeOne(t, spanDef{kind: ptrace.SpanKindClient, attrs: tt.attrs})
		if s.CriteriaSatisfied != tt.criteria || s.Suppressed != tt.suppessed || s.FailOpen != tt.failOpen {
			t.Errorf("%v: criteria=%v suppressed=%v failOpen=%v, want %v %v %v", tt.attrs,
				s.CriteriaSatisfied, s.Suppressed, s.FailOpen, tt.criteria, tt.suppessed, tt.failOpen)
		}
	}
}

func TestPeer(t *testing.T) {
	// Each rule, with every later rule's attribute present too: the rule
	// wins over all that follow it. The order is docs/SPEC.md §2's, then the old
	// net.peer.name, the URL's host, and Envoy's upstream cluster.
	rules := []struct{ key, value, want string }{
		{"service.peer.name", "a-service-peer-name", "a-service-peer-name"},
		{"peer.service", "b-peer-service", "b-peer-service"},
		{"server.address", "c-server-address", "c-server-address"},
		{"db.system.name", "d-db-system-name", "d-db-system-name"},
		{"db.system", "e-db-system", "e-db-system"},
		{"net.peer.name", "f-net-peer-name", "f-net-peer-name"},
		{"url.full", "https://user:secret@g-url-full.example:8443/p/a?q=1#frag", "g-url-full.example"},
		{"http.url", "http://h-http-url:8080/x", "h-http-url"},
		{"upstream_cluster.name", "i-cluster-name", "i-cluster-name"},
		{"upstream_cluster", "outbound|8080||j-cluster", "outbound|8080||j-cluster"},
	}
	for i, r := range rules {
		attrs := map[string]any{}
		for _, later := range rules[i:] {
			attrs[later.key] = later.value
		}
		if got := decodeOne(t, spanDef{kind: ptrace.SpanKindClient, attrs: attrs}).Peer; got != r.want {
			t.Errorf("from %s on: peer %q, want %q", r.key, got, r.want)
		}
	}
	if got := decodeOne(t, spanDef{kind: ptrace.SpanKindClient}).Peer; got != "unknown" {
		t.Errorf("no peer attributes: peer %q, want unknown", got)
	}
	for _, tt := range []struct {
		name  string
		attrs map[string]any
		want  string
	}{
		// HotROD: a redis client span with only db.system.
		{"db.system alone", map[string]any{"db.system": "redis"}, "redis"},
		// Empty values do not count as present.
		{"empty peer.service", map[string]any{"peer.service": "", "server.address": "db.local"}, "db.local"},
		{"empty net.peer.name", map[string]any{"net.peer.name": "", "url.full": "http://route:8083/route"}, "route"},
		// A URL without a host falls through to the next rule.
		{"relative url", map[string]any{"url.full": "/route?x=1", "http.url": "http://old-host/x"}, "old-host"},
		{"url without host", map[string]any{"url.full": "file:///tmp/x", "upstream_cluster": "c"}, "c"},
		{"not a url", map[string]any{"http.url": "GET /x", "upstream_cluster.name": "n"}, "n"},
		// An Envoy egress span (the OpenTelemetry tracer's attributes):
		// the URL names the callee first, the cluster without it.
		{"envoy egress with url", map[string]any{"component": "proxy", "http.url": "http://customer:8081/customer?customer=123",
			"upstream_cluster": "outbound|8081||customer.default.svc.cluster.local", "upstream_cluster.name": "customer"}, "customer"},
		{"envoy egress, cluster only", map[string]any{"component": "proxy",
			"upstream_cluster": "outbound|8081||customer.default.svc.cluster.local", "upstream_cluster.name": "customer-http"}, "customer-http"},
		{"envoy, configuration name only", map[string]any{"upstream_cluster": "frontend"}, "frontend"},
		{"non-string url ignored", map[string]any{"url.full": 42, "upstream_cluster": "c"}, "c"},
	} {
		if got := decodeOne(t, spanDef{kind: ptrace.SpanKindClient, name: "router frontend egress", attrs: tt.attrs}).Peer; got != tt.want {
			t.Errorf("%s: peer %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestURLHost(t *testing.T) {
	for url, want := range map[string]string{
		"http://route:8083/route?pickup=1":        "route",
		"https://api.example.com/v1":              "api.example.com",
		"https://api.example.com":                 "api.example.com",
		"https://api.example.com?x=1":             "api.example.com",
		"https://api.example.com#top":             "api.example.com",
		"http://user@host/x":                      "host",
		"http://user:p@ss@host:1/x":               "host", // the last '@' ends the user info
		"http://[::1]:8080/x":                     "::1",
		"http://[2001:db8::7]/x":                  "2001:db8::7",
		"http://[::1/x":                           "",
		"grpc+tls://driver:8082":                  "driver",
		"HTTP://Upper.Example/":                   "Upper.Example",
		"redis://cache:6379/0":                    "cache",
		"http://:8080/x":                          "",
		"http:///x":                               "",
		"/route?pickup=1":                         "",
		"route:8083":                              "",
		"://host/x":                               "",
		"1http://host/x":                          "",
		"ht tp://host/x":                          "",
		"":                                        "",
		"mailto:someone@example.com":              "",
		"http://host:8080/a://b":                  "host",
		"https://10.0.4.2:443/path/with:colon":    "10.0.4.2",
		"http://xn--bcher-kva.example:80/b%C3%BC": "xn--bcher-kva.example",
	} {
		if got := urlHost(url); got != want {
			t.Errorf("urlHost(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestURLHostNoAllocs(t *testing.T) {
	url := "https://user@api.example.com:443/v1/orders?id=7"
	var host string
	if n := testing.AllocsPerRun(100, func() { host = urlHost(url) }); n != 0 || host != "api.example.com" {
		t.Fatalf("%v allocations, host %q", n, host)
	}
}

func TestTarget(t *testing.T) {
	h := func(s string) uint64 {
		f := fnv.New64a()
		f.Write([]byte(s))
		return f.Sum64()
	}
	tests := []struct {
		attrs map[string]any
		want  uint64
	}{
		{nil, 0},
		{map[string]any{"url.full": "http://route:8083/route?pickup=1"}, h("http://route:8083/route?pickup=1")},
		{map[string]any{"http.url": "http://old/x"}, h("http://old/x")},
		{map[string]any{"url.full": "http://new/x", "http.url": "http://old/x"}, h("http://new/x")},
		{map[string]any{"db.query.text": "SELECT 1"}, h("SELECT 1")},
		{map[string]any{"db.statement": "SELECT 2"}, h("SELECT 2")},
		{map[string]any{"db.query.text": "SELECT 1", "db.statement": "SELECT 2"}, h("SELECT 1")},
		{map[string]any{"url.full": "http://a/", "db.query.text": "SELECT 1"}, h("http://a/")},
	}
	for _, tt := range tests {
		if got := decodeOne(t, spanDef{kind: ptrace.SpanKindClient, attrs: tt.attrs}).Target; got != tt.want {
			t.Errorf("%v: target %x, want %x", tt.attrs, got, tt.want)
		}
	}
}

func TestInterning(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	mk := func() ptrace.Traces {
		return tracesOf(t, map[string]any{"service.name": "frontend", "service.version": "v1"},
			spanDef{kind: ptrace.SpanKindServer, name: "GET", attrs: map[string]any{"http.request.method": "GET", "http.route": "/dispatch"}},
			spanDef{kind: ptrace.SpanKindClient, name: "GET", attrs: map[string]any{"server.address": "driver"}},
		)
	}
	a := d.AppendTraces(nil, mk())
	b := d.AppendTraces(nil, mk())
	same := func(what, x, y string) {
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s not shared: %q vs %q", what, x, y)
		}
	}
	for i := range a {
		same("service", a[i].Service, b[i].Service)
		same("version", a[i].Version, b[i].Version)
		same("name", a[i].Name, b[i].Name)
		same("operation", a[i].Operation, b[i].Operation)
		same("peer", a[i].Peer, b[i].Peer)
	}
	same("name across spans", a[0].Name, a[1].Name)
	if a[0].Operation != "GET /dispatch" || a[1].Peer != "driver" {
		t.Fatalf("unexpected decode: %+v", a)
	}
}

func TestAppendTracesNoAllocs(t *testing.T) {
	td := benchTraces(50)
	d := NewDecoder(DecoderConfig{})
	dst := d.AppendTraces(nil, td) // warm the intern table
	allocs := testing.AllocsPerRun(20, func() {
		dst = d.AppendTraces(dst[:0], td)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per AppendTraces, want 0", allocs)
	}
}

func TestZeroTraces(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	if got := d.AppendTraces(nil, ptrace.Traces{}); len(got) != 0 {
		t.Fatalf("got %d spans from zero Traces", len(got))
	}
	if got := d.AppendTraces(nil, ptrace.NewTraces()); len(got) != 0 {
		t.Fatalf("got %d spans from empty Traces", len(got))
	}
}

func TestAppendRequest(t *testing.T) {
	td := tracesOf(t, map[string]any{"service.name": "svc"}, spanDef{kind: ptrace.SpanKindServer, name: "a"}, spanDef{kind: ptrace.SpanKindClient, name: "b"})
	pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	js, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	d := NewDecoder(DecoderConfig{})
	for _, c := range []struct {
		b    []byte
		json bool
	}{{pb, false}, {js, true}} {
		got, err := d.AppendRequest([]graph.Span{{Name: "kept"}}, c.b, c.json)
		if err != nil || len(got) != 3 || got[0].Name != "kept" || got[1].Name != "a" || got[2].Name != "b" {
			t.Fatalf("json=%v: %v %+v", c.json, err, got)
		}
	}
	if got, err := d.AppendRequest(nil, []byte("{not json"), true); err == nil || got != nil {
		t.Fatalf("bad JSON: %v %v", got, err)
	}
	if _, err := d.AppendRequest(nil, []byte{0x0a, 0xff}, false); err == nil {
		t.Fatal("bad proto: no error")
	}
}

func TestParseNum(t *testing.T) {
	for s, want := range map[string]int64{"503": 503, " 14 ": 14, "+2": 2, "-1": -1, "503.0": 503, "7.": 7} {
		if got, ok := parseNum(s); !ok || got != want {
			t.Errorf("parseNum(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "-", "abc", "5x", "1e3", ".5", "99999999999999999999", "1.2.3"} {
		if _, ok := parseNum(s); ok {
			t.Errorf("parseNum(%q) ok, want failure", s)
		}
	}
}

func TestZeroDecoder(t *testing.T) {
	var d Decoder
	got := d.AppendTraces(nil, tracesOf(t, map[string]any{"service.name": "s"},
		spanDef{kind: ptrace.SpanKindServer, name: "n", attrs: map[string]any{"http.response.header.x-error-claim": "claimed"}}))
	if len(got) != 1 || got[0].Service != "s" || got[0].Claim != graph.ClaimClaimed {
		t.Fatalf("%+v", got)
	}
}
