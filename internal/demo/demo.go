// Package demo runs the whole story on one machine: stormradius serving on
// the embedded store, a mesh of real HTTP services on loopback instrumented
// with the OpenTelemetry SDK and exporting OTLP to it, and a load
// generator. One incident (a deep service degrades to a high error rate)
// runs twice: with naive retries at every hop, then with the
// error-ownership middleware. The figures it reports are read back from the
// store through the same code the REST API uses.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// The two phases.
var (
	Naive     = Policy{Name: "naive", Version: "1.0.0-naive"}
	Ownership = Policy{Name: "ownership", Version: "1.1.0-ownership", Ownership: true}
)

// Config is a demo run.
type Config struct {
	// Data is the embedded store's directory.
	Data string
	// Duration is each phase's length. The first phase ends on the first
	// minute boundary after half of it (so it lasts from half the duration
	// to a minute more), so that the two phases fall in different minutes
	// (the rollups' grain) and windows.
	Duration time.Duration
	// ErrorRate is the share of the failing service's accounts on its
	// broken shard during the incident (default 0.3): their requests fail
	// every time; the others fail TransientRate of the time.
	ErrorRate float64
	// Rate is the root requests per second (default 20).
	Rate float64
	// Retries is the retries after a first attempt, at every hop, in both
	// phases (default 1).
	Retries int
	// Window is the analysis window (default 1 min: each phase is analysed
	// in windows of its own).
	Window time.Duration
	// HTTPAddr serves the REST API and the UI ("" for none).
	HTTPAddr string
	// Logger is the service's logger (slog.Default() when nil).
	Logger *slog.Logger
	// Progress receives progress lines (nil for none); a terminal gets
	// one line rewritten in place.
	Progress io.Writer
	// Terminal: Progress is a terminal.
	Terminal bool
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 15 * time.Second
	}
	if c.ErrorRate <= 0 {
		c.ErrorRate = 0.3
	}
	if c.Rate <= 0 {
		c.Rate = 20
	}
	if c.Retries <= 0 {
		c.Retries = 1
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Phase is one run of the incident, as the store reports it.
type Phase struct {
	Policy Policy
	// From and To bound the phase's minutes (To exclusive).
	From, To time.Time
	// Sent and Failed count the load generator's root requests; Skipped
	// those it could not send (too many in flight).
	Sent, Failed, Skipped int64
	// Report is the docs/SPEC.md §5.2 document of the phase's traces, read from
	// the store.
	Report *analysis.Document
	// Load is, per root API, the requests the failing service served per
	// root request (from the API's stored call graph; absent when the API
	// does not reach it).
	Load map[string]float64
}

// Result is a finished demo.
type Result struct {
	Before, After Phase
	// Gate compares the ownership phase (candidate) with the naive one
	// (baseline) on the deep API: frontend's two versions.
	Gate *gate.Decision
	// GateBack is the same gate the other way round.
	GateBack *gate.Decision
	// UI is the address serving the API and UI ("" without).
	UI string
	// Query answers from the demo's store (valid until done returns).
	Query *query.Service
}

// GateThresholds are the thresholds of the demo's gate: no radius increase
// and a max radius of 3.
func GateThresholds() gate.Thresholds {
	three, zero := 3, 0
	return gate.Thresholds{MaxRadius: &three, MaxRadiusIncrease: &zero, MinTraces: 10}
}

// Run runs the demo, then calls done with the result while the service is
// still serving (done returns when the demo should stop), then shuts down.
func Run(ctx context.Context, cfg Config, done func(context.Context, *Result) error) error {
	cfg.defaults()
	in, err := startInstance(ctx, appConfig(cfg.Data, cfg.Window, cfg.HTTPAddr, cfg.Logger))
	if err != nil {
		return err
	}
	res, err := run(ctx, cfg, in.addrs)
	if err == nil && done != nil {
		err = done(ctx, res)
	}
	return errors.Join(err, in.close())
}

// appConfig is the stormradius the demo runs: the embedded store in data,
// OTLP/HTTP on a loopback port, the REST API and UI on httpAddr ("" for
// none).
func appConfig(data string, window time.Duration, httpAddr string, logger *slog.Logger) app.Config {
	acfg := app.Config{
		Store: storeurl.Options{Data: data, Window: window, Logger: logger},
		Pipeline: pipeline.Config{TraceIdle: time.Second, MaxTraceAge: 30 * time.Second, MaxInflightSpans: 1_000_000,
			Retention: -1, Analysis: analysis.Config{Window: window}},
		OTLP:     otlp.Config{HTTPAddr: "127.0.0.1:0", DisableGRPC: true},
		HTTPAddr: httpAddr,
		Logger:   logger,
	}
	if httpAddr != "" {
		acfg.Web = &web.Config{Logger: logger}
	}
	return acfg
}

// instance is a running stormradius.
type instance struct {
	addrs app.Addrs
	stop  context.CancelFunc
	done  chan error // app.Run's result
}

// startInstance runs stormradius until close, and returns once it accepts
// data.
func startInstance(ctx context.Context, acfg app.Config) (*instance, error) {
	ready := make(chan app.Addrs, 1)
	acfg.Ready = func(a app.Addrs) { ready <- a }
	actx, stop := context.WithCancel(ctx)
	in := &instance{stop: stop, done: make(chan error, 1)}
	go func() { in.done <- app.Run(actx, acfg) }()
	select {
	case in.addrs = <-ready:
		return in, nil
	case err := <-in.done:
		stop()
		return nil, fmt.Errorf("start stormradius: %w", err)
	}
}

// close shuts the service down (it analyses what is pending and closes the
// store) and waits for it.
func (in *instance) close() error {
	in.stop()
	return <-in.done
}

// flush analyses every pending trace: once it returns, the store answers
// for every span acknowledged before.
func flush(ctx context.Context, p *pipeline.Pipeline) error {
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		return fmt.Errorf("analyse: %w", err)
	}
	return nil
}

