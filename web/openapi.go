package web

import (
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/analysis/plan"
	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/query/timerange"
)

// operation documents one route in the OpenAPI document.
type operation struct {
	id, summary, description string
	params                   []param
	body                     string // a request body schema name, "" for none
	ok                       string // the 200 body's schema name
	statuses                 []int  // statuses beyond 200, 400, 401, 500, 503
}

// param is a query or path parameter.
type param struct {
	name, in, description string
	required              bool
	typ                   string // string, integer, number
}

var (
	pFrom     = param{"from", "query", "start of the range: RFC 3339, unix seconds or now±DURATION, within " + timerange.RangeText + " (default: an hour before to)", false, "string"}
	pTo       = param{"to", "query", "end of the range, exclusive, after from: RFC 3339, unix seconds or now±DURATION, within " + timerange.RangeText + " (default: now)", false, "string"}
	pAPI      = param{"api", "query", `the root API, "service operation" (operation names contain slashes)`, true, "string"}
	pAPIOpt   = param{"api", "query", `only incidents that affected this root API`, false, "string"}
	pStep     = param{"step", "query", "series step: a duration (5m) or seconds, whole minutes, at most 2000 points (default: about 60 points)", false, "string"}
	pLimit    = param{"limit", "query", "at most this many incidents, newest first (default and maximum 500)", false, "integer"}
	pIncident = param{"id", "path", "the incident id (from /api/v1/incidents)", true, "string"}
	pTrace    = param{"traceID", "path", "the trace id, 32 hex digits", true, "string"}
)

// gateParams are GET /api/v1/gate's (query.GateParams, documented).
var gateParams = []param{pAPI,
	{"max_radius", "query", "the candidate's max radius must not exceed it", false, "integer"},
	{"max_radius_increase", "query", "the candidate's max radius must not exceed the baseline's by more (needs a baseline)", false, "integer"},
	{"max_amplification", "query", "the candidate's max amplification must not exceed it (≥ 1)", false, "number"},
	{"min_traces", "query", "the effective sample size each side needs to be judged (default 10); less is undecided", false, "integer"},
	{"baseline", "query", "the baseline: a window FROM/TO, or a version with service", false, "string"},
	{"candidate", "query", "the candidate: a window FROM/TO (default from/to), or a version with service", false, "string"},
	{"service", "query", "compare baseline and candidate as service.versions of this service", false, "string"},
	{"baseline_version", "query", "the baseline's version, as baseline with service", false, "string"},
	{"candidate_version", "query", "the candidate's version, as candidate with service", false, "string"},
	{"undecided", "query", "how an undecided decision is answered: pass (200), fail (412), or a DURATION (default 10m, at most 24h): 200 while a Flagger canary — a POST payload's namespace, name and checksum — was first seen by this gate less than DURATION ago, 412 after, and at once without one (a GET)", false, "string"},
	{"always_200", "query", "true: answer 200 whatever the decision (read decision from the body; for an Argo Rollouts web metric)", false, "boolean"},
	pFrom, pTo}

