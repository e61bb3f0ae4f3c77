package pipeline

import (
	"context"
	"fmt"

	"github.com/stormradius/stormradius/graph"
)

// recover reads back the spans stored beyond the checkpoint — acknowledged
// before a crash but not yet analysed — and queues them as if they had
// just arrived. A trace among them that already has a record is re-opened
// by its analysis, so nothing is counted twice.
func (p *Pipeline) recover(ctx context.Context) error {
	wm, err := p.st.Watermark(ctx)
	if err != nil {
		return fmt.Errorf("pipeline: recover: %w", err)
	}
	p.mu.Lock()
	p.pending.lastSeq = wm
	p.mu.Unlock()
	n := 0
	err = p.st.SpansAfter(ctx, wm, func(seq uint64, spans []graph.Span) error {
		p.mu.Lock()
		p.pending.add(spans, seq, p.cfg.Now())
		p.mu.Unlock()
		p.inflight.Add(int64(len(spans)))
		n += len(spans)
		return nil
	})
	if err != nil {
		return fmt.Errorf("pipeline: recover: %w", err)
	}
	// Summaries that a crash kept from being stored are computed again.
	stale, err := p.st.StaleSummaries(ctx)
	if err != nil {
		return fmt.Errorf("pipeline: recover: %w", err)
	}
	for _, w := range stale {
		if _, err := p.an.state(ctx, w); err != nil {
			return fmt.Errorf("pipeline: recover: window %d: %w", w, err)
		}
		p.an.dirty[w] = true
	}
	if err := p.an.storeSummaries(ctx); err != nil {
		return fmt.Errorf("pipeline: recover: %w", err)
	}
	p.m.recovered.Add(float64(n))
	if n > 0 {
		p.log.Info("recovered spans stored beyond the checkpoint", "spans", n, "after", wm)
	}
	return nil
}
