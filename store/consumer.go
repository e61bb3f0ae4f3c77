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
	// up (the spans may have been stored). Consume does not retain spans
	// after it returns: the caller may reuse the slice.
	Consume(ctx context.Context, spans []graph.Span) error
}

// Saturated is a Consumer that can tell, before a request is even read,
// that it would refuse any span now with ErrBackpressure. Receivers then
// answer 503 / UNAVAILABLE without reading or decoding the request: a
// client retrying into an overloaded server costs it next to nothing.
type Saturated interface {
	Saturated() bool
}