var (
	opAPIs = operation{id: "listAPIs", summary: "Root APIs with their docs/SPEC.md §5.2 figures",
		description: "Every root API with traces in the range, each row the docs/SPEC.md §5.2 per-API fields (radius, amplification, suppressed retries, spurious requests prevented, misattributions, owners).",
		params:      []param{pFrom, pTo}, ok: "APIList"}
	opRadius = operation{id: "radiusSeries", summary: "A root API's storm radius over time",
		description: "Steps without traces are zeros: a root API with no trace in the range is a series of zeros. An API the store holds no trace of at all (within its retention) is a 404, as /graph and /gate answer for an API without traces in their range.",
		params:      []param{pAPI, pFrom, pTo, pStep}, ok: "Series", statuses: []int{404}}
	opGraph = operation{id: "callGraph", summary: "A root API's call graph with per-edge retries, claims and fail-open state, and the owners of its failures",
		params: []param{pAPI, pFrom, pTo}, ok: "Graph", statuses: []int{404}}
	opFleet = operation{id: "fleet", summary: "Fleet-wide radius figures",
		params: []param{pFrom, pTo}, ok: "Fleet"}
	opIncidents = operation{id: "listIncidents", summary: "Incidents (docs/SPEC.md §4.8) overlapping the range, newest first",
		description: "Detected from the minute rollups; an open incident keeps its id as it grows. Example traces are on the incident itself.",
		params:      []param{pFrom, pTo, pAPIOpt, pLimit}, ok: "IncidentList"}
	opIncident = operation{id: "getIncident", summary: "One incident with all its figures and example trace ids",
		params: []param{pIncident}, ok: "Incident", statuses: []int{404}}
	opTrace = operation{id: "getTrace", summary: "One trace: its hops, attempts, claims and what the analysis said",
		description: "The one answer read from raw spans.",
		params:      []param{pTrace}, ok: "Trace", statuses: []int{404}}
	opServices = operation{id: "services", summary: "Claim integrity per service, and the dependencies' fail-open state",
		params: []param{pFrom, pTo}, ok: "Services"}
	opWhatIf = operation{id: "whatIf", summary: "What-if: requests each service would see under a retry policy",
		description: `Either a chain ({"chain": ["A","B","C"], "fail": ["C"]}) or a root API's learned call graph ({"api": "...", "fail": ["service operation"]}, over the range).`,
		params:      []param{pFrom, pTo}, body: "WhatIfRequest", ok: "WhatIfAnswer", statuses: []int{413, 422}}
	opPlan = operation{id: "plan", summary: "Adoption planner: which services to move to error ownership first (docs/PLANNER.md)",
		description: "A greedy order of adoption steps over the root APIs' call graphs learned in the range: each step (a service, or a caller and callee that only help together) lowers the expected storm cost most — over every root API and every node that could fail, weighed by observed traffic and owned-failure rates — " +
			"and says, per API it changes, max and mean radius, the load on the failing node and the spurious requests before and after, one line of why, and the storm path it changes most. An unknown api is a 404.",
		params: []param{
			{"api", "query", `only these root APIs ("service operation"; repeatable; default: every one with traces in the range)`, false, "string"},
			{"steps", "query", "at most this many steps (default 0: every step that helps)", false, "integer"},
			{"budget", "query", "the retry budget B of an adopted service, a fraction of its requests from 0 to 1 (default 0.1)", false, "number"},
			{"fail", "query", "plan for these services or \"service operation\" nodes failing (repeatable; default: every node, weighed by its observed owned-failure rate)", false, "string"},
			pFrom, pTo},
		ok: "Plan", statuses: []int{404}}
	opGate = operation{id: "gate", summary: "Rollout gate: pass, fail or undecided — 200 pass, 412 fail, undecided as undecided says (a Flagger webhook, an Argo Rollouts web metric)",
		description: "Compares the candidate against absolute thresholds and, when given, a baseline: two windows (baseline=FROM/TO, candidate=FROM/TO, default candidate: from/to) or two service.versions of one service (service=S&baseline=V1&candidate=V2, looked for in from/to). " +
			"decision is pass, fail, or undecided: a candidate whose effective sample size is below min_traces is undecided whatever its figures; a baseline below it leaves max_radius_increase undecided (docs/ANALYSIS.md, Rollout gate). " +
			"Comparing two versions, the claim checks apply too: a candidate that stopped claiming errors or stopped honouring claims where its baseline did fails, with a reason saying which (the counts in candidate.claims and baseline.claims). " +
			"An unknown API is a 404; a parameter not listed here is a 400 naming it.",
		params: gateParams, ok: "GateDecision", statuses: []int{404, 412}}
	opGateHook = operation{id: "gateWebhook", summary: "Rollout gate as a Flagger webhook or an Argo Rollouts web metric (POST, jsonBody): the parameters in the payload's metadata",
		description: `Flagger posts {"name": ..., "namespace": ..., "phase": ..., "checksum": ..., "metadata": {"api": "...", "max_radius": "2", ...}}; the metadata holds GET /api/v1/gate's parameters, as strings (numbers and booleans are taken too; query parameters win; a key not among them is a 400 naming it). ` +
			`A POST body carries names with spaces (every root API) that a URL built by substitution cannot. 200 pass, 412 fail; undecided: by default 200 while the canary (namespace, name, checksum) was first seen by this gate less than 10 minutes ago, 412 after (undecided=pass|fail|DURATION); with always_200=true, 200 and the decision in the body.`,
		body: "FlaggerWebhook", ok: "GateDecision", statuses: []int{404, 412, 413}}
	opOpenAPI = operation{id: "openapi", summary: "This document", ok: "OpenAPI"}
)

