package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stormradius/stormradius/ownership"
)

// call is one outbound call an endpoint makes.
type call struct {
	to, method, path string
	failOpen         bool // the caller answers without it when it fails
}

// endpoint is one route of a service.
type endpoint struct {
	method, path string
	calls        []call
	parallel     bool          // calls fan out concurrently
	work         time.Duration // time spent on the request's own work
	errorRate    float64       // the endpoint's own background error rate
}

// service is one service of the mesh.
type service struct {
	name      string
	endpoints []endpoint
	// legacy: no ownership middleware: stock OpenTelemetry instrumentation
	// (otelhttp), no claims and no retries.
	legacy bool
	// dropsContext: calls downstream without the request's context, so
	// they start a new trace (the shape of a service that lost its
	// context: a context drop).
	dropsContext bool
}

// The mesh: a shop. frontend GET /checkout reaches vault eight calls deep
// (frontend → checkout → orders → payments → fraud → risk → ledger →
// accounts → vault) and fans out on the way; frontend GET /product is
// shallow. Fail-open dependencies: recommendations, reviews and
// notifications (the page renders without them). reviews runs without the
// middleware; notifications drops its context when it calls email.
const (
	FailingService   = "vault"
	FailingOperation = "GET /secret"
	RootService      = "frontend"
	DeepAPI          = "frontend GET /checkout"
	ShallowAPI       = "frontend GET /product"
)

var mesh = []service{
	{name: "frontend", endpoints: []endpoint{
		{method: "GET", path: "/checkout", parallel: true, work: 200 * time.Microsecond, calls: []call{
			{to: "checkout", method: "GET", path: "/checkout"},
			{to: "recommendations", method: "GET", path: "/recommendations", failOpen: true},
		}},
		{method: "GET", path: "/product", parallel: true, work: 200 * time.Microsecond, calls: []call{
			{to: "catalog", method: "GET", path: "/item"},
			{to: "reviews", method: "GET", path: "/reviews", failOpen: true},
		}},
	}},
	{name: "checkout", endpoints: []endpoint{{method: "GET", path: "/checkout", work: 300 * time.Microsecond, calls: []call{
		{to: "cart", method: "GET", path: "/cart"},
		{to: "orders", method: "PUT", path: "/orders"},
		{to: "notifications", method: "POST", path: "/notify", failOpen: true},
	}}}},
	{name: "cart", endpoints: []endpoint{{method: "GET", path: "/cart", work: 200 * time.Microsecond, calls: []call{
		{to: "inventory", method: "GET", path: "/stock"},
	}}}},
	{name: "inventory", endpoints: []endpoint{{method: "GET", path: "/stock", work: 500 * time.Microsecond, errorRate: 0.002}}},
	{name: "orders", endpoints: []endpoint{{method: "PUT", path: "/orders", work: 300 * time.Microsecond, calls: []call{
		{to: "payments", method: "GET", path: "/authorize"},
	}}}},
	{name: "payments", endpoints: []endpoint{{method: "GET", path: "/authorize", work: 200 * time.Microsecond, calls: []call{
		{to: "fraud", method: "GET", path: "/score"},
	}}}},
	{name: "fraud", endpoints: []endpoint{{method: "GET", path: "/score", work: 200 * time.Microsecond, calls: []call{
		{to: "risk", method: "GET", path: "/assess"},
	}}}},
	{name: "risk", endpoints: []endpoint{{method: "GET", path: "/assess", work: 200 * time.Microsecond, calls: []call{
		{to: "ledger", method: "GET", path: "/balance"},
	}}}},
	{name: "ledger", endpoints: []endpoint{{method: "GET", path: "/balance", work: 200 * time.Microsecond, calls: []call{
		{to: "accounts", method: "GET", path: "/account"},
	}}}},
	{name: "accounts", endpoints: []endpoint{{method: "GET", path: "/account", work: 200 * time.Microsecond, calls: []call{
		{to: "vault", method: "GET", path: "/secret"},
	}}}},
	{name: "vault", endpoints: []endpoint{{method: "GET", path: "/secret", work: 500 * time.Microsecond}}},
	{name: "recommendations", endpoints: []endpoint{{method: "GET", path: "/recommendations", work: 300 * time.Microsecond, errorRate: 0.02, calls: []call{
		{to: "catalog", method: "GET", path: "/item"},
	}}}},
	{name: "catalog", endpoints: []endpoint{{method: "GET", path: "/item", work: 400 * time.Microsecond, errorRate: 0.002}}},
	{name: "reviews", legacy: true, endpoints: []endpoint{{method: "GET", path: "/reviews", work: 300 * time.Microsecond, errorRate: 0.01, calls: []call{
		{to: "catalog", method: "GET", path: "/item"},
	}}}},
	{name: "notifications", dropsContext: true, endpoints: []endpoint{{method: "POST", path: "/notify", work: 200 * time.Microsecond, calls: []call{
		{to: "email", method: "POST", path: "/send"},
	}}}},
	{name: "email", endpoints: []endpoint{{method: "POST", path: "/send", work: 300 * time.Microsecond}}},
}

