package analysis_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

// capTraces are five one-window traces, in this order:
//
//	1 front GET /a → db (uninstrumented: a virtual service)
//	2 front GET /b
//	3 back GET /c, failing on its own
//	4 side GET /d
//	5 extra GET /e → back GET /c
//
// Distinct root APIs, in order: 4 then 5 are the 4th and 5th; distinct
// services: front, db, back, side (4th), extra (5th).
func capTraces() [][]graph.Span {
	var out [][]graph.Span
	t := New(1)
	r := t.Root("front", "GET /a", 0, 10*ms)
	t.Span(r, graph.KindClient, "front", "SELECT", 1*ms, 2*ms, Peer("db"))
	out = append(out, t.Spans)
	t = New(2)
	t.Root("front", "GET /b", 0, 10*ms)
	out = append(out, t.Spans)
	t = New(3)
	t.Root("back", "GET /c", 0, 10*ms, Failed)
	out = append(out, t.Spans)
	t = New(4)
	t.Root("side", "GET /d", 0, 10*ms)
	out = append(out, t.Spans)
	t = New(5)
	r = t.Root("extra", "GET /e", 0, 10*ms)
	t.Call(r, "extra", "back", "GET /c", 1*ms, 2*ms, nil)
	out = append(out, t.Spans)
	return out
}

func apiTraces(doc *analysis.Document) map[string]int64 {
	m := map[string]int64{}
	for _, a := range doc.APIs {
		m[a.API] = a.Traces
	}
	return m
}

func serviceRequests(doc *analysis.Document) map[string]int64 {
	m := map[string]int64{}
	for _, s := range doc.Services {
		m[s.Service] = s.Requests
	}
	return m
}

// A cap admits exactly its number of names, in the order traces come:
// a cap equal to the names seen folds nothing; one less folds the last.
func TestLimitsAtTheCap(t *testing.T) {
	for _, c := range []struct {
		name     string
		lim      analysis.Limits
		apis     map[string]int64
		services map[string]int64
	}{
		{"at every cap", analysis.Limits{APIs: 5, Services: 5, Operations: 6, Versions: 1},
			map[string]int64{"front GET /a": 1, "front GET /b": 1, "back GET /c": 1, "side GET /d": 1, "extra GET /e": 1},
			map[string]int64{"front": 2, "db": 1, "back": 2, "side": 1, "extra": 1}},
		// 3 APIs: the 4th and 5th traces' APIs go to the overflow bucket;
		// their services and nodes are admitted as they are.
		{"apis 3", analysis.Limits{APIs: 3},
			map[string]int64{"front GET /a": 1, "front GET /b": 1, "back GET /c": 1, graph.OtherAPI: 2},
			map[string]int64{"front": 2, "db": 1, "back": 2, "side": 1, "extra": 1}},
		// 4 services: extra is the 5th: its hop is ⟨other services⟩, and
		// its trace's API with it; back, which it calls, stays back.
		{"services 4", analysis.Limits{Services: 4},
			map[string]int64{"front GET /a": 1, "front GET /b": 1, "back GET /c": 1, "side GET /d": 1, graph.OtherAPI: 1},
			map[string]int64{"front": 2, "db": 1, "back": 2, "side": 1, graph.OtherService: 1}},
		// 3 operations (nodes): front GET /a, db SELECT, front GET /b;
		// back GET /c (4th) is folded to back ⟨other operations⟩ wherever
		// it appears, and the APIs rooted at folded nodes with it.
		{"operations 3", analysis.Limits{Operations: 3},
			map[string]int64{"front GET /a": 1, "front GET /b": 1, graph.OtherAPI: 3},
			map[string]int64{"front": 2, "db": 1, "back": 2, "side": 1, "extra": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, workers := range []int{1, 3} {
				doc, _ := analysis.InMemory(graph.Lists(capTraces()), analysis.Config{Limits: c.lim}, workers)
				if got := apiTraces(doc); !maps.Equal(got, c.apis) {
					t.Errorf("workers %d: APIs %v, want %v", workers, got, c.apis)
				}
				if got := serviceRequests(doc); !maps.Equal(got, c.services) {
					t.Errorf("workers %d: services %v, want %v", workers, got, c.services)
				}
				if doc.Traces != 5 || doc.Spans != 8 {
					t.Errorf("workers %d: %d traces, %d spans: want 5, 8", workers, doc.Traces, doc.Spans)
				}
			}
		})
	}
}

