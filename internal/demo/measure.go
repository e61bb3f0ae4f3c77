package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

// MeasureConfig is one measured run of the mesh: the failing service fails
// every request from the first one (its whole keyspace on the broken
// shard, so nothing is left to chance), with the Adopted services running
// the claim protocol and the others retrying naively.
type MeasureConfig struct {
	// Adopted names the services that adopt the protocol, from
	// AdoptableServices: none is the demo's naive phase, all of them its
	// ownership phase.
	Adopted []string
	// Retries is the retries after a first attempt at every hop (default
	// 1), with no retry budget, whatever the policy.
	Retries int
	// Requests is the root requests sent to the deep API (default 12);
	// ShallowRequests those sent to the shallow one (default 0).
	Requests, ShallowRequests int
	// Concurrency bounds the root requests in flight (default 2): a naive
	// deep request makes about a thousand spans.
	Concurrency int
	// RequestTimeout bounds each root request (default 1 min). A request
	// that gets no answer fails the measurement: its trace may be cut.
	RequestTimeout time.Duration
	// Window is the analysis window (default 1 h: a run usually falls in
	// one window).
	Window time.Duration
	// Data is the embedded store's directory ("": a temporary one,
	// removed afterwards).
	Data string
	// Logger is the service's logger (slog.Default() when nil).
	Logger *slog.Logger
	// Inspect, when not nil, is called once the run is analysed and read,
	// while the store is still open, with the query layer over it and the
	// run's range.
	Inspect func(ctx context.Context, svc *query.Service, q store.Query) error
}

