package otlp

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
)

// TestSamplingConfig: both receivers decode with Config.Sampling: a span
// that records nothing gets its service's probability, else the input's;
// one with ot=th what it records.
func TestSamplingConfig(t *testing.T) {
	rec := &recorder{}
	s := startServer(t, Config{Sampling: ingest.SamplingConfig{Probability: 0.25, ServiceProbability: map[string]float64{"svc-1": 0.5}}}, rec)
	const n = 6
	td := testTraces(3, n)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw("ot=th:f")
	check := func(how string) {
		t.Helper()
		got := rec.taken()
		if len(got) != n {
			t.Fatalf("%s: %d spans", how, len(got))
		}
		for _, sp := range got {
			want, count := graph.SamplingConfigured, 4.0 // svc-0: the input's 0.25
			switch {
			case sp.Name == "op-0":
				want, count = graph.SamplingRecorded, 16 // ot=th:f
			case sp.Service == "svc-1":
				count = 2
			}
			if sp.Sampling != want || sp.AdjustedCount != count {
				t.Errorf("%s: %s of %s: %v %v, want %v %v", how, sp.Name, sp.Service, sp.Sampling, sp.AdjustedCount, want, count)
			}
		}
		rec.reset()
	}
	for _, ct := range []string{contentTypeProto, contentTypeJSON} {
		body := protoBody(t, td)
		if ct == contentTypeJSON {
			body = jsonBody(t, td)
		}
		if r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(body), ct, ""); r.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", ct, r.status, r.body)
		}
		check(ct)
	}
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))
	if _, err := export(t, c, context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}
	check("gRPC")
}

func TestSamplingConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  ingest.SamplingConfig
		want string
	}{
		{ingest.SamplingConfig{Probability: 2}, "otlp: config: sampling probability: 2: want 0 < p ≤ 1"},
		{ingest.SamplingConfig{ServiceProbability: map[string]float64{"a": -1}}, `otlp: config: sampling probability of service "a": -1: want 0 < p ≤ 1`},
	} {
		if _, err := New(Config{Sampling: c.cfg}, &recorder{}); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
