// Package corpus is the family of benchmark corpora (issue 32): simulated
// meshes of different shapes, so that a benchmark tuned on one mesh does
// not hide what other meshes pay. Every shape is about the same number of
// spans; Write renders one as a trace file (length-prefixed protobuf or
// OTLP JSON lines, as the collector's file exporter writes them).
//
//   - mesh: the analysis corpus's mesh (25 hops deep, fan-out 3, three
//     deep services failing in 5–20% of traces), one trace a request.
//   - short: many short traces (5–20 spans), collector-batched requests.
//   - deep: call chains 30 levels deep, faults at the bottom.
//   - wide: one call fanning out to 120 parallel children.
//   - attrs: attribute-heavy spans (32 extra attributes, URLs of ~300
//     bytes) on a short mesh; a quarter of the spans of the others, each
//     span being ~7 times as large.
//   - services: 1,056 service names (96 APIs, each a chain of 11).
//   - incidents: short traces in one minute, every service but the APIs
//     failing 10% of its requests: 17 incidents share the minute.
//
// Spans are written in one minute or a few (sim.DefaultSpacing). Only the
// attrs shape adds to what the simulator emits, and only attributes the
// analysis does not read: its figures are those of the same mesh without
// them.
package corpus

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/sim"
)

// Shape is one corpus.
type Shape struct {
	Name     string
	Scenario sim.Scenario
	// PerRequest is how many traces an export request holds (1: one a
	// request; more: as a collector's batch processor packs them).
	PerRequest int
	// ExtraAttrs adds that many string attributes to every span;
	// LongURLs makes every url.full about 300 bytes (the same query
	// appended to every one: retries' URLs stay equal, distinct calls'
	// distinct).
	ExtraAttrs int
	LongURLs   bool
}

// DefaultSpans is about how many spans each shape of Shapes(DefaultSpans)
// holds: the size of BenchmarkAnalyzeOneCore's corpus (issue 19).
const DefaultSpans = 366_000

// ownership is the policy every service of the shapes runs: one retry,
// claims honest, retry attributes on.
var ownership = sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}

// Names are the shapes' names, in the order Shapes returns them.
var Names = []string{"mesh", "short", "deep", "wide", "attrs", "services", "incidents"}

// Shapes returns every shape, each about spans spans.
func Shapes(spans int) []Shape {
	out := make([]Shape, 0, len(Names))
	for _, n := range Names {
		s, _ := ByName(n, spans)
		out = append(out, s)
	}
	return out
}

// ByName returns the shape called name, about spans spans.
func ByName(name string, spans int) (Shape, bool) {
	// Spans per trace of each shape, measured (sim.Write's Stats) with
	// the seeds below: the trace counts follow.
	per := func(spansPerTrace float64) int { return max(1, int(float64(spans)/spansPerTrace+0.5)) }
	switch name {
	case "mesh":
		sc := MeshScenario(per(152.6))
		return Shape{Name: name, Scenario: sc, PerRequest: 1}, true
	case "short":
		sc := shortScenario(11)
		sc.Traces = per(9.1)
		return Shape{Name: name, Scenario: sc, PerRequest: 64}, true
	case "deep":
		sc := sim.Mesh(sim.MeshConfig{Seed: 13, APIs: 2, Depth: 30, Fanout: 1, ErrorRate: 0.002, Policy: ownership})
		sc.Faults = []sim.Fault{{Service: "svc-29-0", Rate: 0.2, Persistent: true}, {Service: "svc-25-1", Rate: 0.1, Persistent: true}}
		sc.Traces = per(62.1)
		return Shape{Name: name, Scenario: sc, PerRequest: 1}, true
	case "wide":
		sc := wideScenario()
		sc.Traces = per(367.8)
		return Shape{Name: name, Scenario: sc, PerRequest: 1}, true
	case "attrs":
		// A quarter of the spans: each is ~7 times the size of another
		// shape's.
		sc := shortScenario(17)
		sc.Traces = per(4 * 10.7)
		return Shape{Name: name, Scenario: sc, PerRequest: 64, ExtraAttrs: 32, LongURLs: true}, true
	case "services":
		sc := servicesScenario()
		sc.Traces = per(22.2)
		return Shape{Name: name, Scenario: sc, PerRequest: 16}, true
	case "incidents":
		sc := sim.Mesh(sim.MeshConfig{Seed: 23, APIs: 6, Depth: 5, Fanout: 2, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.002, Policy: ownership})
		for l := 1; l < 5; l++ {
			for i := 0; i < 6; i++ {
				sc.Faults = append(sc.Faults, sim.Fault{Service: "svc-" + strconv.Itoa(l) + "-" + strconv.Itoa(i), Rate: 0.1})
			}
		}
		sc.Traces = per(24.1)
		sc.Spacing = time.Minute / time.Duration(sc.Traces+1) // every trace in one minute
		return Shape{Name: name, Scenario: sc, PerRequest: 64}, true
	}
	return Shape{}, false
}

