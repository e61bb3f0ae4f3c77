package analysis_test

import (
	"encoding/json"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// FuzzAnalyze: any span soup, over several traces, analyses without panic
// into a document that encodes.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 0, 10, 1, 0, 0, 1, 2, 1, 3, 0, 1, 2, 1, 0, 0})
	f.Add([]byte{1, 1, 2, 2, 0, 0, 1, 0, 0, 0, 1, 2, 1, 2, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		names := []string{"a", "b", "c", "redis"}
		var spans []graph.Span
		for len(data) >= 10 {
			d := data[:10]
			data = data[10:]
			s := graph.Span{
				TraceID: graph.TraceID{d[0] % 3}, SpanID: graph.SpanID{7: d[1] % 16}, Kind: graph.Kind(d[3] % 6),
				Service: names[d[4]%4], Operation: names[(d[4]>>2)%4], Peer: names[(d[4]>>4)%4],
				Start: int64(d[5]), End: int64(d[6]), Failed: d[7]&1 != 0, Claim: graph.Claim((d[7] >> 1) & 3),
				HasResend: d[7]&8 != 0, Resend: int32(d[7] >> 4 % 3), Target: uint64(d[8] % 2),
				CriteriaSatisfied: d[9]&1 != 0, Suppressed: d[9]&2 != 0, FailOpen: graph.Tri((d[9] >> 2) % 3),
			}
			if d[2] != 0 {
				s.ParentID = graph.SpanID{7: d[2] % 17}
			}
			spans = append(spans, s)
		}
		doc, state := analysis.InMemory(graph.Lists(graph.GroupTraces(spans)), analysis.Config{}, 1)
		if _, err := json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(state.Merged())
		if err != nil {
			t.Fatal(err)
		}
		var back analysis.State
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		if doc.Spans > int64(len(spans)) {
			t.Fatalf("%d spans reported from %d", doc.Spans, len(spans))
		}
	})
}
