package offline

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// TestEachTraceStopsOnFailure: once a worker's fn fails, eachTrace
// returns that error with many batches still to merge — it neither hangs
// (batches dropped on the failure ran the free ones out) nor calls fn
// again on the failed worker.
func TestEachTraceStopsOnFailure(t *testing.T) {
	e := &engine{cfg: Config{MemoryBudget: DefaultMemoryBudget, Analysis: analysis.Config{Window: time.Hour}}, workers: 2}
	e.spans.reset()
	// 20,000 one-span traces: batches of batchSpans spans, more than the
	// pool of free batches (3 × workers) many times over.
	spans := make([]graph.Span, 20*batchSpans)
	for i := range spans {
		binary.BigEndian.PutUint64(spans[i].TraceID[8:], uint64(i+1))
		binary.BigEndian.PutUint64(spans[i].SpanID[:], 1)
		spans[i].Service, spans[i].Name, spans[i].Operation = "svc", "op", "op"
	}
	if err := e.add(spans); err != nil {
		t.Fatal(err)
	}
	e.spans.group(true)
	boom := errors.New("boom")
	done := make(chan error, 1)
	go func() {
		done <- e.eachTrace(context.Background(), false, func(w int, _ []graph.Span) error { return boom })
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("eachTrace: %v, want boom", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("eachTrace did not return within 30 s of its workers failing")
	}
}
