package corpus

import (
	"bytes"
	"encoding/binary"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/sim"
)

// shapeFacts are what a shape's file holds, read back with pdata.
type shapeFacts struct {
	spans, traces, requests int
	services                map[string]bool
	maxChildren, maxDepth   int
	minAttrs, maxURL        int
}

func readFacts(t *testing.T, data []byte) shapeFacts {
	f := shapeFacts{services: map[string]bool{}, minAttrs: 1 << 30}
	children := map[[8]byte]int{}
	parent := map[[8]byte][8]byte{}
	traces := map[[16]byte]bool{}
	var u ptrace.ProtoUnmarshaler
	for len(data) >= 4 {
		n := binary.BigEndian.Uint32(data)
		td, err := u.UnmarshalTraces(data[4 : 4+n])
		if err != nil {
			t.Fatal(err)
		}
		data = data[4+n:]
		f.requests++
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			name, _ := rs.Resource().Attributes().Get("service.name")
			f.services[name.Str()] = true
			spans := rs.ScopeSpans().At(0).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				f.spans++
				traces[sp.TraceID()] = true
				if !sp.ParentSpanID().IsEmpty() {
					children[sp.ParentSpanID()]++
					parent[sp.SpanID()] = sp.ParentSpanID()
				}
				f.minAttrs = min(f.minAttrs, sp.Attributes().Len())
				if v, ok := sp.Attributes().Get("url.full"); ok {
					f.maxURL = max(f.maxURL, len(v.Str()))
				}
			}
		}
	}
	f.traces = len(traces)
	for _, c := range children {
		f.maxChildren = max(f.maxChildren, c)
	}
	for id := range parent { // span ids are unique across the corpus
		d := 1
		for p, ok := parent[id]; ok && d < 1000; p, ok = parent[p] {
			d++
		}
		f.maxDepth = max(f.maxDepth, d)
	}
	return f
}

// TestShapes: each shape is what its name says, read back from its file
// with pdata, and about the spans asked for.
func TestShapes(t *testing.T) {
	const want = 30_000
	for _, s := range Shapes(want) {
		var buf bytes.Buffer
		st, err := s.Write(&buf, sim.Proto)
		if err != nil {
			t.Fatal(err)
		}
		f := readFacts(t, buf.Bytes())
		if f.spans != st.Spans || f.traces != st.Traces || f.requests != st.Requests || int64(buf.Len()) != st.Bytes {
			t.Errorf("%s: stats %+v, file %d spans %d traces %d requests %d bytes", s.Name, st, f.spans, f.traces, f.requests, buf.Len())
		}
		target := want
		if s.Name == "attrs" {
			target = want / 4
		}
		if f.spans < target*8/10 || f.spans > target*12/10 {
			t.Errorf("%s: %d spans, want about %d", s.Name, f.spans, target)
		}
		per := float64(f.spans) / float64(f.traces)
		switch s.Name {
		case "short":
			if per < 5 || per > 20 || f.requests*60 > f.traces {
				t.Errorf("short: %.1f spans a trace, %d traces in %d requests", per, f.traces, f.requests)
			}
		case "deep":
			if f.maxDepth < 50 { // a hop is a CLIENT and a SERVER span
				t.Errorf("deep: deepest span at level %d, want 25+ hops", f.maxDepth)
			}
		case "wide":
			if f.maxChildren < 100 {
				t.Errorf("wide: at most %d children of a span", f.maxChildren)
			}
		case "attrs":
			if f.minAttrs < 32 || f.maxURL < 250 {
				t.Errorf("attrs: %d attributes on the barest span, longest URL %d bytes", f.minAttrs, f.maxURL)
			}
		case "services":
			if len(f.services) < 1000 {
				t.Errorf("services: %d service names", len(f.services))
			}
		}
		t.Logf("%s: %d spans, %d traces (%.1f a trace), %d requests, %d services, depth %d, fan-out %d, %.0f bytes a span",
			s.Name, f.spans, f.traces, per, f.requests, len(f.services), f.maxDepth, f.maxChildren, float64(buf.Len())/float64(f.spans))
	}
}

// TestIncidentsShare: the incidents shape's traces all start in one
// minute, and at least ten incidents open in it.
func TestIncidentsShare(t *testing.T) {
	s, _ := ByName("incidents", 60_000)
	traces, _, err := s.Decode(sim.Proto)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := analysis.InMemory(graph.Lists(traces), analysis.Config{}, 1)
	if len(doc.Incidents) < 10 {
		t.Fatalf("%d incidents, want 10 or more", len(doc.Incidents))
	}
	for _, in := range doc.Incidents {
		if !in.Start.Equal(doc.Incidents[0].Start) || in.End.Sub(in.Start).Minutes() != 1 {
			t.Errorf("incident %s: %v–%v, not the one minute", in.ID, in.Start, in.End)
		}
	}
}

// TestAttrsChangeNothing: the attributes the attrs shape adds are not
// read: its document is that of the same mesh without them.
func TestAttrsChangeNothing(t *testing.T) {
	s, _ := ByName("attrs", 8_000)
	plain := s
	plain.ExtraAttrs, plain.LongURLs = 0, false
	docs := make([]*analysis.Document, 2)
	for i, sh := range []Shape{s, plain} {
		traces, _, err := sh.Decode(sim.JSONLines)
		if err != nil {
			t.Fatal(err)
		}
		docs[i], _ = analysis.InMemory(graph.Lists(traces), analysis.Config{}, 1)
	}
	if docs[0].Fleet != docs[1].Fleet || len(docs[0].APIs) != len(docs[1].APIs) || docs[0].Fleet.FailedAPIs == 0 {
		t.Fatalf("with attributes: %+v\nwithout: %+v", docs[0].Fleet, docs[1].Fleet)
	}
}