// run runs both phases and reads their results back.
func run(ctx context.Context, cfg Config, addrs app.Addrs) (*Result, error) {
	endpoint := "http://" + addrs.OTLPHTTP.String() + "/v1/traces"
	start := time.Now()
	// The phases meet on a minute boundary (rollups are per minute): the
	// first after at least half the duration.
	boundary := start.Add(cfg.Duration / 2).Truncate(time.Minute).Add(time.Minute)
	res := &Result{Before: Phase{Policy: Naive, From: start.Truncate(time.Minute), To: boundary},
		After: Phase{Policy: Ownership, From: boundary}}
	if addrs.HTTP != nil {
		res.UI = "http://" + hostPort(addrs.HTTP.String()) + "/"
	}
	if err := runPhase(ctx, cfg, endpoint, &res.Before, 1); err != nil {
		return nil, err
	}
	if err := sleepUntil(ctx, boundary); err != nil {
		return nil, err
	}
	if err := runPhase(ctx, cfg, endpoint, &res.After, 2); err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "%sanalysing the last traces…%s", lineStart(cfg.Terminal), lineEnd(cfg.Terminal))
	}
	// Every span was acknowledged once stored; analyse what is pending.
	if err := flush(ctx, addrs.Pipeline); err != nil {
		return nil, err
	}
	if cfg.Progress != nil && cfg.Terminal {
		fmt.Fprint(cfg.Progress, "\r\033[K")
	}
	svc := &query.Service{Store: addrs.Store, Config: analysis.Config{Window: addrs.Store.Window()}}
	res.Query = svc
	for _, p := range []*Phase{&res.Before, &res.After} {
		if err := readPhase(ctx, svc, p); err != nil {
			return nil, err
		}
	}
	whole := store.Query{From: res.Before.From.UnixNano(), To: res.After.To.UnixNano()}
	var err error
	if res.Gate, err = svc.Gate(ctx, query.GateRequest{API: DeepAPI, Thresholds: GateThresholds(), Candidate: whole,
		Service: RootService, BaselineVersion: Naive.Version, CandidateVersion: Ownership.Version}); err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	if res.GateBack, err = svc.Gate(ctx, query.GateRequest{API: DeepAPI, Thresholds: GateThresholds(), Candidate: whole,
		Service: RootService, BaselineVersion: Ownership.Version, CandidateVersion: Naive.Version}); err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	return res, nil
}