// pathParam turns chi's {name} and {name:regex} into OpenAPI's {name}.
var pathParam = regexp.MustCompile(`\{([^}:]+)(:[^}]*)?\}`)

// openapi serves the OpenAPI 3 document built from the routes themselves.
func (s *server) openapi(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.openAPIDoc())
}

func (s *server) openAPIDoc() map[string]any {
	paths := map[string]any{}
	for _, rt := range s.routes() {
		p := "/api/v1" + pathParam.ReplaceAllString(rt.path, "{$1}")
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(rt.method)] = rt.op.doc(s.tokens != nil && rt.path != "/openapi.json")
	}
	for _, p := range []struct{ path, summary string }{
		{"/healthz", "Liveness: 200 while the process runs"},
		{"/readyz", "Readiness: 200 once the service takes data and answers, 503 while starting or stopping"},
		{"/metrics", "Prometheus metrics, including per root API stormradius_max_radius and friends"},
	} {
		paths[p.path] = map[string]any{"get": map[string]any{"operationId": strings.TrimPrefix(p.path, "/"), "summary": p.summary,
			"security":  []any{},
			"responses": map[string]any{"200": map[string]any{"description": "OK"}}}}
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "stormradius", "version": "1",
			"description": "Retry storm radius per root API, incidents, claim integrity, what-if and the rollout gate (docs/SPEC.md §5.3). Times are RFC 3339, unix seconds or now±DURATION, from " + timerange.RangeText + " (what int64 unix nanoseconds hold; others are a 400); ranges default to the last hour."},
		"paths":      paths,
		"components": components(),
		"security":   security(s.tokens != nil),
	}
}

func security(on bool) []any {
	if !on {
		return []any{}
	}
	return []any{map[string]any{"bearer": []any{}}}
}

func (op operation) doc(auth bool) map[string]any {
	params := []any{}
	for _, p := range op.params {
		params = append(params, map[string]any{"name": p.name, "in": p.in, "description": p.description,
			"required": p.required || p.in == "path", "schema": map[string]any{"type": p.typ}})
	}
	resp := map[string]any{"200": map[string]any{"description": "OK", "content": jsonContent(op.ok)}}
	statuses := append([]int{400, 500, 503}, op.statuses...)
	if auth {
		statuses = append(statuses, 401)
	}
	for _, st := range statuses {
		desc := http.StatusText(st)
		schema := "Error"
		if st == http.StatusPreconditionFailed {
			desc, schema = "the gate failed, or is undecided and answered so (undecided): the decision, its reasons and the figures compared", "GateDecision"
		}
		resp[strconv.Itoa(st)] = map[string]any{"description": desc, "content": jsonContent(schema)}
	}
	d := map[string]any{"operationId": op.id, "summary": op.summary, "parameters": params, "responses": resp}
	if op.description != "" {
		d["description"] = op.description
	}
	if op.body != "" {
		d["requestBody"] = map[string]any{"required": true, "content": jsonContent(op.body)}
	}
	if !auth {
		d["security"] = []any{}
	}
	return d
}

