package web_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// sampledRollout is the rollout with every trace whose id ends in an
// even byte sampled at 1/4 (an adjusted count of 4 recorded on its
// spans): the received traces, and the traces they stand for, counted by
// hand.
func sampledRollout(t *testing.T) (traces [][]graph.Span, received, estimated int64) {
	plain, _ := rollout()
	for _, tr := range plain {
		cp := append([]graph.Span(nil), tr...)
		w := int64(1)
		if cp[0].TraceID[15]%2 == 0 {
			w = 4
			for i := range cp {
				cp[i].Sampling, cp[i].AdjustedCount = graph.SamplingRecorded, 4
			}
		}
		received++
		estimated += w
		traces = append(traces, cp)
	}
	if received == estimated {
		t.Fatal("no trace sampled")
	}
	return traces, received, estimated
}

// Sampled traffic over REST and /metrics (docs/SPEC.md §4.9): /fleet and
// /apis say what was received, what it stands for and how sure it is,
// equal to analyze of the same spans on both stores; the metrics count
// received and estimated traces.
func TestSampledTraffic(t *testing.T) {
	traces, received, estimated := sampledRollout(t)
	whole := store.Query{From: fixture.Start.Add(-time.Hour).UnixNano(), To: fixture.End.Add(time.Hour).UnixNano()}
	want := fixture.MustAnalyze(t, traces, whole)
	if want.Sampling.TracesReceived != received || want.Sampling.TracesEstimated != estimated || want.Traces != estimated {
		t.Fatalf("analyze: received %d, estimated %d; counted by hand %d and %d", want.Sampling.TracesReceived, want.Sampling.TracesEstimated, received, estimated)
	}
	storesWith(t, traces, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		rng := "?from=" + fixture.Start.Add(-time.Hour).Format(time.RFC3339) + "&to=" + fixture.End.Add(time.Hour).Format(time.RFC3339)
		var fleet struct {
			Traces   int64                     `json:"traces"`
			Sampling analysis.FleetSamplingDoc `json:"sampling"`
		}
		getJSON(t, srv, "/api/v1/fleet"+rng, 200, &fleet)
		if fleet.Traces != estimated || fleet.Sampling.TracesReceived != received || !fleet.Sampling.Estimated {
			t.Fatalf("fleet: traces %d, %+v; want %d estimated from %d", fleet.Traces, fleet.Sampling, estimated, received)
		}
		same(t, "fleet sampling", fleet.Sampling, want.Sampling)
		var apis struct{ APIs []analysis.APIDoc }
		getJSON(t, srv, "/api/v1/apis"+rng, 200, &apis)
		if len(apis.APIs) != len(want.APIs) {
			t.Fatalf("%d APIs, want %d", len(apis.APIs), len(want.APIs))
		}
		for i := range apis.APIs {
			same(t, "api "+apis.APIs[i].API, apis.APIs[i].Sampling, want.APIs[i].Sampling)
			if s := apis.APIs[i].Sampling; s.FailedTraceRate.Low > s.FailedTraceRate.Estimate || s.FailedTraceRate.High < s.FailedTraceRate.Estimate ||
				s.FailedTraceRate.High-s.FailedTraceRate.Low <= 0 {
				t.Errorf("%s: interval %+v of a sampled rate", apis.APIs[i].API, s.FailedTraceRate)
			}
		}

		c := web.NewCollector(query.New(st), fixture.Start, func() time.Time { return fixture.End }, nil)
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		a := want.APIs[0]
		exp := `
# HELP stormradius_traces_received_total Traces of the root API received (a sample, when sampled: docs/SPEC.md §4.9).
# TYPE stormradius_traces_received_total counter
stormradius_traces_received_total{api="` + a.API + `"} ` + ftoa(float64(a.Sampling.TracesReceived)) + `
# HELP stormradius_traces_estimated_total Traces of the root API in the traffic, estimated from those received weighted by their adjusted counts (docs/SPEC.md §4.9); equal to stormradius_traces_received_total when unsampled.
# TYPE stormradius_traces_estimated_total counter
stormradius_traces_estimated_total{api="` + a.API + `"} ` + ftoa(float64(a.Traces)) + `
# HELP stormradius_tail_sampling_suspected 1 when the traces received since the process started look tail-sampled by a policy that recorded no probability (failures overstated; docs/SPEC.md §4.9).
# TYPE stormradius_tail_sampling_suspected gauge
stormradius_tail_sampling_suspected 0
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "stormradius_traces_received_total",
			"stormradius_traces_estimated_total", "stormradius_tail_sampling_suspected"); err != nil {
			t.Error(err)
		}
		// The last five minutes' effective sample size and rate.
		last5 := fixture.MustAnalyze(t, traces, store.Query{From: fixture.End.Add(-web.MetricsWindow).UnixNano(), To: fixture.End.UnixNano()})
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				key := mf.GetName()
				for _, l := range m.GetLabel() {
					if l.GetName() == "bound" {
						key += "/" + l.GetValue()
					}
				}
				got[key] = m.GetGauge().GetValue()
			}
		}
		s := last5.APIs[0].Sampling
		for k, v := range map[string]float64{"stormradius_effective_sample_size": s.EffectiveSampleSize,
			"stormradius_failed_trace_rate/estimate": s.FailedTraceRate.Estimate, "stormradius_failed_trace_rate/low": s.FailedTraceRate.Low,
			"stormradius_failed_trace_rate/high": s.FailedTraceRate.High} {
			if math.Abs(got[k]-v) > 1e-9 {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
		_ = context.Background
	})
}

// The rollout gate judges sampled traffic on its estimates and weighs
// its evidence by the effective sample size (docs/SPEC.md §4.9): a
// minute of the sampled rollout whose estimated traces are plenty but
// whose effective sample size is below min_traces is undecided; with
// min_traces at or below it, decided. Received, estimated and the
// effective sample size are counted by hand from the spans.
func TestGateSampled(t *testing.T) {
	traces, _, _ := sampledRollout(t)
	lo, hi := fixture.Start.Add(29*time.Minute).UnixNano(), fixture.Start.Add(30*time.Minute).UnixNano()
	var n, sum, sum2 int64
	for _, tr := range traces {
		start := tr[0].Start
		for _, sp := range tr {
			start = min(start, sp.Start)
		}
		if start < lo || start >= hi {
			continue
		}
		w := int64(1)
		if tr[0].Sampling == graph.SamplingRecorded {
			w = int64(tr[0].AdjustedCount)
		}
		n, sum, sum2 = n+1, sum+w, sum2+w*w
	}
	ess := float64(sum) * float64(sum) / float64(sum2)
	if n == 0 || float64(sum) < ess+10 {
		t.Fatalf("minute 29: %d traces received, %d estimated, effective size %v: not a case where the two disagree", n, sum, ess)
	}
	storesWith(t, traces, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		for _, c := range []struct {
			minTraces int64
			decision  string
		}{{int64(ess) + 1, "undecided"}, {int64(ess), "pass"}} {
			code, b := get(t, srv, "/api/v1/gate"+q("api", fixture.API, "from", at(29), "to", at(30), "max_radius", "5", "min_traces", itoa(c.minTraces)), "")
			var d gate.Decision
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatalf("%d %s", code, b)
			}
			if d.Decision != c.decision || d.Candidate.Traces != sum || d.Candidate.TracesReceived != n ||
				math.Abs(d.Candidate.EffectiveSampleSize-ess) > 1e-9 {
				t.Errorf("min_traces %d: %d %s; want %s on %d traces estimated from %d, effective size %v", c.minTraces, code, b, c.decision, sum, n, ess)
			}
		}
	})
}