// runPhase runs the mesh under p's policy: healthy for a lead-in, then with
// the failing service degraded, until p.To (or, when zero, the duration).
func runPhase(ctx context.Context, cfg Config, endpoint string, p *Phase, n int) error {
	var failing atomic.Uint64
	m, err := startMesh(ctx, meshConfig{policy: p.Policy, retries: cfg.Retries, failing: &failing, exporter: otlpExporter(endpoint)})
	if err != nil {
		return err
	}
	begin := time.Now()
	until := p.To
	if until.IsZero() {
		until = begin.Add(cfg.Duration)
		p.To = until.Truncate(time.Minute).Add(time.Minute)
	}
	lead := min(until.Sub(begin)/10, 3*time.Second)
	targets := []target{
		{api: DeepAPI, url: m.urls[RootService] + "/checkout", share: 0.75},
		{api: ShallowAPI, url: m.urls[RootService] + "/product", share: 0.25},
	}
	var st loadStats
	lctx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		generate(lctx, until, cfg.Rate, targets, 64, &st)
	}()
	degrade := time.NewTimer(lead)
	report := time.NewTicker(time.Second)
	if !cfg.Terminal {
		report.Reset(5 * time.Second)
	}
	progress := func() {
		if cfg.Progress == nil {
			return
		}
		state := "healthy"
		if loadRate(&failing) > 0 {
			state = fmt.Sprintf("%s degraded", FailingService)
		}
		el := time.Since(begin).Truncate(time.Second)
		fmt.Fprintf(cfg.Progress, "%sphase %d/2 %-9s (%s)  %3s / %s  %5d requests  %3.0f%% failed  %s%s",
			lineStart(cfg.Terminal), n, p.Policy.Name, p.Policy.Version, el, until.Sub(begin).Round(time.Second),
			st.sent.Load(), percent(st.failed.Load(), st.sent.Load()), state, lineEnd(cfg.Terminal))
	}
loop:
	for {
		select {
		case <-degrade.C:
			storeRate(&failing, cfg.ErrorRate)
		case <-report.C:
			progress()
		case <-loadDone:
			break loop
		}
	}
	degrade.Stop()
	report.Stop()
	stopLoad()
	progress()
	if cfg.Progress != nil && !cfg.Terminal {
		fmt.Fprintf(cfg.Progress, "phase %d/2 done: flushing spans\n", n)
	}
	p.Sent, p.Failed, p.Skipped = st.sent.Load(), st.failed.Load(), st.skipped.Load()
	if err := m.close(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("phase %s: %w", p.Policy.Name, err)
	}
	return ctx.Err()
}

// readPhase reads a phase's report and its load on the failing service from
// the store.
func readPhase(ctx context.Context, svc *query.Service, p *Phase) error {
	q := store.Query{From: p.From.UnixNano(), To: p.To.UnixNano()}
	doc, load, err := readRange(ctx, svc, q)
	if err != nil {
		return fmt.Errorf("read the %s phase: %w", p.Policy.Name, err)
	}
	p.Report, p.Load = doc, load
	return nil
}

// readRange reads the report of q's traces and, per root API, the requests
// the failing service served per root request (from the API's stored call
// graph; absent when the API does not reach it).
func readRange(ctx context.Context, svc *query.Service, q store.Query) (*analysis.Document, map[string]float64, error) {
	doc, err := svc.Document(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	load := map[string]float64{}
	for _, a := range doc.APIs {
		g, err := svc.Graph(ctx, a.API, q)
		if errors.Is(err, query.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, nil, fmt.Errorf("the graph of %s: %w", a.API, err)
		}
		for _, n := range g.Nodes {
			if n.Service == FailingService && a.Traces > 0 {
				load[a.API] += float64(n.Requests) / float64(a.Traces)
			}
		}
	}
	return doc, load, nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func percent(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func lineStart(term bool) string {
	if term {
		return "\r\033[K"
	}
	return ""
}

func lineEnd(term bool) string {
	if term {
		return ""
	}
	return "\n"
}

// hostPort turns a wildcard listen address into one a browser can open.
func hostPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