func jsonContent(schema string) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + schema}}}
}

// components describes the bodies; objects list their main fields and
// allow more (the documents grow fields, never lose them).
func components() map[string]any {
	obj := func(desc string, props map[string]any, required ...string) map[string]any {
		o := map[string]any{"type": "object", "description": desc, "properties": props, "additionalProperties": true}
		if len(required) > 0 {
			o["required"] = required
		}
		return o
	}
	str := map[string]any{"type": "string"}
	num := map[string]any{"type": "number"}
	integer := map[string]any{"type": "integer"}
	boolean := map[string]any{"type": "boolean"}
	arr := func(items any) map[string]any { return map[string]any{"type": "array", "items": items} }
	ref := func(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }
	// The documents' schemas are read off the Go types the handlers
	// encode, so that a field added to a document is documented with it.
	api := schemaOf(reflect.TypeFor[analysis.APIDoc](), "docs/SPEC.md §5.2 per-API figures", "api", "traces", "max_radius", "mean_radius")
	incident := schemaOf(reflect.TypeFor[analysis.IncidentDoc](), "an incident (docs/SPEC.md §4.8)",
		"id", "service", "operation", "start", "end", "open")
	service := schemaOf(reflect.TypeFor[analysis.ServiceDoc](), "claim integrity of a service", "service", "claims")
	return map[string]any{
		"schemas": map[string]any{
			"Error":   obj("an error", map[string]any{"error": str}, "error"),
			"API":     api,
			"APIList": obj("root APIs", map[string]any{"apis": arr(ref("API")), "from": str, "to": str}, "apis"),
			"Series": obj("a radius series", map[string]any{"api": str, "step_seconds": integer,
				"points": arr(obj("one step", map[string]any{"time": str, "traces": integer, "failed_traces": integer, "max_radius": integer, "mean_radius": num, "max_amplification": num}))}, "api", "points"),
			"Graph": obj("a call graph", map[string]any{"api": str,
				"nodes":  arr(obj("a node", map[string]any{"service": str, "operation": str, "requests": integer, "failed": integer})),
				"edges":  arr(obj("an edge", map[string]any{"from": map[string]any{"type": "object"}, "to": map[string]any{"type": "object"}, "calls": integer, "attempts": integer, "fail_open": boolean})),
				"owners": arr(map[string]any{"type": "object"})}, "api", "nodes", "edges"),
			"Fleet": obj("the fleet", map[string]any{"fleet": schemaOf(reflect.TypeFor[analysis.Fleet](), "fleet figures (docs/SPEC.md §5.2): mean_max_radius is the mean of the max_radius of the APIs with a failure event; mean_radius is the same figure under its first name",
				"max_radius", "mean_max_radius", "mean_radius"), "spans": integer, "traces": integer, "fragments": integer,
				"sampling": schemaOf(reflect.TypeFor[analysis.FleetSamplingDoc](), "how sure the figures are (docs/SPEC.md §4.9): traces received and estimated, effective sample size, 95% intervals, warnings",
					"estimated", "traces_received", "traces_estimated", "effective_sample_size", "warnings")}, "fleet", "sampling"),
			"Incident":     incident,
			"IncidentList": obj("incidents", map[string]any{"incidents": arr(ref("Incident"))}, "incidents"),
			"Service":      service,
			"Services":     obj("claim integrity", map[string]any{"services": arr(ref("Service")), "edges": arr(schemaOf(reflect.TypeFor[analysis.EdgeDoc](), "")), "from": str, "to": str}, "services"),
			"Trace": obj("a trace", map[string]any{"trace_id": str, "api": str, "hops": arr(map[string]any{"type": "object"}),
				"events": arr(map[string]any{"type": "object"}), "pending": boolean, "link": str}, "trace_id", "hops"),
			"WhatIfRequest": obj("a what-if question", map[string]any{"chain": arr(str), "api": str, "fail": arr(str), "retries": num,
				"budget": num, "error_rate": num, "policy": map[string]any{"type": "string", "enum": []string{"naive", "budget", "ownership"}}}, "fail"),
			"WhatIfAnswer": obj("requests per service", map[string]any{"policy": str, "requests": map[string]any{"type": "object", "additionalProperties": num}}, "policy", "requests"),
			"GateDecision": gateDecision(),
			"Plan":         schemaOf(reflect.TypeFor[plan.Plan](), "an adoption plan (docs/PLANNER.md): the APIs' figures before any step, then the steps", "budget", "weights", "cost", "apis", "steps"),
			"OpenAPI":      map[string]any{"type": "object"},
			"FlaggerWebhook": obj("a Flagger webhook payload, or an Argo Rollouts web metric's jsonBody of the same shape; other top-level fields are let through", map[string]any{
				"name": str, "namespace": str, "phase": str, "checksum": str,
				"metadata": map[string]any{"type": "object", "description": "GET /api/v1/gate's parameters (any other key is a 400)",
					"additionalProperties": map[string]any{"oneOf": []any{str, map[string]any{"type": "number"}, map[string]any{"type": "boolean"}}}}}),
		},
		"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
	}
}

