package web

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

// MetricsWindow is the trailing window the radius gauges cover.
const MetricsWindow = 5 * time.Minute

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
type Collector struct {
	svc      *query.Service
	now      func() time.Time
	start    time.Time
	log      *slog.Logger
	cacheFor time.Duration

	mu      sync.Mutex
	at      time.Time
	window  *analysis.Document
	total   *analysis.Document
	open    int
	lastErr error
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
		"Coincidental errors the naive attributor would have blamed on the wrong dependency, in the root API's traces.", []string{"api"}, nil)
	descIncidents = prometheus.NewDesc("stormradius_open_incidents",
		"Incidents open now (SPEC §4.8).", nil, nil)
	descUp = prometheus.NewDesc("stormradius_rollups_up",
		"1 when the last read of the rollups for these metrics succeeded.", nil, nil)
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
	for _, d := range []*prometheus.Desc{descMax, descMean, descSuppressed, descSpurious, descMisattributed, descIncidents, descUp} {
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
	if c.window != nil {
		for _, a := range c.window.APIs {
			ch <- prometheus.MustNewConstMetric(descMax, prometheus.GaugeValue, float64(a.MaxRadius), a.API)
			ch <- prometheus.MustNewConstMetric(descMean, prometheus.GaugeValue, a.MeanRadius, a.API)
		}
		ch <- prometheus.MustNewConstMetric(descIncidents, prometheus.GaugeValue, float64(c.open))
	}
	if c.total != nil {
		for _, a := range c.total.APIs {
			ch <- prometheus.MustNewConstMetric(descSuppressed, prometheus.CounterValue, float64(a.SuppressedRetries), a.API)
			ch <- prometheus.MustNewConstMetric(descSpurious, prometheus.CounterValue, float64(a.SpuriousRequestsPrevented), a.API)
			ch <- prometheus.MustNewConstMetric(descMisattributed, prometheus.CounterValue, float64(a.MisattributedErrors), a.API)
		}
	}
}

func (c *Collector) refresh(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.at = now
	last := store.Query{From: now.Add(-MetricsWindow).UnixNano(), To: now.UnixNano()}
	win, err := c.svc.Figures(ctx, last)
	if err == nil {
		c.window = win
		var tot *analysis.Document
		tot, err = c.svc.Figures(ctx, store.Query{From: c.start.Truncate(time.Minute).UnixNano(), To: now.Add(time.Minute).UnixNano()})
		if err == nil {
			c.total = tot
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
