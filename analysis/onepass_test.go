package analysis_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	shapes "github.com/stormradius/stormradius/internal/corpus"
	"github.com/stormradius/stormradius/sim"
)

// twoPass is InMemory as it was before issue 32: every trace evaluated,
// added to the report and the minute counts; then, once incidents are
// detected, every trace of an incident minute evaluated again and added
// to the incidents it falls in. InMemory evaluates each trace once; its
// document must be this one.
func twoPass(traces [][]graph.Span, cfg analysis.Config) *analysis.Document {
	var a graph.Assembler
	assembled := make([]*graph.Trace, len(traces))
	adm := analysis.NewAdmissions(cfg)
	for i, tr := range traces {
		assembled[i] = a.Assemble(append([]graph.Span(nil), tr...))
		adm.Fold(assembled[i])
	}
	windows := analysis.NewWindows(cfg.Window)
	for _, t := range assembled {
		windows.Add(t)
	}
	ev := analysis.NewEvaluator(cfg)
	rep, mn := analysis.NewReport(), analysis.MinuteNodes{}
	for _, t := range assembled {
		tr := ev.Evaluate(t, windows.State(windows.Of(t)))
		rep.Add(&tr, 1)
		mn.Add(&tr)
	}
	sums := windows.Summaries(cfg)
	doc := rep.Document(sums, cfg)
	if spans := analysis.DetectIncidentsIn(mn, cfg.Incidents); len(spans) > 0 {
		c := analysis.NewIncidentCollector(spans)
		for _, t := range assembled {
			if c.Covers(t.Start()) {
				tr := ev.Evaluate(t, windows.State(windows.Of(t)))
				c.Add(&tr)
			}
		}
		doc.Incidents = c.Docs(analysis.SummaryGraphs(sums, cfg.Window), cfg.Incidents)
	}
	return doc
}

// TestInMemoryOnePass: on the shapes with incidents (many sharing a
// minute, and a few in a long mesh's traces), InMemory's document —
// incidents and every figure — is the two-pass one, on one worker and on
// three.
func TestInMemoryOnePass(t *testing.T) {
	for _, name := range []string{"incidents", "mesh", "short"} {
		s, _ := shapes.ByName(name, 40_000)
		traces, _, err := s.Decode(sim.Proto)
		if err != nil {
			t.Fatal(err)
		}
		cfg := analysis.Config{}
		want, err := json.Marshal(twoPass(traces, cfg))
		if err != nil {
			t.Fatal(err)
		}
		var ref analysis.Document
		json.Unmarshal(want, &ref)
		if len(ref.Incidents) == 0 {
			t.Fatalf("%s: no incidents: the test would not test them", name)
		}
		for _, workers := range []int{1, 3} {
			doc, _ := analysis.InMemory(graph.Lists(traces), cfg, workers)
			got, _ := json.Marshal(doc)
			if !bytes.Equal(got, want) {
				t.Errorf("%s, %d workers: the one-pass document differs from the two-pass one\n got %.600s\nwant %.600s", name, workers, got, want)
			}
		}
		t.Logf("%s: %d traces, %d incidents", name, len(traces), len(ref.Incidents))
	}
}