func (c *MeasureConfig) defaults() {
	if c.Retries <= 0 {
		c.Retries = 1
	}
	if c.Requests <= 0 {
		c.Requests = 12
	}
	c.ShallowRequests = max(c.ShallowRequests, 0)
	if c.Concurrency <= 0 {
		c.Concurrency = 2
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = time.Minute
	}
	if c.Window <= 0 {
		c.Window = time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Measurement is what the store reports of a measured run.
type Measurement struct {
	// Policy is the mesh's: Naive when nothing was adopted, Ownership
	// when every adoptable service was, else a mixed one.
	Policy  Policy
	Retries int
	// Range covers the run's minutes: the figures below are read over it.
	Range store.Query
	// Sent counts, per root API, the root requests sent; Failed those
	// answered with a status ≥ 500 (on the deep API, all of them: the
	// failing service is on its fail-close path).
	Sent, Failed map[string]int64
	// Report is the docs/SPEC.md §5.2 document of the run's traces.
	Report *analysis.Document
	// Load is, per root API, the requests the failing service served per
	// root request (absent when the API does not reach it).
	Load map[string]float64
	// MaxRadius is, per root API, its max storm radius (§4.5).
	MaxRadius map[string]int
	// State is the sum of the summaries of the windows the run overlaps:
	// edges and call graphs (its claim tallies stay empty, as a merged
	// state's do); Config is the analysis configuration it was read with.
	State  *analysis.State
	Config analysis.Config
}

// AdoptableServices returns the services of the mesh that can adopt the
// protocol (all but the legacy one), sorted.
func AdoptableServices() []string {
	var out []string
	for _, s := range mesh {
		if !s.legacy {
			out = append(out, s.name)
		}
	}
	slices.Sort(out)
	return out
}

// AdoptionPolicy returns the policy under which the named services adopt
// the protocol: Naive for none, Ownership for every adoptable service, a
// mixed policy otherwise. An unknown or legacy service is an error.
func AdoptionPolicy(adopted []string) (Policy, error) {
	set := make([]string, 0, len(adopted))
	for _, name := range adopted {
		i := slices.IndexFunc(mesh, func(s service) bool { return s.name == name })
		switch {
		case i < 0:
			return Policy{}, fmt.Errorf("demo: no service %q in the mesh (adoptable: %s)", name, strings.Join(AdoptableServices(), ", "))
		case mesh[i].legacy:
			return Policy{}, fmt.Errorf("demo: %s is legacy (no middleware): it cannot adopt the protocol", name)
		}
		set = append(set, name)
	}
	slices.Sort(set)
	set = slices.Compact(set)
	switch len(set) {
	case 0:
		return Naive, nil
	case len(AdoptableServices()):
		return Ownership, nil
	}
	return Policy{Name: "mixed", Adopted: set}, nil
}

// Measure runs stormradius on an embedded store and the mesh under cfg's
// adoption, with the failing service failing every request; sends the
// root requests, waits until every span is stored and analysed, and reads
// the figures back through the query layer.
func Measure(ctx context.Context, cfg MeasureConfig) (*Measurement, error) {
	cfg.defaults()
	policy, err := AdoptionPolicy(cfg.Adopted)
	if err != nil {
		return nil, err
	}
	if cfg.Data == "" {
		dir, err := os.MkdirTemp("", "stormradius-measure-")
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.Data = dir
	}
	in, err := startInstance(ctx, appConfig(cfg.Data, cfg.Window, "", cfg.Logger))
	if err != nil {
		return nil, err
	}
	m, err := measure(ctx, cfg, policy, in)
	return m, errors.Join(err, in.close())
}

// measure runs the mesh against a started instance and reads the run back.
func measure(ctx context.Context, cfg MeasureConfig, policy Policy, in *instance) (*Measurement, error) {
	start := time.Now()
	var failing atomic.Uint64
	storeRate(&failing, 1) // every account on the broken shard: every request fails
	endpoint := "http://" + in.addrs.OTLPHTTP.String() + "/v1/traces"
	ms, err := startMesh(ctx, meshConfig{policy: policy, retries: cfg.Retries, failing: &failing, quiet: true,
		exporter: otlpExporter(endpoint)})
	if err != nil {
		return nil, err
	}
	var jobs []target
	for range cfg.Requests {
		jobs = append(jobs, target{api: DeepAPI, url: ms.urls[RootService] + "/checkout"})
	}
	for range cfg.ShallowRequests {
		jobs = append(jobs, target{api: ShallowAPI, url: ms.urls[RootService] + "/product"})
	}
	cfg.Logger.Info("demo: measuring", "policy", policy.Name, "adopted", policy.Adopted, "retries", cfg.Retries,
		"requests", cfg.Requests, "shallow_requests", cfg.ShallowRequests)
	sent := sendRoots(ctx, jobs, cfg.Concurrency, cfg.RequestTimeout)
	// Stop the services (every request has finished) and flush their
	// spans: each export returns once its spans are stored.
	if err := ms.close(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if sent.lost > 0 {
		return nil, fmt.Errorf("demo: %d of %d root requests got no answer within %v: their traces may be incomplete",
			sent.lost, len(jobs), cfg.RequestTimeout)
	}
	if err := flush(ctx, in.addrs.Pipeline); err != nil {
		return nil, err
	}
	end := time.Now()
	out := &Measurement{Policy: policy, Retries: cfg.Retries, Sent: sent.sent, Failed: sent.failed,
		Range: store.Query{From: start.Truncate(time.Minute).UnixNano(), To: end.Truncate(time.Minute).Add(time.Minute).UnixNano()}}
	svc := query.New(in.addrs.Store)
	out.Config = svc.Config
	if err := out.read(ctx, svc); err != nil {
		return nil, fmt.Errorf("demo: read the run back: %w", err)
	}
	if cfg.Inspect != nil {
		if err := cfg.Inspect(ctx, svc, out.Range); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// read fills the figures from the store.
func (m *Measurement) read(ctx context.Context, svc *query.Service) error {
	doc, load, err := readRange(ctx, svc, m.Range)
	if err != nil {
		return err
	}
	m.Report, m.Load, m.MaxRadius = doc, load, map[string]int{}
	for _, a := range doc.APIs {
		m.MaxRadius[a.API] = a.MaxRadius
	}
	lo, hi := store.WindowRange(m.Range, svc.Config.Window)
	m.State = analysis.NewState()
	if lo <= hi {
		sums, err := svc.Store.Summaries(ctx, lo, hi)
		if err != nil {
			return err
		}
		m.State = analysis.MergeSummaries(sums)
	}
	return nil
}

// sent is what sendRoots saw, per root API.
type sent struct {
	sent, failed map[string]int64
	lost         int // requests without an answer (error, timeout)
}

// sendRoots sends one root request per job, at most conc at once, each
// bounded by timeout, and returns once all have finished. It stops
// sending when ctx ends.
func sendRoots(ctx context.Context, jobs []target, conc int, timeout time.Duration) sent {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}, Timeout: timeout}
	defer client.CloseIdleConnections()
	status := make([]int, len(jobs)) // 0: not sent; -1: no answer
	next := make(chan int)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				status[i] = sendRoot(ctx, client, jobs[i].url+"?account="+strconv.Itoa(account(int64(i))))
			}
		}()
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	out := sent{sent: map[string]int64{}, failed: map[string]int64{}}
	for i, st := range status {
		if st == 0 {
			continue
		}
		out.sent[jobs[i].api]++
		switch {
		case st < 0:
			out.lost++
		case st >= 500:
			out.failed[jobs[i].api]++
		}
	}
	return out
}

// sendRoot sends one GET and returns its status, -1 when it got none.
func sendRoot(ctx context.Context, client *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return -1
	}
	resp, err := client.Do(req)
	if err != nil {
		return -1
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