// Policy is how a phase's services retry.
type Policy struct {
	Name string // "naive", "ownership", or "mixed" for some services adopted
	// Version is the service.version every service reports under a
	// uniform policy (Adopted empty). Under a mixed one each reports its
	// mode: Ownership.Version when adopted, else Naive.Version.
	Version string
	// Ownership: every service but the legacy one (reviews) adopts the
	// claim protocol. An adopted service answers claims (claimed for its
	// own errors, unclaimed for a downstream failure already retried) and
	// its client retries only claimed or missing-claim errors; the others
	// retry every failure and send no claims, as retry clients do today.
	Ownership bool
	// Adopted, when Ownership is false, names the services that adopt the
	// protocol (the others run as under Naive); legacy services never do.
	Adopted []string
}

// adopts reports whether the service named name runs the claim protocol
// under p (its legacy flag aside).
func (p Policy) adopts(name string) bool {
	return p.Ownership || slices.Contains(p.Adopted, name)
}

// versionOf is the service.version service s reports under p.
func (p Policy) versionOf(s service) string {
	switch {
	case p.Ownership || len(p.Adopted) == 0:
		return p.Version
	case !s.legacy && p.adopts(s.name):
		return Ownership.Version
	}
	return Naive.Version
}

// meshConfig is what a running mesh needs.
type meshConfig struct {
	policy  Policy
	retries int
	failing *atomic.Uint64 // the failing service's error rate, as math.Float64bits
	// exporter makes a service's span exporter, sending through client.
	exporter func(ctx context.Context, client *http.Client) (sdktrace.SpanExporter, error)
	// quiet: no endpoint fails on its own (no background error rates),
	// only the failing service: every figure then follows from its fault.
	quiet bool
}

// running is a started mesh.
type running struct {
	servers []*http.Server
	tps     []*sdktrace.TracerProvider
	urls    map[string]string
	wg      sync.WaitGroup
	idle    *http.Transport
	// export carries the exporters' requests: the mesh's own, so that
	// closing it leaves no connection to the receiver behind (the OTLP
	// exporter's default transport is a global one).
	export *http.Transport
}

// startMesh starts every service of the mesh on loopback.
func startMesh(ctx context.Context, cfg meshConfig) (*running, error) {
	m := &running{urls: map[string]string{}}
	m.idle = &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	m.export = &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	exportClient := &http.Client{Transport: m.export, Timeout: 30 * time.Second}
	lns := make([]net.Listener, len(mesh))
	for i, s := range mesh {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lns[:i] {
				l.Close()
			}
			return nil, fmt.Errorf("demo mesh: %s: %w", s.name, err)
		}
		lns[i] = ln
		m.urls[s.name] = "http://" + ln.Addr().String()
	}
	prop := propagation.TraceContext{}
	for i, s := range mesh {
		exp, err := cfg.exporter(ctx, exportClient)
		if err != nil {
			m.close(context.Background())
			for _, l := range lns[i:] {
				l.Close()
			}
			return nil, fmt.Errorf("demo mesh: exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(
			sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond),
				sdktrace.WithMaxQueueSize(1<<16), sdktrace.WithMaxExportBatchSize(2048)),
			sdktrace.WithResource(resource.NewSchemaless(
				attribute.String("service.name", s.name),
				attribute.String("service.version", cfg.policy.versionOf(s)))),
		)
		m.tps = append(m.tps, tp)
		h := m.handler(s, cfg, tp, prop)
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		m.servers = append(m.servers, srv)
		m.wg.Add(1)
		go func(ln net.Listener) {
			defer m.wg.Done()
			srv.Serve(ln)
		}(lns[i])
	}
	return m, nil
}