// MeshScenario is the analysis corpus's mesh (the mesh shape; the
// analysis benchmarks' and BenchmarkAnalyzeOneCore's) with traces traces.
func MeshScenario(traces int) sim.Scenario {
	sc := sim.Mesh(sim.MeshConfig{Seed: 7, APIs: 4, Depth: 25, Fanout: 3, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.002, Policy: ownership})
	sc.Faults = []sim.Fault{
		{Service: "svc-20-1", Rate: 0.2, Persistent: true},
		{Service: "svc-12-2", Rate: 0.1, Persistent: true},
		{Service: "svc-6-0", Rate: 0.05, Persistent: true},
	}
	sc.Traces = traces
	return sc
}

// shortScenario is a mesh of 8 APIs 3 hops deep, fan-out 2: traces of
// 5–20 spans.
func shortScenario(seed uint64) sim.Scenario {
	sc := sim.Mesh(sim.MeshConfig{Seed: seed, APIs: 8, Depth: 3, Fanout: 2, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.002, Policy: ownership})
	sc.Faults = []sim.Fault{{Service: "svc-2-1", Rate: 0.1, Persistent: true}, {Service: "svc-1-5", Rate: 0.05, Persistent: true}}
	return sc
}

// wideScenario: an API calls a gateway that calls a backend 120 times in
// parallel (one sequential step), each backend call reading a cache.
func wideScenario() sim.Scenario {
	svcs := []sim.Service{
		{Name: "api-wide", Version: "1.0.0", Operation: "GET /api/wide", Policy: ownership, ErrorRate: 0.002,
			Calls: []sim.Edge{{To: "gateway"}}},
		{Name: "gateway", Version: "1.0.0", Operation: "POST /v1/gateway", Policy: ownership, ErrorRate: 0.002,
			Calls: []sim.Edge{{To: "backend", Parallel: 120}, {To: "db-gateway", Virtual: true}}},
		{Name: "backend", Version: "1.0.0", Protocol: sim.GRPC, Policy: ownership, ErrorRate: 0.001,
			Calls: []sim.Edge{{To: "cache-backend", Virtual: true, Op: "GET", FailOpen: true, DeclareFailOpen: true}}},
	}
	return sim.Scenario{Services: svcs, Root: "api-wide", Seed: 29,
		Faults: []sim.Fault{{Service: "cache-backend", Rate: 0.01}, {Service: "backend", Rate: 0.002}}}
}

