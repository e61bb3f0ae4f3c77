package analysis_test

import (
	"bytes"
	"encoding/json"
	"reflect"
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

// TestInMemorySlots: reports find a transient result's aggregates by the
// evaluator's slots (slots.go); when the evaluator's indexes are rebuilt
// every few traces (a bound of 8 names: every slot soon stands for
// another name), the document is still the one found by names (twoPass
// evaluates results that carry no slots), on 1,056 services and on a
// mesh, with one worker and with three.
func TestInMemorySlots(t *testing.T) {
	for _, name := range []string{"services", "mesh"} {
		s, _ := shapes.ByName(name, 30_000)
		traces, _, err := s.Decode(sim.Proto)
		if err != nil {
			t.Fatal(err)
		}
		cfg := analysis.Config{}
		want, _ := json.Marshal(twoPass(traces, cfg))
		for _, bound := range []int{1 << 14, 8} {
			old := analysis.SetMaxServiceSlots(bound)
			for _, workers := range []int{1, 3} {
				doc, _ := analysis.InMemory(graph.Lists(traces), cfg, workers)
				got, _ := json.Marshal(doc)
				if !bytes.Equal(got, want) {
					t.Errorf("%s, bound %d, %d workers: the document differs from the one found by names\n got %.600s\nwant %.600s", name, bound, workers, got, want)
				}
			}
			analysis.SetMaxServiceSlots(old)
		}
	}
}

// TestTransientReportSlots: a report fed transient results (found by
// slots) holds the aggregates of one fed the same results found by names
// — services, nodes, every version's figures and claim counts (which the
// document does not show) — with the evaluator's indexes rebuilt rarely
// and every few traces.
func TestTransientReportSlots(t *testing.T) {
	for _, name := range []string{"services", "short"} {
		s, _ := shapes.ByName(name, 30_000)
		traces, _, err := s.Decode(sim.Proto)
		if err != nil {
			t.Fatal(err)
		}
		cfg := analysis.Config{}
		var a graph.Assembler
		windows := analysis.NewWindows(cfg.Window)
		assembled := make([]*graph.Trace, len(traces))
		for i, tr := range traces {
			assembled[i] = a.Assemble(append([]graph.Span(nil), tr...))
			windows.Add(assembled[i])
		}
		for _, bound := range []int{1 << 14, 8} {
			old := analysis.SetMaxServiceSlots(bound)
			byName, bySlot := analysis.NewReport(), analysis.NewReport()
			ev, tev := analysis.NewEvaluator(cfg), analysis.NewEvaluator(cfg)
			tev.TransientResults()
			claims := 0
			for _, tr := range assembled {
				st := windows.State(windows.Of(tr))
				r := ev.Evaluate(tr, st)
				byName.Add(&r, 1)
				claims += len(r.VersionClaims)
				r = tev.Evaluate(tr, st)
				bySlot.Add(&r, 1)
			}
			analysis.SetMaxServiceSlots(old)
			if claims == 0 || len(byName.Versions) == 0 {
				t.Fatalf("%s: no version claims: the test would not test them", name)
			}
			for what, pair := range map[string][2]any{"services": {byName.Services, bySlot.Services},
				"nodes": {byName.Nodes, bySlot.Nodes}, "versions": {byName.Versions, bySlot.Versions}, "apis": {byName.APIs, bySlot.APIs}} {
				if !reflect.DeepEqual(pair[0], pair[1]) {
					t.Errorf("%s, bound %d: the %s found by slots differ from those found by names", name, bound, what)
				}
			}
		}
	}
}
