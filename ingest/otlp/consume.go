package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/pipeline"
)

// work is what one in-flight request needs, pooled so that a steady stream
// of requests reuses it: a Decoder (with its intern table, warm after the
// first requests), the span slice it fills, and for HTTP the body as sent,
// its share of the body budget, the decompressed body and the
// decompressors.
type work struct {
	dec      *ingest.Decoder
	spans    []graph.Span
	raw      []byte // the HTTP body as sent
	reserved int64  // bytes of the body budget raw holds
	body     []byte // the HTTP body decompressed
	unz      decoders
	pace     pace // the HTTP body's rate and time limit
}

func (s *Server) getWork() *work {
	if w, ok := s.works.Get().(*work); ok {
		return w
	}
	return &work{dec: ingest.NewDecoder(ingest.DecoderConfig{ClaimHeader: s.cfg.ClaimHeader, SamplingConfig: s.cfg.Sampling})}
}

func (s *Server) putWork(w *work) {
	// Strings in the spans are interned by the decoder and live on; only
	// the slice is reused. Zeroing it drops the references of the last
	// request, so that a pooled work does not pin strings the intern
	// table has since let go.
	clear(w.spans[:cap(w.spans)])
	w.spans = w.spans[:0]
	w.body = w.body[:0]
	w.raw = w.raw[:0]
	if w.reserved > 0 {
		s.budget.release(w.reserved)
		w.reserved = 0
	}
	s.works.Put(w)
}

// acquire takes one of the MaxInflightRequests slots, waiting at most
// admissionWait (or until ctx is done). It reports whether it got one; the
// caller then calls release.
func (s *Server) acquire(ctx context.Context) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(admissionWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (s *Server) release() { <-s.slots }

// saturated reports whether the consumer would refuse any span now
// (pipeline.Saturated): the request is then answered without being decoded.
func (s *Server) saturated() bool {
	c, ok := s.consumer.(pipeline.Saturated)
	return ok && c.Saturated()
}

// failure classifies why a request's spans were not stored.
type failure uint8

const (
	failNone         failure = iota
	failBackpressure         // retryable: too much in flight downstream
	failUnavailable          // retryable: the store is down or closing
	failCanceled             // the caller gave up
	failInternal             // not retryable
)

// outcome is what became of a request's decoded spans.
type outcome struct {
	received int
	accepted int
	rejected [reasonStartTime + 1]int // spans rejected for good, by reason
	fail     failure
	err      error // the Consume error, for the log
}

// offered returns the number of spans handed to the Consumer (stored or
// not): those not rejected for good.
func (o *outcome) offered() int { return o.received - o.permanentRejects() }

// permanentRejects returns the number of spans rejected for good.
func (o *outcome) permanentRejects() int {
	n := 0
	for _, c := range o.rejected {
		n += c
	}
	return n
}

// rejectMessage is the partial-success error message: how many spans were
// rejected, and why.
func (o *outcome) rejectMessage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d spans rejected:", o.permanentRejects(), o.received)
	sep := " "
	for r, what := range [...]string{
		reasonTraceID:   "with an all-zero (invalid) trace id",
		reasonSpanID:    "with an all-zero (invalid) span id",
		reasonStartTime: "without a start time",
	} {
		if o.rejected[r] > 0 {
			fmt.Fprintf(&b, "%s%d %s", sep, o.rejected[r], what)
			sep = ", "
		}
	}
	return b.String()
}

// consume filters out the spans of w.spans that are rejected for good,
// hands the rest to the Consumer and counts what became of them. The spans
// must be fully decoded: what Consume returns nil for is acknowledged.
func (s *Server) consume(ctx context.Context, p protocol, w *work, start time.Time) outcome {
	spans := w.spans
	o := outcome{received: len(spans)}
	n := 0
	for i := range spans {
		sp := &spans[i]
		switch {
		case sp.TraceID.IsZero():
			o.rejected[reasonTraceID]++
			continue
		case sp.SpanID.IsZero():
			o.rejected[reasonSpanID]++
			continue
		case sp.Start == 0:
			o.rejected[reasonStartTime]++
			continue
		}
		if n != i { // compact in place; no copy while nothing was rejected
			spans[n] = *sp
		}
		n++
	}
	kept := spans[:n]
	m := s.metrics
	m.received[p].Add(float64(len(spans)))
	for r, n := range o.rejected {
		if n > 0 {
			m.rejected[p][r].Add(float64(n))
		}
	}
	if o.permanentRejects() > 0 {
		// The sender drops these for good (a partial success): say so
		// here too, at most once a second.
		s.logLimited(&s.rejectLog[p], slog.LevelWarn, "otlp: spans rejected", "like_requests_not_logged", func() []any {
			return []any{"protocol", protocolNames[p], "message", o.rejectMessage()}
		})
	}
	if len(kept) > 0 {
		if err := s.consumer.Consume(ctx, kept); err != nil {
			if ctx.Err() != nil {
				// Consume gave up waiting, but what it handed the spans
				// to may still read them (the pipeline's writer does):
				// leave the slice to it, and to the GC.
				w.spans = nil
			}
			o.fail, o.err = classify(ctx, err)
			m.rejected[p][o.fail.reason()].Add(float64(len(kept)))
		} else {
			o.accepted = len(kept)
			m.accepted[p].Add(float64(len(kept)))
		}
	}
	m.duration[p].Observe(time.Since(start).Seconds())
	return o
}

// classify maps a Consume error to a failure.
func classify(ctx context.Context, err error) (failure, error) {
	switch {
	case errors.Is(err, pipeline.ErrBackpressure):
		return failBackpressure, err
	case errors.Is(err, pipeline.ErrUnavailable), errors.Is(err, pipeline.ErrClosed):
		// Closed: this process is going away; another (or this one,
		// restarted) will take the retry.
		return failUnavailable, err
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return failCanceled, err
	}
	return failInternal, err
}

func (f failure) reason() reason {
	switch f {
	case failBackpressure:
		return reasonBackpressure
	case failUnavailable:
		return reasonUnavailable
	case failCanceled:
		return reasonCanceled
	}
	return reasonInternal
}

// clientMessage is what a client is told about a failure: the store's own
// error stays in the log, as it may name internal hosts.
func (f failure) clientMessage() string {
	switch f {
	case failBackpressure:
		return "stormradius is overloaded: too much data in flight, retry later"
	case failUnavailable:
		return "stormradius cannot store spans now (storage unavailable), retry later"
	case failCanceled:
		return "request canceled before its spans were stored"
	}
	return "internal error: the spans could not be stored"
}

// busyMessage is what a client refused by admission control is told.
const busyMessage = "stormradius is busy: too many requests in flight, retry later"