// handler builds service s: its routes, wrapped in the middleware (or in
// stock instrumentation for a legacy service), calling its dependencies
// through the matching clients.
func (m *running) handler(s service, cfg meshConfig, tp *sdktrace.TracerProvider, prop propagation.TextMapPropagator) http.Handler {
	var client, failOpen *http.Client
	adopted := !s.legacy && cfg.policy.adopts(s.name)
	if s.legacy {
		t := otelhttp.NewTransport(m.idle, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop))
		client = &http.Client{Transport: t}
		failOpen = client
	} else {
		opts := []ownership.Option{
			ownership.WithTracerProvider(tp), ownership.WithPropagator(prop),
			ownership.WithMaxRetries(cfg.retries), ownership.WithBackoff(2*time.Millisecond, 20*time.Millisecond),
			ownership.WithBudget(0, 0), // the same retries in both phases: only the protocol differs
		}
		if !adopted {
			opts = append(opts, ownership.WithPolicy(ownership.Naive))
		}
		client = &http.Client{Transport: ownership.Transport(m.idle, opts...)}
		failOpen = &http.Client{Transport: ownership.Transport(m.idle, append(opts, ownership.WithFailOpen())...)}
	}
	mux := http.NewServeMux()
	for _, e := range s.endpoints {
		mux.HandleFunc(e.method+" "+e.path, m.endpointFunc(s, e, cfg, client, failOpen))
	}
	if s.legacy {
		return otelhttp.NewHandler(mux, s.name, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
	}
	opts := []ownership.Option{ownership.WithTracerProvider(tp), ownership.WithPropagator(prop)}
	if !adopted {
		opts = append(opts, ownership.WithoutClaims())
	}
	return ownership.Handler(mux, opts...)
}

// endpointFunc serves one endpoint: its own work (which may fail), then
// its calls; a failed fail-close call fails the request (502), a failed
// fail-open call is ignored.
func (m *running) endpointFunc(s service, e endpoint, cfg meshConfig, client, failOpen *http.Client) http.HandlerFunc {
	failing := s.name == FailingService
	if cfg.quiet {
		e.errorRate = 0
	}
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))
		time.Sleep(e.work)
		if fails(e, failing, cfg.failing, r) {
			http.Error(w, s.name+": internal error", http.StatusServiceUnavailable)
			return
		}
		ctx := r.Context()
		if s.dropsContext {
			// The bug being shown: the outbound call loses the request's
			// context, and with it the trace.
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ctx = c
		}
		do := func(c call) bool {
			if c.failOpen {
				return m.do(ctx, failOpen, c, r.URL.RawQuery)
			}
			return m.do(ctx, client, c, r.URL.RawQuery)
		}
		failed := -1
		if e.parallel {
			ok := make([]bool, len(e.calls))
			var wg sync.WaitGroup
			for i, c := range e.calls {
				wg.Add(1)
				go func() { defer wg.Done(); ok[i] = do(c) }()
			}
			wg.Wait()
			for i, c := range e.calls {
				if !ok[i] && !c.failOpen {
					failed = i
					break
				}
			}
		} else {
			for i, c := range e.calls {
				if !do(c) && !c.failOpen {
					failed = i
					break
				}
			}
		}
		if failed >= 0 {
			http.Error(w, s.name+": "+e.calls[failed].to+" failed", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	}
}

// Accounts are the keys requests carry (?account=N, forwarded by every
// hop): during the incident the failing service's broken shard holds the
// first share of them, whose requests fail every time (a retry cannot help
// them), and the rest fail transiently now and then (a retry does).
const (
	Accounts      = 1000
	TransientRate = 0.05
)

// fails decides whether a request to endpoint e fails on its own: the
// failing service during the incident (broken share in failing), or an
// endpoint's background error rate.
func fails(e endpoint, isFailing bool, failing *atomic.Uint64, r *http.Request) bool {
	if !isFailing {
		return e.errorRate > 0 && rand.Float64() < e.errorRate
	}
	broken := loadRate(failing)
	if broken <= 0 {
		return false
	}
	acct, err := strconv.Atoi(r.URL.Query().Get("account"))
	if err == nil && acct >= 0 && float64(acct%Accounts) < broken*Accounts {
		return true
	}
	return rand.Float64() < TransientRate
}

// do makes one call and reports whether it succeeded.
func (m *running) do(ctx context.Context, cl *http.Client, c call, query string) bool {
	var body io.Reader
	if c.method == http.MethodPost || c.method == http.MethodPut {
		body = http.NoBody
	}
	u := m.urls[c.to] + c.path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u, body)
	if err != nil {
		return false
	}
	resp, err := cl.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode < 500
}

// close stops the servers (in-flight requests finish), then flushes every
// span to the receiver.
func (m *running) close(ctx context.Context) error {
	var errs []error
	for _, s := range m.servers {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := s.Shutdown(sctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	m.wg.Wait()
	for _, tp := range m.tps {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := tp.Shutdown(tctx); err != nil {
			errs = append(errs, fmt.Errorf("flush spans: %w", err))
		}
		cancel()
	}
	m.idle.CloseIdleConnections()
	m.export.CloseIdleConnections()
	return errors.Join(errs...)
}

// otlpExporter exports to the demo's own OTLP/HTTP receiver (the client's
// Timeout bounds each export).
func otlpExporter(endpoint string) func(ctx context.Context, client *http.Client) (sdktrace.SpanExporter, error) {
	return func(ctx context.Context, client *http.Client) (sdktrace.SpanExporter, error) {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithHTTPClient(client))
	}
}
