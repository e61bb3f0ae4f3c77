// Package web serves stormradius over HTTP: the REST API of docs/SPEC.md §5.3
// (chi), its OpenAPI 3 document, and the embedded web UI. Handlers only
// parse, call package query, and write JSON: every answer comes from the
// same library the CLI uses.
package web

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/bearer"
	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/radius"
	"github.com/stormradius/stormradius/store"
)

// Config configures the HTTP front end. Zero fields take their defaults.
type Config struct {
	// Tokens, when not empty, are the bearer tokens the API accepts
	// (Authorization: Bearer <token>); the UI's pages themselves are open
	// and ask for a token when the API needs one.
	Tokens []string
	// Timeout bounds a request (default 30 s).
	Timeout time.Duration
	// CORSOrigins, when not empty, are the origins allowed to call the API
	// from a browser (off by default).
	CORSOrigins []string
	// MaxBodyBytes bounds a request body (default 1 MiB).
	MaxBodyBytes int64
	// TraceLinkTemplate links a trace to the user's own trace viewer:
	// "{trace_id}" is replaced (e.g. https://jaeger.example/trace/{trace_id}).
	TraceLinkTemplate string
	// CacheBytes bounds the memory of the answer cache (default
	// DefaultCacheBytes; negative: no cache, every request computed).
	CacheBytes int64
	// MetricsMaxAPIs bounds the root APIs with /metrics series of their
	// own (Collector.MaxAPIs; default DefaultMetricsMaxAPIs).
	MetricsMaxAPIs int
	// Logger receives errors (slog.Default() when nil).
	Logger *slog.Logger
	// Now returns the current time (time.Now when nil).
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// server holds the handlers' dependencies.
type server struct {
	svc    *query.Service
	cfg    Config
	tokens *bearer.Tokens
	cache  *answers // nil: no cache
	// canaries: when the gate first saw each Flagger canary.
	canaries canaries
}

// Handler returns the REST API under /api/v1 and the UI under /.
func Handler(svc *query.Service, cfg Config) http.Handler {
	cfg.defaults()
	s := &server{svc: svc, cfg: cfg, tokens: bearer.New(cfg.Tokens)}
	if cfg.CacheBytes > 0 {
		s.cache = newAnswers(cfg.CacheBytes)
	}
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(s.cors)
		r.Use(s.auth)
		r.Use(middleware.Timeout(cfg.Timeout))
		r.Use(middleware.Compress(compressLevel, "application/json"))
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+" (see /api/v1/openapi.json)")
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
		})
		for _, rt := range s.routes() {
			r.Method(rt.method, rt.path, rt.handler)
		}
	})
	r.Mount("/", uiHandler(cfg))
	return r
}

// route is one endpoint: the OpenAPI document is built from the same list.
type route struct {
	method, path string
	handler      http.Handler
	op           operation
}

func (s *server) routes() []route {
	apis := func(d *analysis.Document) map[string]any { return map[string]any{"apis": d.APIs} }
	fleet := func(d *analysis.Document) map[string]any {
		return map[string]any{"fleet": d.Fleet, "spans": d.Spans, "traces": d.Traces, "fragments": d.Fragments, "sampling": d.Sampling,
			"split_traces": d.SplitTraces}
	}
	services := func(d *analysis.Document) map[string]any {
		return map[string]any{"services": d.Services, "edges": d.Edges}
	}
	return []route{
		{"GET", "/apis", s.cached("apis", s.figuresKey, s.figures(apis)), opAPIs},
		{"GET", "/radius", s.cached("radius", s.radiusKey, s.radius), opRadius},
		{"GET", "/graph", s.cached("graph", s.graphKey, s.graph), opGraph},
		{"GET", "/fleet", s.cached("fleet", s.figuresKey, s.figures(fleet)), opFleet},
		{"GET", "/incidents", s.cached("incidents", s.incidentsKey, s.incidents), opIncidents},
		{"GET", "/incidents/{id}", s.cached("incident", s.incidentKey, s.incident), opIncident},
		// A trace is read from its spans, which the write position does
		// not follow: kept while the store's stamp of the trace holds.
		{"GET", "/traces/{traceID}", s.cachedBy("trace", s.traceKey, s.trace, false), opTrace},
		{"GET", "/services", s.cached("services", s.figuresKey, s.figures(services)), opServices},
		{"POST", "/whatif", s.cached("whatif", s.whatifKey, s.whatif), opWhatIf},
		{"GET", "/plan", s.cached("plan", s.planKey, s.plan), opPlan},
		{"GET", "/gate", s.cached("gate", s.gateKey, s.gate), opGate},
		{"POST", "/gate", s.h(s.gate), opGateHook},
		{"GET", "/openapi.json", http.HandlerFunc(s.openapi), opOpenAPI},
	}
}

