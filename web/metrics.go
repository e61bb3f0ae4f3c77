package web

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

// MetricsWindow is the trailing window the radius gauges cover.
const MetricsWindow = 5 * time.Minute

// DefaultMetricsMaxAPIs is how many root APIs get series of their own
// when Collector.MaxAPIs is not set: five series each, 5,000 in all.
const DefaultMetricsMaxAPIs = 1000

// Collector exports per root API figures to Prometheus, read from the
// rollups at scrape time (at most once per CacheFor), so that alerts work
// without the UI:
//
//   - stormradius_max_radius, stormradius_mean_radius: gauges over the last
//     MetricsWindow;
//   - stormradius_suppressed_retries_total,
//     stormradius_spurious_requests_prevented_total,
//     stormradius_misattributed_errors_total: counters over the traces that
//     started since the collector's since (the process start: a restart
//     resets them, as counters do, and rate() and increase() read them;
//     counting all retained data instead would drop every day retention
//     deletes one, which Prometheus takes for a reset and a spike).
//
// Sampled traffic (docs/SPEC.md §4.9): every figure above estimates the
// traffic; beside them stormradius_traces_received_total and
// stormradius_traces_estimated_total (counters, as the others),
// stormradius_effective_sample_size and stormradius_failed_trace_rate
// (with its 95 % interval, labelled bound="estimate", "low", "high";
// gauges over the last MetricsWindow), and for the fleet, since the
// process started, stormradius_tail_sampling_suspected and the traces
// whose sampling information was conflicting or unusable.
//
// At most MaxAPIs root APIs get series of their own: each the first time
// a scrape sees it while there is room (the busiest first among those a
// scrape sees together), for the process's life. Every other root API is
// counted in the series labelled api="⟨other APIs⟩" (graph.OtherAPI, the
// bucket the analysis counts APIs past its own caps in, which is summed
// there too): the largest max radius, the mean over their failed traces,
// the sums of the counters. An API never moves between series, so every
// counter only grows. stormradius_metrics_apis_folded says how many APIs
// that series holds.
type Collector struct {
	// MaxAPIs bounds the root APIs with series of their own (default
	// DefaultMetricsMaxAPIs). Set it before the collector is registered.
	MaxAPIs int

	svc      *query.Service
	now      func() time.Time
	start    time.Time
	log      *slog.Logger
	cacheFor time.Duration

	mu      sync.Mutex
	at      time.Time
	window  []apiSeries // per API (own series, then the overflow); nil until a read succeeded
	total   []apiSeries
	open    int
	fleet   analysis.FleetSamplingDoc // since the process started
	lastErr error
	own     map[string]bool // APIs with series of their own
	folded  int             // APIs in the overflow series at the last refresh
}

// apiSeries is what one api label shows.
type apiSeries struct {
	api                                 string
	maxRadius                           int
	meanRadius                          float64
	suppressed, spurious, misattributed int64
	// received and estimated traces; ess the effective sample size;
	// failed the failed-trace rate (nil for the overflow series).
	received, estimated int64
	ess                 float64
	failed              *analysis.Interval
}

