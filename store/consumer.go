package store

import (
	"context"

	"github.com/stormradius/stormradius/graph"
)

// Consumer takes the spans a receiver decoded (OTLP gRPC or HTTP, Kafka).
// The pipeline implements it.
type Consumer interface {
	// Consume returns nil once spans are durably stored: only then may a
	// receiver acknowledge them (or Kafka commit their offsets). An error
	// wrapping ErrBackpressure or ErrUnavailable means nothing was stored
	// and the client should retry later; ctx's error means the caller gave
	// up.
	Consume(ctx context.Context, spans []graph.Span) error
}
