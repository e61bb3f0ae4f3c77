package web_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
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
# HELP stormradius_misattributed_errors_total Failed hops that blamed a dependency (answered unclaimed) though every call that failed them was fail-open: errors of their own misattributed, in the root API's traces (docs/SPEC.md §4.4).
# TYPE stormradius_misattributed_errors_total counter
stormradius_misattributed_errors_total{api="front GET /dispatch"} ` + ftoa(float64(all.MisattributedErrors)) + `
# HELP stormradius_open_incidents Incidents open now (docs/SPEC.md §4.8).
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

// capTraces returns, for each i from from to from+n−1, i+1 traces of the
// root API "svc-<i> GET /x" starting at start (trace ids from firstID
// on): a root calling an uninstrumented db whose attempts (1 to 3) all
// fail unclaimed, the last marked retry.suppressed — radius 1 when
// retried, a suppressed retry each.
func capTraces(start time.Time, n, from int, firstID byte) [][]graph.Span {
	var out [][]graph.Span
	id := firstID - 1
	for i := from; i < from+n; i++ {
		for k := 0; k <= i; k++ {
			id++
			b := New(id)
			at := start.Add(time.Duration(len(out)) * 100 * time.Millisecond).UnixNano()
			r := b.Root(fmt.Sprintf("svc-%d", i), "GET /x", at, at+int64(time.Second))
			attempts := i%3 + 1
			for a := 0; a < attempts; a++ {
				opts := []Opt{Peer("db"), Failed, Claim(graph.ClaimUnclaimed), Resend(int32(a))}
				if a == attempts-1 {
					opts = append(opts, Suppressed)
				}
				s := at + int64(a+1)*int64(10*time.Millisecond)
				b.Span(r, graph.KindClient, fmt.Sprintf("svc-%d", i), "GET", s, s+int64(5*time.Millisecond), opts...)
			}
			out = append(out, b.Spans)
		}
	}
	return out
}

// gathered returns every series of reg as family → api → value.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		m := map[string]float64{}
		for _, s := range mf.GetMetric() {
			api := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "api" {
					api = l.GetValue()
				}
			}
			if s.GetCounter() != nil {
				m[api] = s.GetCounter().GetValue()
			} else {
				m[api] = s.GetGauge().GetValue()
			}
		}
		out[mf.GetName()] = m
	}
	return out
}

// Past MaxAPIs, root APIs share the series labelled ⟨other APIs⟩: the
// busiest APIs keep series of their own, the others' counters are summed,
// their max radius is the largest, their mean radius the mean over their
// failed traces; an API that comes later never takes a series from one
// that had it, so no counter goes down.
func TestMetricsCap(t *testing.T) {
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := fixture.Start
	fixture.Load(t, st, capTraces(start, 10, 0, 1)) // svc-0 … svc-9: 1 … 10 traces, 55 in all
	now := start.Add(2 * time.Minute)
	clock := func() time.Time { return now }
	full := web.NewCollector(query.New(st), start, clock, nil)
	full.MaxAPIs = 1000
	capped := web.NewCollector(query.New(st), start, clock, nil)
	capped.MaxAPIs = 3
	regFull, regCapped := prometheus.NewRegistry(), prometheus.NewRegistry()
	regFull.MustRegister(full)
	regCapped.MustRegister(capped)
	ref, got := gathered(t, regFull), gathered(t, regCapped)

	families := []string{"stormradius_max_radius", "stormradius_mean_radius", "stormradius_suppressed_retries_total",
		"stormradius_spurious_requests_prevented_total", "stormradius_misattributed_errors_total"}
	own := []string{"svc-9 GET /x", "svc-8 GET /x", "svc-7 GET /x"} // the busiest three
	for _, f := range families {
		if len(ref[f]) != 10 {
			t.Fatalf("%s: %d series uncapped, want 10", f, len(ref[f]))
		}
		if len(got[f]) != 4 {
			t.Errorf("%s: %d series, want 3 APIs + %s", f, len(got[f]), graph.OtherAPI)
		}
		for _, api := range own {
			if got[f][api] != ref[f][api] {
				t.Errorf("%s{api=%q} = %v, want %v", f, api, got[f][api], ref[f][api])
			}
		}
	}
	// The overflow, from the uncapped series of svc-0 … svc-6: svc-i has
	// i+1 traces, all failed.
	var sum [3]float64
	maxR, weighted, failed := 0.0, 0.0, 0.0
	for i := 0; i < 7; i++ {
		api := fmt.Sprintf("svc-%d GET /x", i)
		for k, f := range families[2:] {
			sum[k] += ref[f][api]
		}
		maxR = max(maxR, ref["stormradius_max_radius"][api])
		weighted += ref["stormradius_mean_radius"][api] * float64(i+1)
		failed += float64(i + 1)
	}
	if got["stormradius_max_radius"][graph.OtherAPI] != maxR || maxR != 1 {
		t.Errorf("overflow max radius %v, want %v (1)", got["stormradius_max_radius"][graph.OtherAPI], maxR)
	}
	if m := got["stormradius_mean_radius"][graph.OtherAPI]; m < weighted/failed-1e-9 || m > weighted/failed+1e-9 {
		t.Errorf("overflow mean radius %v, want %v", m, weighted/failed)
	}
	for k, f := range families[2:] {
		if got[f][graph.OtherAPI] != sum[k] {
			t.Errorf("%s{api=%q} = %v, want %v", f, graph.OtherAPI, got[f][graph.OtherAPI], sum[k])
		}
	}
	if sum[0] != 28 { // one suppressed retry per trace: 1+2+…+7
		t.Errorf("suppressed retries of svc-0 … svc-6: %v, want 28", sum[0])
	}
	if g := got["stormradius_metrics_apis_folded"][""]; g != 7 {
		t.Errorf("stormradius_metrics_apis_folded %v, want 10 − 3 = 7", g)
	}

	// A busier API comes later: it joins the overflow, which only grows.
	fixture.Load(t, st, capTraces(start.Add(10*time.Second), 1, 20, 100)) // svc-20: 21 traces
	now = now.Add(time.Minute)
	again := gathered(t, regCapped)
	for _, f := range families[2:] {
		if len(again[f]) != 4 || again[f][graph.OtherAPI] < got[f][graph.OtherAPI] {
			t.Errorf("%s after a new API: %v (before %v)", f, again[f], got[f])
		}
		for _, api := range own {
			if again[f][api] != got[f][api] {
				t.Errorf("%s{api=%q} moved: %v → %v", f, api, got[f][api], again[f][api])
			}
		}
	}
	if again["stormradius_suppressed_retries_total"][graph.OtherAPI] != 28+21 {
		t.Errorf("overflow suppressed retries %v, want 28 + 21", again["stormradius_suppressed_retries_total"][graph.OtherAPI])
	}
	if g := again["stormradius_metrics_apis_folded"][""]; g != 8 {
		t.Errorf("stormradius_metrics_apis_folded %v, want 8", g)
	}
}
