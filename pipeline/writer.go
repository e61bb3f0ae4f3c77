package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/stormradius/stormradius/graph"
)

// writeReq is one Consume call waiting for its spans to be durable.
type writeReq struct {
	spans []graph.Span
	done  chan error
}

// writer group-commits span writes: it takes every request waiting, up to
// MaxWriteSpans spans, writes them in one store write (one transaction,
// one fsync), queues them for analysis and only then answers the callers.
// On ctx's end it writes what was already queued and answers later callers
// with ErrClosed.
func (p *Pipeline) writer(ctx context.Context) {
	var batch []*writeReq
	var spans []graph.Span
	for {
		batch = batch[:0]
		select {
		case r := <-p.writes:
			batch = append(batch, r)
		case <-ctx.Done():
			// Drain: what was accepted before the end is written.
			for {
				select {
				case r := <-p.writes:
					p.write([]*writeReq{r}, nil)
				default:
					return
				}
			}
		}
		n := len(batch[0].spans)
	more:
		for n < p.cfg.MaxWriteSpans {
			select {
			case r := <-p.writes:
				batch = append(batch, r)
				n += len(r.spans)
			default:
				break more
			}
		}
		spans = p.write(batch, spans)
	}
}

// write stores the spans of batch and answers each request.
func (p *Pipeline) write(batch []*writeReq, spans []graph.Span) []graph.Span {
	spans = spans[:0]
	for _, r := range batch {
		spans = append(spans, r.spans...)
	}
	start := time.Now()
	// The write must not be abandoned half-way because one caller gave up:
	// the others are waiting for it. A bounded context of its own.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	seq, err := p.st.WriteSpans(ctx, spans)
	cancel()
	p.m.writeSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		p.inflight.Add(-int64(len(spans)))
		p.m.rejected.WithLabelValues("store").Add(float64(len(spans)))
		p.m.storeErrors.WithLabelValues("write_spans").Inc()
		p.log.Warn("span write failed", "spans", len(spans), "err", err)
		err = fmt.Errorf("pipeline: %w", err)
		for _, r := range batch {
			r.done <- err
		}
		return spans
	}
	p.m.stored.Add(float64(len(spans)))
	now := p.cfg.Now()
	skewed, truncated := 0, 0
	for i := range spans {
		if d := spans[i].Start - now.UnixNano(); d > int64(time.Hour) || d < -int64(time.Hour) {
			skewed++
		}
		if spans[i].Truncated {
			truncated++
		}
	}
	p.m.skewed.Add(float64(skewed))
	p.m.truncated.Add(float64(truncated))
	p.mu.Lock()
	p.pending.add(spans, seq, now)
	p.setPendingGauges()
	p.mu.Unlock()
	for _, r := range batch {
		r.done <- nil
	}
	// Don't keep a huge buffer alive between bursts.
	if cap(spans) > 4*p.cfg.MaxWriteSpans {
		return nil
	}
	return spans
}

var (
	_ Consumer  = (*Pipeline)(nil)
	_ Saturated = (*Pipeline)(nil)
)
