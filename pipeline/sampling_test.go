package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

// Stored spans whose sampling was invalid, or configured, are counted
// (docs/SPEC.md §5.5), as the decoder marked them.
func TestSamplingCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := cfg()
	c.Registerer = reg
	st := openStore(t, t.TempDir())
	defer st.Close()
	p, stop := start(t, st, c)
	defer stop()
	at := time.Now().UnixNano()
	b := New(1)
	root := b.Root("a", "GET /", at, at+10)
	b.Call(root, "a", "b", "op", at+1, at+2, nil)
	b.Call(root, "a", "c", "op", at+3, at+4, nil)
	for i, s := range []graph.Sampling{graph.SamplingInvalid, graph.SamplingConfigured, graph.SamplingInvalid, graph.SamplingRecorded, graph.SamplingNone} {
		b.Spans[i].Sampling = s
		b.Spans[i].AdjustedCount = map[graph.Sampling]float64{graph.SamplingInvalid: 1, graph.SamplingConfigured: 10, graph.SamplingRecorded: 4}[s]
	}
	if len(b.Spans) != 5 {
		t.Fatalf("%d spans", len(b.Spans))
	}
	if err := p.Consume(context.Background(), b.Spans); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, reg, "stormradius_spans_sampling_invalid_total"); got != 2 {
		t.Errorf("invalid %v, want 2", got)
	}
	if got := metric(t, reg, "stormradius_spans_sampling_configured_total"); got != 1 {
		t.Errorf("configured %v, want 1", got)
	}
}