var (
	descMax = prometheus.NewDesc("stormradius_max_radius",
		"Largest retry storm radius of a trace of the root API in the last 5 minutes.", []string{"api"}, nil)
	descMean = prometheus.NewDesc("stormradius_mean_radius",
		"Mean retry storm radius of the root API's failed traces in the last 5 minutes.", []string{"api"}, nil)
	descSuppressed = prometheus.NewDesc("stormradius_suppressed_retries_total",
		"Retries the error-ownership rule suppressed in the root API's traces.", []string{"api"}, nil)
	descSpurious = prometheus.NewDesc("stormradius_spurious_requests_prevented_total",
		"Requests error ownership prevented in the root API's traces (a naive replay would have sent them).", []string{"api"}, nil)
	descMisattributed = prometheus.NewDesc("stormradius_misattributed_errors_total",
		"Failed hops that blamed a dependency (answered unclaimed) though every call that failed them was fail-open: errors of their own misattributed, in the root API's traces (docs/SPEC.md §4.4).", []string{"api"}, nil)
	descIncidents = prometheus.NewDesc("stormradius_open_incidents",
		"Incidents open now (docs/SPEC.md §4.8).", nil, nil)
	descUp = prometheus.NewDesc("stormradius_rollups_up",
		"1 when the last read of the rollups for these metrics succeeded.", nil, nil)
	descReceived = prometheus.NewDesc("stormradius_traces_received_total",
		"Traces of the root API received (a sample, when sampled: docs/SPEC.md §4.9).", []string{"api"}, nil)
	descEstimated = prometheus.NewDesc("stormradius_traces_estimated_total",
		"Traces of the root API in the traffic, estimated from those received weighted by their adjusted counts (docs/SPEC.md §4.9); equal to stormradius_traces_received_total when unsampled.", []string{"api"}, nil)
	descESS = prometheus.NewDesc("stormradius_effective_sample_size",
		"Kish's effective sample size of the root API's traces in the last 5 minutes: how many unweighted traces would say as much.", []string{"api"}, nil)
	descFailedRate = prometheus.NewDesc("stormradius_failed_trace_rate",
		"Share of the root API's traces with a failure event in the last 5 minutes: the estimate and its 95% interval (bound=estimate|low|high).", []string{"api", "bound"}, nil)
	descTail = prometheus.NewDesc("stormradius_tail_sampling_suspected",
		"1 when the traces received since the process started look tail-sampled by a policy that recorded no probability (failures overstated; docs/SPEC.md §4.9).", nil, nil)
	descConflicts = prometheus.NewDesc("stormradius_traces_sampling_conflicts_total",
		"Traces whose spans recorded different sampling probabilities (the root's counted).", nil, nil)
	descUnusable = prometheus.NewDesc("stormradius_traces_sampling_unusable_total",
		"Traces whose recorded sampling probability was unusable (counted once).", nil, nil)
	descFolded = prometheus.NewDesc("stormradius_metrics_apis_folded",
		"Root APIs whose figures are in the series labelled api=\""+graph.OtherAPI+"\" (past --metrics-max-apis, or past the analysis's caps), at the last read.", nil, nil)
)

// NewCollector returns a Collector over svc whose counters count the
// traces that started since since (nil now: time.Now).
func NewCollector(svc *query.Service, since time.Time, now func() time.Time, log *slog.Logger) *Collector {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Collector{svc: svc, now: now, start: since, log: log, cacheFor: 10 * time.Second}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMax, descMean, descSuppressed, descSpurious, descMisattributed, descIncidents, descUp, descFolded,
		descReceived, descEstimated, descESS, descFailedRate, descTail, descConflicts, descUnusable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.at.IsZero() || now.Sub(c.at) >= c.cacheFor {
		c.refresh(now)
	}
	up := 1.0
	if c.lastErr != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(descFolded, prometheus.GaugeValue, float64(c.folded))
	if c.window != nil {
		for _, a := range c.window {
			ch <- prometheus.MustNewConstMetric(descMax, prometheus.GaugeValue, float64(a.maxRadius), a.api)
			ch <- prometheus.MustNewConstMetric(descMean, prometheus.GaugeValue, a.meanRadius, a.api)
			ch <- prometheus.MustNewConstMetric(descESS, prometheus.GaugeValue, a.ess, a.api)
			if a.failed != nil {
				ch <- prometheus.MustNewConstMetric(descFailedRate, prometheus.GaugeValue, a.failed.Estimate, a.api, "estimate")
				ch <- prometheus.MustNewConstMetric(descFailedRate, prometheus.GaugeValue, a.failed.Low, a.api, "low")
				ch <- prometheus.MustNewConstMetric(descFailedRate, prometheus.GaugeValue, a.failed.High, a.api, "high")
			}
		}
		ch <- prometheus.MustNewConstMetric(descIncidents, prometheus.GaugeValue, float64(c.open))
	}
	for _, a := range c.total {
		ch <- prometheus.MustNewConstMetric(descSuppressed, prometheus.CounterValue, float64(a.suppressed), a.api)
		ch <- prometheus.MustNewConstMetric(descSpurious, prometheus.CounterValue, float64(a.spurious), a.api)
		ch <- prometheus.MustNewConstMetric(descMisattributed, prometheus.CounterValue, float64(a.misattributed), a.api)
		ch <- prometheus.MustNewConstMetric(descReceived, prometheus.CounterValue, float64(a.received), a.api)
		ch <- prometheus.MustNewConstMetric(descEstimated, prometheus.CounterValue, float64(a.estimated), a.api)
	}
	if c.total != nil {
		tail := 0.0
		if c.fleet.TailSamplingSuspected {
			tail = 1
		}
		ch <- prometheus.MustNewConstMetric(descTail, prometheus.GaugeValue, tail)
		ch <- prometheus.MustNewConstMetric(descConflicts, prometheus.CounterValue, float64(c.fleet.ConflictingTraces))
		ch <- prometheus.MustNewConstMetric(descUnusable, prometheus.CounterValue, float64(c.fleet.UnusableTraces))
	}
}