// servicesScenario: 96 APIs, each a chain of 11 services of its own
// (1,056 service names, every one on a path), the last reading a
// database; three chains have a failing service.
func servicesScenario() sim.Scenario {
	var svcs []sim.Service
	var roots []string
	for a := range 96 {
		names := make([]string, 11)
		for k := range names {
			names[k] = "svc-" + strconv.Itoa(a) + "-" + strconv.Itoa(k)
		}
		names[0] = "api-" + strconv.Itoa(a)
		chain := sim.Chain(names, ownership)
		for k := range chain {
			chain[k].ErrorRate = 0.002
			if k%3 == 1 {
				chain[k].Protocol, chain[k].Operation = sim.GRPC, ""
			}
		}
		chain[10].Calls = []sim.Edge{{To: "db-" + strconv.Itoa(a), Virtual: true}}
		svcs = append(svcs, chain...)
		roots = append(roots, names[0])
	}
	return sim.Scenario{Services: svcs, Root: roots[0], Roots: roots[1:], Seed: 19,
		Faults: []sim.Fault{{Service: "svc-3-9", Rate: 0.2, Persistent: true}, {Service: "svc-40-5", Rate: 0.1, Persistent: true},
			{Service: "svc-77-10", Rate: 0.3, Persistent: true}}}
}

// Stats says what Write wrote.
type Stats struct {
	Spans, Traces, Requests int
	Bytes                   int64
}

// Write writes the shape to w in format f.
func (s Shape) Write(w io.Writer, f sim.Format) (Stats, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	cw := &countWriter{w: bw}
	var st Stats
	batch := ptrace.NewTraces()
	held := 0
	flush := func() error {
		if held == 0 {
			return nil
		}
		st.Requests++
		held = 0
		var err error
		if f == sim.JSONLines {
			err = sim.WriteJSONLine(cw, batch)
		} else {
			err = sim.WriteProtoMessage(cw, batch)
		}
		batch = ptrace.NewTraces()
		return err
	}
	_, err := sim.Generate(s.Scenario, func(t sim.Trace) error {
		st.Traces++
		st.Spans += t.Spans
		if s.ExtraAttrs > 0 || s.LongURLs {
			s.decorate(t.Data)
		}
		t.Data.ResourceSpans().MoveAndAppendTo(batch.ResourceSpans())
		if held++; held >= max(1, s.PerRequest) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = bw.Flush()
	}
	st.Bytes = cw.n
	if err != nil {
		return st, fmt.Errorf("corpus %s: %w", s.Name, err)
	}
	return st, nil
}

// longQuery is what LongURLs appends to every url.full.
var longQuery = "?" + strings.Repeat("filter%5Bcustomer%5D=8f1c2a0e-4b7d-4e0a-9d3c-", 6) + "&page=1&per_page=100&sort=-created_at&include=items,owner,shipping_address"

// decorate adds the shape's extra attributes to every span of td.
func (s Shape) decorate(td ptrace.Traces) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s.decorateSpan(spans.At(k).Attributes())
			}
		}
	}
}

func (s Shape) decorateSpan(a pcommon.Map) {
	if s.LongURLs {
		if u, ok := a.Get("url.full"); ok {
			u.SetStr(u.Str() + longQuery)
		}
	}
	a.EnsureCapacity(a.Len() + s.ExtraAttrs)
	for k := 0; k < s.ExtraAttrs; k++ {
		key := "app.attr." + strconv.Itoa(k)
		switch k % 4 {
		case 0:
			a.PutStr(key, "ordinary-attribute-value-"+strconv.Itoa(k))
		case 1:
			a.PutInt(key, int64(k)*1_000_003)
		case 2:
			a.PutBool(key, k%3 == 0)
		default:
			a.PutStr(key, "https://example.internal/r/"+strconv.Itoa(k))
		}
	}
}

// Decode writes the shape in format f and decodes it as the receivers do
// (ingest.Decoder), grouped by trace (graph.GroupTraces).
func (s Shape) Decode(f sim.Format) ([][]graph.Span, Stats, error) {
	var buf bytes.Buffer
	st, err := s.Write(&buf, f)
	if err != nil {
		return nil, st, err
	}
	var spans []graph.Span
	dec := ingest.NewDecoder(ingest.DecoderConfig{})
	if _, err := dec.ReadFile(&buf, s.Name, func(s []graph.Span) error {
		spans = append(spans, s...)
		return nil
	}, nil); err != nil {
		return nil, st, fmt.Errorf("corpus %s: %w", s.Name, err)
	}
	return graph.GroupTraces(spans), st, nil
}

// countWriter counts the bytes written.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
