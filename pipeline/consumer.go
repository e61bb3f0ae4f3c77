package pipeline

import (
	"context"
	"errors"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// The errors a Consumer returns when nothing was stored and the client
// should retry later: receivers map them to statuses with errors.Is and
// need no other package. ErrUnavailable and ErrClosed are the store's
// sentinels, passed through.
var (
	// ErrBackpressure: too much data is in flight (OTLP: 503 / UNAVAILABLE
	// with Retry-After; Kafka: pause).
	ErrBackpressure = errors.New("overloaded: too much data in flight, retry later")
	// ErrUnavailable: the store cannot be reached or refused the write.
	ErrUnavailable = store.ErrUnavailable
	// ErrClosed: the pipeline or its store was closed.
	ErrClosed = store.ErrClosed
)

// Consumer takes the spans a receiver decoded (OTLP gRPC or HTTP, Kafka).
// The Pipeline implements it.
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