// admit gives series of their own to the APIs of docs that have none
// while there is room, the busiest (most traces in the last document
// that has them: the one since the process started) first, then by
// name.
func (c *Collector) admit(docs ...*analysis.Document) {
	limit := c.MaxAPIs
	if limit <= 0 {
		limit = DefaultMetricsMaxAPIs
	}
	if c.own == nil {
		c.own = map[string]bool{}
	}
	if len(c.own) >= limit {
		return
	}
	traces := map[string]int64{}
	for _, d := range docs {
		for _, a := range d.APIs {
			if !c.own[a.API] && a.API != graph.OtherAPI {
				traces[a.API] = a.Traces
			}
		}
	}
	news := slices.SortedFunc(maps.Keys(traces), func(x, y string) int { return cmp.Or(cmp.Compare(traces[y], traces[x]), cmp.Compare(x, y)) })
	for _, api := range news[:min(len(news), limit-len(c.own))] {
		c.own[api] = true
	}
}

// series returns the series of d's APIs: those with series of their own,
// then the overflow's (when it has an API), and the APIs in the overflow
// (graph.OtherAPI, the analysis's own overflow, not among them).
func (c *Collector) series(d *analysis.Document) ([]apiSeries, map[string]bool) {
	out := make([]apiSeries, 0, min(len(d.APIs), len(c.own))+1)
	other := apiSeries{api: graph.OtherAPI}
	in := map[string]bool{}
	overflow := false
	var failed int64
	var radiusSum, otherVar float64
	for _, a := range d.APIs {
		rate := a.Sampling.FailedTraceRate
		s := apiSeries{api: a.API, maxRadius: a.MaxRadius, meanRadius: a.MeanRadius, suppressed: a.SuppressedRetries,
			spurious: a.SpuriousRequestsPrevented, misattributed: a.MisattributedErrors,
			received: a.Sampling.TracesReceived, estimated: a.Sampling.TracesEstimated, ess: a.Sampling.EffectiveSampleSize, failed: &rate}
		if c.own[a.API] {
			out = append(out, s)
			continue
		}
		overflow = true
		if a.API != graph.OtherAPI {
			in[a.API] = true
		}
		other.maxRadius = max(other.maxRadius, a.MaxRadius)
		failed += a.FailedTraces
		radiusSum += a.MeanRadius * float64(a.FailedTraces)
		other.suppressed += a.SuppressedRetries
		other.spurious += a.SpuriousRequestsPrevented
		other.misattributed += a.MisattributedErrors
		other.received += a.Sampling.TracesReceived
		other.estimated += a.Sampling.TracesEstimated
		// Kish's size n = N²/ΣW² of each gives back its ΣW² = N²/n, which
		// sum.
		if n := a.Sampling.EffectiveSampleSize; n > 0 {
			otherVar += float64(a.Traces) * float64(a.Traces) / n
		}
	}
	if overflow {
		if failed > 0 {
			other.meanRadius = radiusSum / float64(failed)
		}
		if otherVar > 0 {
			other.ess = float64(other.estimated) * float64(other.estimated) / otherVar
		}
		out = append(out, other)
	}
	return out, in
}

func (c *Collector) refresh(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.at = now
	last := store.Query{From: now.Add(-MetricsWindow).UnixNano(), To: now.UnixNano()}
	win, err := c.svc.Figures(ctx, last)
	if err == nil {
		var tot *analysis.Document
		tot, err = c.svc.Figures(ctx, store.Query{From: c.start.Truncate(time.Minute).UnixNano(), To: now.Add(time.Minute).UnixNano()})
		if err == nil {
			c.admit(win, tot)
			var inW, inT map[string]bool
			c.window, inW = c.series(win)
			c.total, inT = c.series(tot)
			c.fleet = tot.Sampling
			maps.Copy(inW, inT)
			c.folded = len(inW)
		}
	}
	if err == nil {
		var list []analysis.IncidentDoc
		if list, err = c.svc.Incidents(ctx, last, 0); err == nil {
			c.open = 0
			for _, in := range list {
				if in.Open {
					c.open++
				}
			}
		}
	}
	if err != nil && c.lastErr == nil {
		c.log.Warn("metrics: reading the rollups failed", "err", err)
	}
	c.lastErr = err
}
