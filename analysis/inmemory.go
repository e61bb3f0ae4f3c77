package analysis

import (
	"runtime"
	"sync"

	"github.com/stormradius/stormradius/graph"
)

// InMemory analyses a set of traces held in memory: every trace is assembled and added to its
// window's state (docs/SPEC.md §4.3: the epoch-aligned window of length cfg.Window
// holding its start), then evaluated against that window's final state.
// workers ≤ 0 means one per CPU. While every window's names are within
// cfg.Limits the result does not depend on the order of traces or on
// workers; past them, names are admitted in the order of src (Limits).
// Spans are taken from src one trace at a time and not kept once
// assembled.
func InMemory(src graph.Source, cfg Config, workers int) (*Document, *Windows) {
	n := src.Len()
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, n))
	assembled := make([]*graph.Trace, n)
	parallel(n, workers, func(w, lo, hi int) {
		var a graph.Assembler
		var ar graph.Arena // every trace is kept until the end
		var buf []graph.Span
		view, _ := src.(graph.Viewer)
		for i := lo; i < hi; i++ {
			// AssembleIn reads the spans: a source that can lend them is
			// not copied from.
			var spans []graph.Span
			if view != nil {
				spans = view.View(i)
			} else {
				buf = src.Spans(i, buf)
				spans = buf
			}
			assembled[i] = a.AssembleIn(&ar, spans)
		}
	})
	// Names are admitted in input order, on one goroutine: the same input
	// gives the same figures whatever the workers.
	adm := NewAdmissions(cfg)
	for _, t := range assembled {
		adm.Fold(t)
	}
	wparts := make([]*Windows, workers)
	parallel(n, workers, func(w, lo, hi int) {
		ws := NewWindows(cfg.Window)
		ws.Growing() // traces are only added
		for i := lo; i < hi; i++ {
			ws.Add(assembled[i])
		}
		wparts[w] = ws
	})
	windows := NewWindows(cfg.Window)
	for _, ws := range wparts {
		if ws != nil {
			windows.Merge(ws)
		}
	}
	// One evaluation per trace: each result is summed into its minute
	// (MinuteResults), the whole report is the minutes' merged, and an
	// incident's figures are the merge of its minutes'.
	parts := make([]MinuteResults, workers)
	parallel(len(assembled), workers, func(w, lo, hi int) {
		ev := NewEvaluator(cfg)
		ev.FrozenStates()     // every window's state is final
		ev.TransientResults() // each result is summed before the next
		mr := MinuteResults{}
		for i := lo; i < hi; i++ {
			t := assembled[i]
			tr := ev.Evaluate(t, windows.State(windows.Of(t)))
			mr.Add(&tr)
		}
		parts[w] = mr
	})
	all := MinuteResults{}
	for _, p := range parts {
		all.Merge(p)
	}
	return inMemoryDocument(all, windows, cfg), windows
}

// inMemoryDocument is the document of the results summed by minute: the
// report is the minutes' merged, incidents are detected from their node
// counts and their figures are the merge of their minutes'.
func inMemoryDocument(all MinuteResults, windows *Windows, cfg Config) *Document {
	rep, mn := NewReport(), MinuteNodes{}
	all.MergeInto(rep)
	all.Nodes(mn)
	sums := windows.Summaries(cfg)
	doc := rep.Document(sums, cfg)
	if spans := DetectIncidentsIn(mn, cfg.Incidents); len(spans) > 0 {
		c := NewIncidentCollector(spans)
		all.AddTo(c)
		doc.Incidents = c.Docs(SummaryGraphs(sums, cfg.Window), cfg.Incidents)
	}
	return doc
}

// parallel splits [0, n) into workers contiguous chunks and runs fn on each.
func parallel(n, workers int, fn func(w, lo, hi int)) {
	if n == 0 {
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min(n, (w+1)*chunk)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w, lo, hi)
		}()
	}
	wg.Wait()
}
