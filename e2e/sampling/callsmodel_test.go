package sampling

import (
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The calls model (fleetOptions.calls): traffic with failed and retried
// calls, whose every figure of the docs/SPEC.md §5.2 document this file
// states trace by trace, from the model alone, for the checks of
// served_test.go.
//
// Two APIs of the frontend:
//
//   - frontend GET /dispatch (5 traces in 6): its SERVER span calls the
//     backend (a CLIENT span "GET backend", the backend's SERVER span
//     "GET /work"); each backend attempt makes one call to the database
//     (a CLIENT span "SELECT" with peer.service postgres: no server, a
//     virtual node) and 0 to 2 INTERNAL spans. When the first attempt
//     fails the frontend retries it once (http.request.resend_count 1),
//     except when it gives up.
//   - frontend GET /health (1 in 6): one SERVER span.
//
// A failed hop has span status ERROR, and so has the CLIENT span of a
// failed attempt.
type outcome int

const (
	outcomeOK         outcome = iota
	outcomeTransient          // the first backend attempt fails, the retry succeeds
	outcomePersistent         // both backend attempts fail: the frontend fails
	outcomeGiveUp             // the first attempt fails and is not retried: the frontend fails
	outcomeRootOnly           // the backend answers, the frontend fails on its own
	outcomeHealthFail         // GET /health fails
)

var outcomeNames = [...]string{"ok", "transient", "persistent", "give-up", "root-only", "health-fail"}

func (o outcome) String() string { return outcomeNames[o] }

// The model's names, as stormradius names them (docs/SPEC.md §2, §3):
// an API is "service operation" of a root SERVER span, whose operation
// is its span name here (no http.route); an edge is caller service →
// callee service and operation; the database is a virtual node named by
// peer.service, its operation the CLIENT span's name.
const (
	apiDispatch = "frontend GET /dispatch"
	apiHealth   = "frontend GET /health"
	edgeBackend = "frontend -> backend GET /work"
	edgeDB      = "backend -> postgres SELECT"
)

// Outcome rates of GET /dispatch (the rest succeed) and of GET /health.
const (
	rateTransient  = 0.06
	ratePersistent = 0.03
	rateGiveUp     = 0.02
	rateRootOnly   = 0.015
	rateHealthFail = 0.04
)

// callsTrace draws tr's API and outcome and returns its frontend's and
// its backend's spans.
func (f *fleet) callsTrace(tr *fleetTrace) (frontend, backend []spanSpec) {
	root := f.spanID()
	if f.rng.IntN(6) == 0 {
		tr.api, tr.outcome = apiHealth, outcomeOK
		if f.rng.Float64() < rateHealthFail {
			tr.outcome = outcomeHealthFail
		}
		tr.hasError = tr.outcome != outcomeOK
		tr.spans = 1
		return []spanSpec{{trace: tr, id: root, name: "GET /health", kind: ptrace.SpanKindServer,
			statusError: tr.hasError, to: 2 * time.Millisecond}}, nil
	}
	tr.api = apiDispatch
	switch u := f.rng.Float64(); {
	case u < rateTransient:
		tr.outcome = outcomeTransient
	case u < rateTransient+ratePersistent:
		tr.outcome = outcomePersistent
	case u < rateTransient+ratePersistent+rateGiveUp:
		tr.outcome = outcomeGiveUp
	case u < rateTransient+ratePersistent+rateGiveUp+rateRootOnly:
		tr.outcome = outcomeRootOnly
	}
	tr.hasError = tr.outcome != outcomeOK
	rootFails := tr.outcome == outcomePersistent || tr.outcome == outcomeGiveUp || tr.outcome == outcomeRootOnly
	frontend = append(frontend, spanSpec{trace: tr, id: root, name: "GET /dispatch", kind: ptrace.SpanKindServer,
		statusError: rootFails, to: 20 * time.Millisecond})
	for a := range tr.attempts() {
		// Attempt a: [1 ms, 7 ms] after the root started, the second
		// 8 ms later, after the first ended.
		at := time.Millisecond + time.Duration(a)*8*time.Millisecond
		failed := tr.attemptFails(a)
		client, server := f.spanID(), f.spanID()
		frontend = append(frontend, spanSpec{trace: tr, id: client, parent: root, name: "GET backend", kind: ptrace.SpanKindClient,
			statusError: failed, from: at, to: at + 6*time.Millisecond, resend: int64(a)})
		backend = append(backend,
			spanSpec{trace: tr, id: server, parent: client, name: "GET /work", kind: ptrace.SpanKindServer,
				statusError: failed, from: at + 500*time.Microsecond, to: at + 5500*time.Microsecond},
			spanSpec{trace: tr, id: f.spanID(), parent: server, name: "SELECT", kind: ptrace.SpanKindClient,
				peer: "postgres", from: at + time.Millisecond, to: at + 2*time.Millisecond})
		n := f.rng.IntN(3)
		tr.internals = append(tr.internals, n)
		for k := range n {
			from := at + 2*time.Millisecond + time.Duration(k)*time.Millisecond
			backend = append(backend, spanSpec{trace: tr, id: f.spanID(), parent: server, name: "render", kind: ptrace.SpanKindInternal,
				from: from, to: from + 500*time.Microsecond})
		}
	}
	tr.spans = len(frontend) + len(backend)
	return frontend, backend
}

// attempts is how many times a GET /dispatch trace calls the backend.
func (tr *fleetTrace) attempts() int {
	switch tr.outcome {
	case outcomeTransient, outcomePersistent:
		return 2
	}
	return 1
}

// attemptFails says whether backend attempt a (from 0) fails.
func (tr *fleetTrace) attemptFails(a int) bool {
	switch tr.outcome {
	case outcomeTransient, outcomeGiveUp:
		return a == 0
	case outcomePersistent:
		return true
	}
	return false
}

// figure names one count of a §5.2 document: a top-level field (section
// ""), or a field of the element of apis (by api), services (by
// service) or edges (by "caller -> callee") named key; field may be a
// dotted path ("claims.missing").
type figure struct {
	section, key, field string
}

func (g figure) String() string {
	if g.section == "" {
		return g.field
	}
	return fmt.Sprintf("%s[%s].%s", g.section, g.key, g.field)
}

// values are a trace's contributions to the document's counts, as the
// model makes them (docs/SPEC.md §3, §4.1, §4.2, §4.5, §4.6):
//
//   - hops: the root; each backend attempt's server; each database call
//     (a virtual node). requests count them, per API and per service.
//   - the backend call is one logical call (resend numbers group its
//     attempts): retried with two attempts, failed when its last
//     attempt failed. Each backend attempt makes one database call.
//   - a failed backend hop owns its error (its database call did not
//     fail): one failure event each; a failed frontend whose backend
//     call failed propagates it (the edge is fail-close: every failed
//     call has a failed caller, so learned or default it is fail-close);
//     a frontend that failed on its own owns its error.
//   - no span carries a claim: every failed hop (the root's own span
//     included; virtual nodes never fail here) is audited as missing.
//   - counterfactual: a failed call on the failure chain with fewer
//     attempts than the most seen (2) gets one more, a copy of its last
//     attempt's subtree (the backend hop and its database hop): the
//     give-up trace counts 2 more requests, as spurious requests
//     prevented, all its owner's (the backend's).
func (tr *fleetTrace) values() map[figure]float64 {
	v := map[figure]float64{}
	add := func(section, key, field string, x float64) { v[figure{section, key, field}] += x }
	api := func(field string, x float64) { add("apis", tr.api, field, x) }
	svc := func(s, field string, x float64) { add("services", s, field, x) }
	edge := func(e, field string, x float64) { add("edges", e, field, x) }
	b := func(c bool) float64 {
		if c {
			return 1
		}
		return 0
	}

	add("", "", "traces", 1)
	add("", "", "spans", float64(tr.spans))
	add("", "", "fragments", 0)
	add("", "", "sampling.traces_estimated", 1)
	api("traces", 1)
	api("failed_traces", b(tr.hasError))
	api("remote_parent_traces", 0)

	if tr.api == apiHealth {
		failed := tr.outcome == outcomeHealthFail
		api("root_errors", b(failed))
		api("requests", 1)
		api("counterfactual_requests", 1)
		api("failure_events", b(failed))
		api("spurious_requests_prevented", 0)
		svc("frontend", "requests", 1)
		svc("frontend", "counterfactual_requests", 1)
		svc("frontend", "owned_failures", b(failed))
		svc("frontend", "claims.missing", b(failed))
		return v
	}

	n := float64(tr.attempts())
	backendFailed := 0.0 // failed backend hops, each owning its error
	for a := range tr.attempts() {
		backendFailed += b(tr.attemptFails(a))
	}
	rootFails := tr.outcome == outcomePersistent || tr.outcome == outcomeGiveUp || tr.outcome == outcomeRootOnly
	frontOwns := tr.outcome == outcomeRootOnly
	extra := 0.0 // counterfactual hops: the give-up call's second attempt, backend and database
	if tr.outcome == outcomeGiveUp {
		extra = 2
	}
	requests := 1 + 2*n
	api("root_errors", b(rootFails))
	api("requests", requests)
	api("counterfactual_requests", requests+extra)
	api("spurious_requests_prevented", extra)
	api("failure_events", backendFailed+b(frontOwns))
	api("suppressed_retries", 0)
	api("misattributed_errors", 0)

	svc("frontend", "requests", 1)
	svc("frontend", "counterfactual_requests", 1)
	svc("frontend", "owned_failures", b(frontOwns))
	svc("frontend", "claims.missing", b(rootFails))
	svc("backend", "requests", n)
	svc("backend", "counterfactual_requests", n+extra/2)
	svc("backend", "owned_failures", backendFailed)
	svc("backend", "spurious_requests_prevented", extra)
	svc("backend", "claims.missing", backendFailed)
	svc("postgres", "requests", n)
	svc("postgres", "counterfactual_requests", n+extra/2)
	svc("postgres", "owned_failures", 0)

	edge(edgeBackend, "calls", 1)
	edge(edgeBackend, "retried_calls", b(n == 2))
	edge(edgeBackend, "failed_calls", b(tr.attemptFails(tr.attempts()-1)))
	edge(edgeBackend, "suppressed_calls", 0)
	edge(edgeDB, "calls", n)
	edge(edgeDB, "retried_calls", 0)
	edge(edgeDB, "failed_calls", 0)
	return v
}

// fleetFigures is every figure some trace of f contributes to, in a
// fixed order.
func fleetFigures(f *fleet) []figure {
	seen := map[figure]bool{}
	var out []figure
	for _, tr := range f.traces {
		for g := range tr.values() {
			if !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// outcomes counts f's traces by API and outcome, for the log.
func outcomes(f *fleet) map[string]int {
	n := map[string]int{}
	for _, tr := range f.traces {
		n[tr.api+" "+tr.outcome.String()]++
	}
	return n
}

// keptTraceIDs is the set of trace ids in td.
func keptTraceIDs(td ptrace.Traces) map[pcommon.TraceID]bool {
	ids := map[pcommon.TraceID]bool{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				ids[sp.TraceID()] = true
			}
		}
	}
	return ids
}
