package sim

import (
	"math/rand/v2"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Exports reshapes the result as a mesh of SDKs exports it: every service
// sends its own spans, so a trace reaches the collector in pieces (one
// ResourceSpans per service per trace), from many requests, in no
// particular order. The pieces are shuffled with seed — among all traces
// when spread is 0, else among the pieces of spread consecutive traces
// (traces that ran at about the same time, as they arrive in production) —
// and packed perRequest to an export request. The traces are copied; r is
// unchanged.
func (r *Result) Exports(seed uint64, perRequest, spread int) []ptrace.Traces {
	if spread <= 0 {
		spread = len(r.Traces)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var pieces []ptrace.ResourceSpans
	for lo := 0; lo < len(r.Traces); lo += spread {
		start := len(pieces)
		for _, t := range r.Traces[lo:min(lo+spread, len(r.Traces))] {
			rss := t.Data.ResourceSpans()
			for i := 0; i < rss.Len(); i++ {
				pieces = append(pieces, rss.At(i))
			}
		}
		part := pieces[start:]
		rng.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
	}
	perRequest = max(perRequest, 1)
	var out []ptrace.Traces
	for lo := 0; lo < len(pieces); lo += perRequest {
		td := ptrace.NewTraces()
		for _, p := range pieces[lo:min(lo+perRequest, len(pieces))] {
			p.CopyTo(td.ResourceSpans().AppendEmpty())
		}
		out = append(out, td)
	}
	return out
}
