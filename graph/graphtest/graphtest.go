// Package graphtest builds spans by hand for tests of the analysis: one
// trace at a time, with explicit times, so that expected values can be
// worked out on paper.
package graphtest

import "github.com/stormradius/stormradius/graph"

// Trace accumulates the spans of one trace.
type Trace struct {
	Spans []graph.Span
	id    graph.TraceID
	next  uint64
}

// New returns a builder for trace id n.
func New(n byte) *Trace {
	t := &Trace{}
	t.id[15] = n
	t.id[0] = 0xab
	return t
}

// Opt changes a span being built.
type Opt func(*graph.Span)

// Failed marks the span failed.
func Failed(s *graph.Span) { s.Failed = true }

// Claim sets the claim the span carried.
func Claim(c graph.Claim) Opt { return func(s *graph.Span) { s.Claim = c } }

// Resend sets the resend number.
func Resend(n int32) Opt { return func(s *graph.Span) { s.HasResend, s.Resend = true, n } }

// Target sets the url.full / db.query.text hash.
func Target(h uint64) Opt { return func(s *graph.Span) { s.Target = h } }

// Criteria marks retry.criteria_satisfied.
func Criteria(s *graph.Span) { s.CriteriaSatisfied = true }

// Suppressed marks retry.suppressed.
func Suppressed(s *graph.Span) { s.Suppressed = true }

// FailOpen declares dependency.fail_open.
func FailOpen(b bool) Opt { return func(s *graph.Span) { s.FailOpen = graph.TriOf(b) } }

// Peer sets the callee name of a CLIENT span.
func Peer(p string) Opt { return func(s *graph.Span) { s.Peer = p } }

// Parent overrides the parent id (for missing-parent and cycle tests).
func Parent(id graph.SpanID) Opt { return func(s *graph.Span) { s.ParentID = id } }

// ID forces the span id.
func ID(id graph.SpanID) Opt { return func(s *graph.Span) { s.SpanID = id } }

// SpanID returns the span id a test names n.
func SpanID(n uint64) graph.SpanID {
	var id graph.SpanID
	for i := 7; i >= 0; i-- {
		id[i] = byte(n)
		n >>= 8
	}
	return id
}

// Span adds a span of the given kind under parent (zero for none) and
// returns its id. Operation is op for SERVER spans and the name otherwise.
func (t *Trace) Span(parent graph.SpanID, kind graph.Kind, service, op string, start, end int64, opts ...Opt) graph.SpanID {
	t.next++
	s := graph.Span{
		TraceID: t.id, SpanID: SpanID(t.next), ParentID: parent, Kind: kind,
		Service: service, Name: op, Operation: op, Start: start, End: end, Peer: "unknown",
	}
	for _, o := range opts {
		o(&s)
	}
	t.Spans = append(t.Spans, s)
	return s.SpanID
}

// Root adds a root SERVER span.
func (t *Trace) Root(service, op string, start, end int64, opts ...Opt) graph.SpanID {
	return t.Span(graph.SpanID{}, graph.KindServer, service, op, start, end, opts...)
}

// Call adds a CLIENT span of caller under parent and the callee's SERVER
// span under it, both over [start, end]. clientOpts apply to the CLIENT
// span, serverOpts to the SERVER span. It returns the SERVER span's id.
func (t *Trace) Call(parent graph.SpanID, caller, callee, op string, start, end int64, clientOpts []Opt, serverOpts ...Opt) graph.SpanID {
	c := t.Span(parent, graph.KindClient, caller, op, start, end, clientOpts...)
	return t.Span(c, graph.KindServer, callee, op, start, end, serverOpts...)
}

// C is shorthand for a list of CLIENT span options.
func C(opts ...Opt) []Opt { return opts }

// Sampled sets the span's sampling source and adjusted count.
func Sampled(src graph.Sampling, adjusted float64) Opt {
	return func(s *graph.Span) { s.Sampling, s.AdjustedCount = src, adjusted }
}

// Weighted sets every span's sampling to an adjusted count recorded on
// the span (as a sampler that writes the trace's probability on each
// span does), and returns t.
func (t *Trace) Weighted(adjusted float64) *Trace {
	for i := range t.Spans {
		t.Spans[i].Sampling, t.Spans[i].AdjustedCount = graph.SamplingRecorded, adjusted
	}
	return t
}
