package graph_test

import (
	"testing"

	"github.com/stormradius/stormradius/graph"
)

// SpansFromBytes turns fuzz input into spans, 9 bytes a span, over a small
// id space so that duplicates, cycles, self-parents and missing parents
// are common.
func spansFromBytes(data []byte) []graph.Span {
	services := []string{"a", "b", "c", "redis"}
	var out []graph.Span
	for len(data) >= 9 {
		d := data[:9]
		data = data[9:]
		s := graph.Span{
			TraceID:   graph.TraceID{1},
			SpanID:    graph.SpanID{7: d[0] % 32},
			Kind:      graph.Kind(d[2] % 7),
			Service:   services[d[3]%4],
			Operation: services[(d[3]>>2)%4],
			Peer:      services[(d[3]>>4)%4],
			Start:     int64(d[4]),
			End:       int64(d[5]),
			Failed:    d[6]&1 != 0,
			Claim:     graph.Claim((d[6] >> 1) & 3),
			HasResend: d[6]&8 != 0,
			Resend:    int32(d[6] >> 4 % 3),
			Target:    uint64(d[7] % 3),
		}
		if d[1] != 0 {
			s.ParentID = graph.SpanID{7: d[1] % 33}
		}
		s.CriteriaSatisfied = d[8]&1 != 0
		s.Suppressed = d[8]&2 != 0
		s.FailOpen = graph.Tri((d[8] >> 2) % 3)
		out = append(out, s)
	}
	return out
}

// FuzzAssemble: any span soup assembles without panic or loop, into a
// forest no larger than its input, whose calls and attempts are
// consistent.
func FuzzAssemble(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 0, 10, 1, 0, 0, 2, 1, 3, 0, 1, 2, 1, 0, 0, 3, 2, 2, 1, 1, 2, 1, 0, 0})
	f.Add([]byte{1, 2, 2, 0, 0, 1, 0, 0, 0, 2, 1, 2, 0, 0, 1, 0, 0, 0}) // a cycle
	f.Add([]byte{1, 1, 2, 0, 0, 1, 0, 0, 0})                            // self-parent
	f.Fuzz(func(t *testing.T, data []byte) {
		spans := spansFromBytes(data)
		var a graph.Assembler
		tr := a.Assemble(spans)
		if len(tr.Spans)+tr.Duplicates != len(spans) {
			t.Fatalf("%d spans + %d duplicates != %d input", len(tr.Spans), tr.Duplicates, len(spans))
		}
		// Every span makes at most one hop, but a CLIENT root span is both a
		// hop and the attempt to the virtual node it calls.
		if len(tr.Hops) > len(tr.Spans)+len(tr.Roots) || len(tr.Attempts) > len(tr.Spans) {
			t.Fatalf("%d hops, %d attempts from %d spans", len(tr.Hops), len(tr.Attempts), len(tr.Spans))
		}
		for i, c := range tr.Calls {
			if c.Attempts() < 1 {
				t.Fatalf("call %d has no attempt", i)
			}
			for at := c.AttemptStart; at < c.AttemptEnd; at++ {
				if tr.Attempts[at].Call != int32(i) || tr.Attempts[at].Index != at-c.AttemptStart {
					t.Fatalf("attempt %d of call %d inconsistent", at, i)
				}
				if callee := tr.Attempts[at].Callee; tr.Hops[callee].In != at || callee <= c.Caller {
					t.Fatalf("attempt %d: callee %d not after caller %d", at, callee, c.Caller)
				}
			}
		}
		for h := range tr.Hops {
			if tr.Hops[h].In < 0 && !tr.Hops[h].Root && !tr.Hops[h].Detached {
				t.Fatalf("hop %d unreachable", h)
			}
		}
		checkRoundTrip(t, tr)
	})
}
