package web_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// The per-API metrics equal analyze's figures: gauges over the last five
// minutes, counters over the traces since the collector's start.
func TestMetrics(t *testing.T) {
	traces, doc := rollout()
	stores(t, func(t *testing.T, st store.Store) {
		now := fixture.End
		c := web.NewCollector(query.New(st), fixture.Start, func() time.Time { return now }, nil)
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		last5 := fixture.MustAnalyze(t, traces, store.Query{From: fixture.End.Add(-web.MetricsWindow).UnixNano(), To: fixture.End.UnixNano()})
		a, all := last5.APIs[0], doc.APIs[0]
		if all.SuppressedRetries == 0 || all.SpuriousRequestsPrevented == 0 {
			t.Fatalf("the rollout has no suppressed retries to count: %+v", all)
		}
		want := `
# HELP stormradius_max_radius Largest retry storm radius of a trace of the root API in the last 5 minutes.
# TYPE stormradius_max_radius gauge
stormradius_max_radius{api="front GET /dispatch"} ` + ftoa(float64(a.MaxRadius)) + `
# HELP stormradius_mean_radius Mean retry storm radius of the root API's failed traces in the last 5 minutes.
# TYPE stormradius_mean_radius gauge
stormradius_mean_radius{api="front GET /dispatch"} ` + ftoa(a.MeanRadius) + `
# HELP stormradius_suppressed_retries_total Retries the error-ownership rule suppressed in the root API's traces.
# TYPE stormradius_suppressed_retries_total counter
stormradius_suppressed_retries_total{api="front GET /dispatch"} ` + ftoa(float64(all.SuppressedRetries)) + `
# HELP stormradius_spurious_requests_prevented_total Requests error ownership prevented in the root API's traces (a naive replay would have sent them).
# TYPE stormradius_spurious_requests_prevented_total counter
stormradius_spurious_requests_prevented_total{api="front GET /dispatch"} ` + ftoa(float64(all.SpuriousRequestsPrevented)) + `
# HELP stormradius_misattributed_errors_total Coincidental errors the naive attributor would have blamed on the wrong dependency, in the root API's traces.
# TYPE stormradius_misattributed_errors_total counter
stormradius_misattributed_errors_total{api="front GET /dispatch"} ` + ftoa(float64(all.MisattributedErrors)) + `
# HELP stormradius_open_incidents Incidents open now (SPEC §4.8).
# TYPE stormradius_open_incidents gauge
stormradius_open_incidents 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "stormradius_max_radius", "stormradius_mean_radius",
			"stormradius_suppressed_retries_total", "stormradius_spurious_requests_prevented_total",
			"stormradius_misattributed_errors_total", "stormradius_open_incidents"); err != nil {
			t.Error(err)
		}
	})
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