// h adapts a handler that returns a value (written as JSON with status
// 200) or an error (mapped to a status).
func (s *server) h(fn func(r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// statusError carries a status of its own (the gate's 412).
type statusError struct {
	status int
	body   any
}

func (e *statusError) Error() string { return http.StatusText(e.status) }

// fail maps an error to a status: never a stack trace, and internal
// details only in the log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *statusError
	switch {
	case errors.As(err, &se):
		writeJSON(w, se.status, se.body)
	case errors.Is(err, query.ErrNotFound), errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, query.ErrBadRequest), errors.Is(err, gate.ErrBadThresholds):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, radius.ErrOverflow):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "the request took longer than "+s.cfg.Timeout.String())
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrClosed):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "the store is unavailable: retry later")
		s.cfg.Logger.Warn("api: store unavailable", "path", r.URL.Path, "err", err)
	case errors.Is(err, context.Canceled):
		// The client went away.
	default:
		writeError(w, http.StatusInternalServerError, "internal error")
		s.cfg.Logger.Error("api", "path", r.URL.Path, "err", err)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// auth checks the bearer token (bearer.Tokens: digests compared in constant
// time, every token, so timing says nothing about which one matched).
func (s *server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tokens == nil || r.Method == http.MethodOptions || r.URL.Path == "/api/v1/openapi.json" {
			next.ServeHTTP(w, r)
			return
		}
		if !s.tokens.Allow(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stormradius"`)
			writeError(w, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer <token>)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cors answers cross-origin requests from the configured origins only.
func (s *server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allowed := false
		for _, o := range s.cfg.CORSOrigins {
			if o == "*" || o == origin {
				allowed = true
			}
		}
		if origin != "" && allowed {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Vary", "Origin")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			if r.Method == http.MethodOptions {
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// badParam is a 400 naming the parameter.
func badParam(name, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", query.ErrBadRequest, name, fmt.Sprintf(format, a...))
}

// rangeOf reads from and to, default the last hour.
func (s *server) rangeOf(r *http.Request) (store.Query, error) {
	return query.ParseRange(r.URL.Query(), s.now(r))
}

// apiRange reads the root API (required) and the range of a per-API
// question.
func (s *server) apiRange(r *http.Request) (string, store.Query, error) {
	api := r.URL.Query().Get("api")
	if api == "" {
		return "", store.Query{}, badParam("api", `required: the root API as "service operation"`)
	}
	q, err := s.rangeOf(r)
	return api, q, err
}

// figures answers from the document of the range (without incidents):
// pick chooses its parts.
func (s *server) figures(pick func(d *analysis.Document) map[string]any) func(r *http.Request) (any, error) {
	return func(r *http.Request) (any, error) {
		q, err := s.rangeOf(r)
		if err != nil {
			return nil, err
		}
		d, err := s.document(r.Context(), q)
		if err != nil {
			return nil, err
		}
		out := pick(d)
		out["from"], out["to"] = time.Unix(0, q.From).UTC(), time.Unix(0, q.To).UTC()
		return out, nil
	}
}

func (s *server) radius(r *http.Request) (any, error) {
	api, q, step, err := s.radiusArgs(r)
	if err != nil {
		return nil, err
	}
	return s.svc.Series(r.Context(), api, q, step)
}

// radiusArgs reads a series' API, range and step.
func (s *server) radiusArgs(r *http.Request) (api string, q store.Query, step time.Duration, err error) {
	if api, q, err = s.apiRange(r); err != nil {
		return "", q, 0, err
	}
	if v := r.URL.Query().Get("step"); v != "" {
		if step, err = parseStep(v); err != nil {
			return "", q, 0, badParam("step", "%v", err)
		}
	} else {
		// About 60 points, whole minutes.
		step = max(time.Minute, time.Duration(query.Span(q)/60)/time.Minute*time.Minute)
	}
	return api, q, step, nil
}

// parseStep reads a duration ("5m") or a number of seconds ("300").
func parseStep(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 || n > 366*24*3600 {
			return 0, fmt.Errorf("%d seconds out of range", n)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("want a duration (5m) or seconds (300)")
	}
	return d, nil
}

func (s *server) graph(r *http.Request) (any, error) {
	api, q, err := s.apiRange(r)
	if err != nil {
		return nil, err
	}
	return s.svc.Graph(r.Context(), api, q)
}

// traceParam returns the request's trace id.
func traceParam(r *http.Request) (graph.TraceID, error) {
	raw := chi.URLParam(r, "traceID")
	b, err := hex.DecodeString(raw)
	if err != nil || len(b) != len(graph.TraceID{}) {
		return graph.TraceID{}, badParam("traceID", "%q is not a trace id (32 hex digits)", raw)
	}
	return graph.TraceID(b), nil
}

func (s *server) trace(r *http.Request) (any, error) {
	id, err := traceParam(r)
	if err != nil {
		return nil, err
	}
	v, err := s.svc.Trace(r.Context(), id)
	if err != nil {
		return nil, err
	}
	link := ""
	if s.cfg.TraceLinkTemplate != "" {
		link = strings.ReplaceAll(s.cfg.TraceLinkTemplate, "{trace_id}", v.TraceID)
	}
	return struct {
		*query.TraceView
		Link string `json:"link,omitempty"`
	}{v, link}, nil
}

// decodeBody reads one JSON object of at most MaxBodyBytes into dst;
// strict refuses unknown fields.
func (s *server) decodeBody(r *http.Request, dst any, strict bool, what string) error {
	body := http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(dst)
	if err == nil && dec.More() {
		return badParam("body", "one JSON object expected")
	}
	if err == nil {
		_, err = io.Copy(io.Discard, body)
	}
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mbe):
		return &statusError{http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("body larger than %d bytes", mbe.Limit)}}
	default:
		return badParam("body", "want %s: %v", what, err)
	}
}

func (s *server) whatif(r *http.Request) (any, error) {
	var req query.WhatIfRequest
	if err := s.decodeBody(r, &req, true, "a JSON what-if question"); err != nil {
		return nil, err
	}
	q, err := s.rangeOf(r)
	if err != nil {
		return nil, err
	}
	return s.svc.WhatIfOver(r.Context(), req, q)
}

// planArgs reads an adoption plan's request: the range, api and fail
// (repeatable), steps and budget.
func (s *server) planArgs(r *http.Request) (query.PlanRequest, store.Query, error) {
	q, err := s.rangeOf(r)
	if err != nil {
		return query.PlanRequest{}, q, err
	}
	v := r.URL.Query()
	req := query.PlanRequest{APIs: v["api"], Fail: v["fail"]}
	if x := v.Get("steps"); x != "" {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 || n > query.MaxPlanSteps {
			return req, q, badParam("steps", "%q: want a whole number from 0 (every step that helps) to %d", x, query.MaxPlanSteps)
		}
		req.Steps = n
	}
	if x := v.Get("budget"); x != "" {
		b, err := strconv.ParseFloat(x, 64)
		if err != nil || !(b >= 0 && b <= 1) {
			return req, q, badParam("budget", "%q: want a fraction of requests between 0 and 1 (0.1 is 10%%)", x)
		}
		req.Budget = &b
	}
	return req, q, req.Check()
}

func (s *server) plan(r *http.Request) (any, error) {
	req, q, err := s.planArgs(r)
	if err != nil {
		return nil, err
	}
	return s.svc.PlanOver(r.Context(), req, q)
}

func (s *server) incidents(r *http.Request) (any, error) {
	q, limit, err := s.incidentsArgs(r)
	if err != nil {
		return nil, err
	}
	list, err := s.svc.Incidents(r.Context(), q, limit)
	if err != nil {
		return nil, err
	}
	return map[string]any{"incidents": list}, nil
}

// incidentsArgs reads the range, API and limit of an incident list.
func (s *server) incidentsArgs(r *http.Request) (q store.Query, limit int, err error) {
	if q, err = s.rangeOf(r); err != nil {
		return q, 0, err
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit <= 0 {
			return q, 0, badParam("limit", "%q is not a positive whole number", v)
		}
	}
	q.API = r.URL.Query().Get("api")
	return q, limit, nil
}

func (s *server) incident(r *http.Request) (any, error) {
	return s.svc.Incident(r.Context(), chi.URLParam(r, "id"))
}