// gateDecision is the gate's answer, read off gate.Decision, with its
// decision's values.
func gateDecision() map[string]any {
	d := schemaOf(reflect.TypeFor[gate.Decision](), "the gate's decision: pass, fail or undecided (too little evidence), with the figures compared", "decision", "pass", "reasons", "api", "candidate")
	props := d["properties"].(map[string]any)
	props["decision"] = map[string]any{"type": "string", "enum": []string{gate.Pass, gate.Fail, gate.Undecided}}
	for _, side := range []string{"candidate", "baseline"} {
		claims := props[side].(map[string]any)["properties"].(map[string]any)["claims"].(map[string]any)
		claims["description"] = "with service: how the version's hops spoke the claim protocol over its traces (estimated counts). " +
			"failed_hops: its failed hops; claimed_hops: those that answered a valid claim (claimed or unclaimed); " +
			"unclaimed_answers: failed attempts answered unclaimed on the retry-enabled calls its hops made; retried_unclaimed: those another attempt of the same call followed; " +
			"suppressed_retries: its calls on retry-enabled edges that declined a retry of an unclaimed answer (marked retry.suppressed, or failed at their first unclaimed answer before the edge's most attempts). " +
			fmt.Sprintf("Comparing two versions, a candidate with %d failed hops or more none of which answered a claim, where the baseline's did, fails (stopped claiming errors); ", gate.MinClaimEvidence) +
			fmt.Sprintf("one with %d unclaimed answers or more that retried some and suppressed none, where the baseline suppressed some, fails (stopped honouring claims). Absent for a window.", gate.MinClaimEvidence)
	}
	return d
}

// schemaOf is the JSON schema of a document type as encoding/json writes
// it: its fields by their json names, their types read off the Go types.
// required names the fields every answer has.
func schemaOf(t reflect.Type, desc string, required ...string) map[string]any {
	o := typeSchema(t)
	if desc != "" {
		o["description"] = desc
	}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// typeSchema is the JSON schema of t's values.
func typeSchema(t reflect.Type) map[string]any {
	if t == reflect.TypeFor[time.Time]() {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeSchema(t.Elem())
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem())}
	case reflect.Struct:
		props := map[string]any{}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
				// An embedded struct's fields are the document's own, as
				// encoding/json writes them.
				for k, v := range typeSchema(f.Type)["properties"].(map[string]any) {
					props[k] = v
				}
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = typeSchema(f.Type)
		}
		return map[string]any{"type": "object", "properties": props, "additionalProperties": true}
	}
	return map[string]any{}
}