// Folding moves what was counted, it drops nothing, and it leaves the
// figures of the traces made of admitted names alone: with the fifth
// service past the cap, its API's figures are those of the overflow
// bucket, and the rest of the document is the uncapped one's.
func TestFoldingKeepsFigures(t *testing.T) {
	full, _ := analysis.InMemory(graph.Lists(capTraces()), analysis.Config{}, 1)
	capped, _ := analysis.InMemory(graph.Lists(capTraces()), analysis.Config{Limits: analysis.Limits{Services: 4}}, 1)
	byName := func(d *analysis.Document) map[string]analysis.APIDoc {
		m := map[string]analysis.APIDoc{}
		for _, a := range d.APIs {
			m[a.API] = a
		}
		return m
	}
	f, c := byName(full), byName(capped)
	for _, api := range []string{"front GET /a", "front GET /b", "back GET /c", "side GET /d"} {
		x, _ := json.Marshal(f[api])
		y, _ := json.Marshal(c[api])
		if string(x) != string(y) {
			t.Errorf("%s changed:\n%s\n%s", api, x, y)
		}
	}
	want, got := f["extra GET /e"], c[graph.OtherAPI]
	want.API, want.Owners, got.Owners = "", nil, nil
	got.API = ""
	x, _ := json.Marshal(want)
	y, _ := json.Marshal(got)
	if string(x) != string(y) {
		t.Errorf("the folded trace's figures changed:\n%s\n%s", x, y)
	}
	if full.Spans != capped.Spans || full.Traces != capped.Traces || full.Fleet.FailedAPIs != capped.Fleet.FailedAPIs {
		t.Errorf("totals changed: %+v vs %+v", full.Fleet, capped.Fleet)
	}
	// The edge extra → back GET /c is now ⟨other services⟩ → back GET /c.
	found := false
	for _, e := range capped.Edges {
		if e.Caller == graph.OtherService && e.Callee == "back GET /c" && e.Calls == 1 {
			found = true
		}
		if e.Caller == "extra" {
			t.Errorf("edge of a folded service kept its name: %+v", e)
		}
	}
	if !found {
		t.Errorf("no edge from %s to back: %+v", graph.OtherService, capped.Edges)
	}
}

// A window admits a name for good: a trace re-opened by late spans finds
// its names admitted although the window filled up meanwhile, and a
// state stored and read back admits what it admitted (names its counts no
// longer hold included), not what its counts alone say.
func TestAdmittedNamesStay(t *testing.T) {
	lim := analysis.Limits{APIs: 2}
	one := func(n byte, service string) *graph.Trace {
		b := New(n)
		b.Root(service, "GET /", 0, ms)
		var a graph.Assembler
		return a.Assemble(b.Spans)
	}
	f := analysis.NewFolder(lim)
	st := analysis.NewState()
	fold := func(tr *graph.Trace) string {
		f.Fold(st.Admitted(), tr)
		return tr.API()
	}
	t1 := one(1, "a")
	if api := fold(t1); api != "a GET /" {
		t.Fatalf("first API: %q", api)
	}
	st.Add(t1, 1)
	// t1 is re-opened: out of the state, and back with the same name
	// after a third API came in between.
	st.Add(t1, -1)
	if api := fold(one(2, "b")); api != "b GET /" {
		t.Fatalf("second API: %q", api)
	}
	if api := fold(one(3, "c")); api != graph.OtherAPI {
		t.Fatalf("third API with a cap of 2: %q", api)
	}
	if api := fold(one(1, "a")); api != "a GET /" {
		t.Fatalf("a re-opened trace lost its API: %q", api)
	}
	// Stored with only b's trace in it, the state keeps a's admission.
	st = analysis.NewState()
	f = analysis.NewFolder(lim)
	fold(one(1, "a"))
	tb := one(2, "b")
	fold(tb)
	st.Add(tb, 1)
	b, err := json.Marshal(st.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"admitted":{"apis":["a GET /"],"services":["a"],"nodes":[{"service":"a","operation":"GET /"}]}`) {
		t.Fatalf("stored state lacks the admitted API: %s", b)
	}
	var back analysis.State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	st = &back
	f = analysis.NewFolder(lim)
	if api := fold(one(3, "c")); api != graph.OtherAPI {
		t.Errorf("after a restart a third API was admitted: %q", api)
	}
	if api := fold(one(1, "a")); api != "a GET /" {
		t.Errorf("after a restart an admitted API was refused: %q", api)
	}
	if apis, _, _, _ := back.Admitted().Len(); apis != 2 {
		t.Errorf("%d APIs admitted, want 2", apis)
	}
	// A state that never held more than its counts stores no admitted
	// names: the stored form is what it was before caps existed.
	plain := analysis.NewState()
	plain.Add(one(4, "d"), 1)
	if b, _ := json.Marshal(plain); strings.Contains(string(b), "admitted") {
		t.Errorf("plain state: %s", b)
	}
}

// The same names in other strings (another decoder's copies) get the same
// answers: the folder's cache is keyed by where names are, the answers by
// what they are.
func TestFolderSameNamesOtherStrings(t *testing.T) {
	lim := analysis.Limits{Services: 1}
	f := analysis.NewFolder(lim)
	st := analysis.NewState()
	mk := func(n byte, service string) *graph.Trace {
		b := New(n)
		b.Root(service, "GET /", 0, ms)
		var a graph.Assembler
		return a.Assemble(b.Spans)
	}
	for i := 0; i < 3; i++ {
		a := mk(1, strings.Clone("alpha"))
		if got := f.Fold(st.Admitted(), a); got != 0 || a.Hops[0].Service != "alpha" {
			t.Fatalf("round %d: alpha folded (%v) to %q", i, got, a.Hops[0].Service)
		}
		b := mk(2, strings.Clone("beta"))
		if got := f.Fold(st.Admitted(), b); got != analysis.FoldedService|analysis.FoldedAPI || b.Hops[0].Service != graph.OtherService ||
			b.Hops[0].Operation != graph.OtherOperation || b.API() != graph.OtherAPI {
			t.Fatalf("round %d: beta %v → %+v, API %q", i, got, b.Hops[0], b.API())
		}
		if analysis.FoldedOf(b) != analysis.FoldedService|analysis.FoldedAPI {
			t.Fatalf("FoldedOf %v", analysis.FoldedOf(b))
		}
	}
}
