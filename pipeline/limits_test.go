package pipeline_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

// bothStores runs fn on the embedded store and on ClickHouse (skipped
// without the test server, chtest); open opens the test's store, again
// after a close (10-minute windows).
func bothStores(t *testing.T, fn func(t *testing.T, open func() store.Store)) {
	for _, name := range []string{"sqlite", "clickhouse"} {
		t.Run(name, func(t *testing.T) {
			opts := storeurl.Options{Data: t.TempDir(), Window: 10 * time.Minute}
			if name == "clickhouse" {
				opts.URL = chtest.FreshDSN(t)
			}
			fn(t, func() store.Store {
				st, err := storeurl.Open(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				return st
			})
		})
	}
}

// base is a window's start (10-minute windows).
var base = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()

// rootSpan is a SERVER span of trace n: the root of "service op" (no
// parent), or, with parent set, a span whose parent is outside the trace
// until that parent arrives.
func rootSpan(n byte, id byte, parent byte, service, op string, at time.Duration) graph.Span {
	s := graph.Span{Kind: graph.KindServer, Service: service, Name: op, Operation: op,
		Start: base + int64(at), End: base + int64(at) + int64(time.Millisecond), Peer: "unknown"}
	s.TraceID[0], s.TraceID[15] = 0xcd, n
	s.SpanID[7] = id
	if parent != 0 {
		s.ParentID[7] = parent
	}
	return s
}

// feedOne stores spans and analyses them before anything else comes: the
// order traces arrive in is the order their names are admitted in.
func feedOne(t *testing.T, p interface {
	Consume(context.Context, []graph.Span) error
	Flush(context.Context) error
}, spans ...graph.Span) {
	t.Helper()
	if err := p.Consume(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func reportAPIs(t *testing.T, st store.Store, acfg analysis.Config) map[string]int64 {
	t.Helper()
	doc, err := query.Document(context.Background(), st, store.Query{}, acfg)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, a := range doc.APIs {
		out[a.API] = a.Traces
	}
	return out
}

// Names exactly at the cap are admitted, the next one is folded, and the
// stored report equals analyze of the same traces in the same order.
func TestStreamAtTheCap(t *testing.T) {
	c := cfg()
	c.Analysis.Limits = analysis.Limits{APIs: 3, Services: 4}
	var traces [][]graph.Span
	for i, svc := range []string{"a", "b", "c", "a", "d", "e"} {
		op := "GET /x"
		if i == 3 {
			op = "GET /y" // a's second API: the 4th API
		}
		traces = append(traces, []graph.Span{rootSpan(byte(i+1), 1, 0, svc, op, time.Duration(i)*time.Second)})
	}
	ref, _ := analysis.InMemory(graph.Lists(traces), c.Analysis, 1)
	want := docJSON(t, ref)
	bothStores(t, func(t *testing.T, open func() store.Store) {
		st := open()
		defer st.Close()
		p, stop := start(t, st, c)
		defer stop()
		for _, tr := range traces {
			feedOne(t, p, tr...)
		}
		checkAtTheCap(t, st, c.Analysis, want)
	})
}

// checkAtTheCap checks TestStreamAtTheCap's report: by hand, then
// against analyze's document want.
func checkAtTheCap(t *testing.T, st store.Store, acfg analysis.Config, want string) {
	t.Helper()
	// APIs a, b, c x admitted (3); a y is the 4th API; d is the 4th
	// service (admitted) but its API the 5th; e is the 5th service.
	got := reportAPIs(t, st, acfg)
	wantAPIs := map[string]int64{"a GET /x": 1, "b GET /x": 1, "c GET /x": 1, graph.OtherAPI: 3}
	if !maps.Equal(got, wantAPIs) {
		t.Fatalf("APIs %v, want %v", got, wantAPIs)
	}
	doc, err := query.Document(context.Background(), st, store.Query{}, acfg)
	if err != nil {
		t.Fatal(err)
	}
	if g := docJSON(t, doc); g != want {
		t.Fatalf("report differs from analyze:\n got %s\nwant %s", g, want)
	}
	services := map[string]bool{}
	for _, s := range doc.Services {
		services[s.Service] = true
	}
	if !services["d"] || services["e"] || !services[graph.OtherService] {
		t.Fatalf("services %v: want d admitted, e folded", services)
	}
}

// What a window admitted comes back from the store after a restart: an
// API whose only trace a late span moved to another API stays admitted,
// so the window is still full for a new API, and open for the old one.
func TestAdmittedAfterRestart(t *testing.T) {
	bothStores(t, admittedAfterRestart)
}

func admittedAfterRestart(t *testing.T, open func() store.Store) {
	c := cfg()
	c.Analysis.Limits = analysis.Limits{APIs: 2}
	st := open()
	p, stop := start(t, st, c)
	// Trace 1 enters through a load balancer: its root is a's span, whose
	// parent (span 9) is not in the trace yet.
	feedOne(t, p, rootSpan(1, 1, 9, "a", "GET /x", time.Second))
	feedOne(t, p, rootSpan(2, 1, 0, "b", "GET /x", 2*time.Second))
	// The parent arrives: trace 1's root API is now c's, the third API.
	feedOne(t, p, rootSpan(1, 9, 0, "c", "GET /z", 0))
	if got := reportAPIs(t, st, c.Analysis); got["b GET /x"] != 1 || got[graph.OtherAPI] != 1 || len(got) != 2 {
		t.Fatalf("before the restart: %v", got)
	}
	stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = open()
	defer st.Close()
	p, stop = start(t, st, c)
	defer stop()
	feedOne(t, p, rootSpan(3, 1, 0, "d", "GET /x", 3*time.Second)) // a third API: folded
	feedOne(t, p, rootSpan(4, 1, 0, "a", "GET /x", 4*time.Second)) // admitted before: kept
	// A late span re-opens trace 2 in the full window: it keeps its API.
	feedOne(t, p, rootSpan(2, 2, 1, "b2", "GET /y", 2*time.Second+time.Millisecond))
	got := reportAPIs(t, st, c.Analysis)
	want := map[string]int64{"a GET /x": 1, "b GET /x": 1, graph.OtherAPI: 2}
	if !maps.Equal(got, want) {
		t.Fatalf("after the restart: %v, want %v", got, want)
	}
}

// A re-opened trace that leaves its window (a late span starts in the
// window before) does not take its names out of the window it leaves,
// even when that window's state was just read from the store: b, which
// only trace 2 carried, stays admitted there, so d (a third API) is folded
// and b's next trace keeps its own API.
func TestAdmittedWhenATraceLeaves(t *testing.T) {
	bothStores(t, admittedWhenATraceLeaves)
}

func admittedWhenATraceLeaves(t *testing.T, open func() store.Store) {
	c := cfg()
	c.Analysis.Limits = analysis.Limits{APIs: 2}
	st := open()
	p, stop := start(t, st, c)
	feedOne(t, p, rootSpan(1, 1, 0, "a", "GET /x", time.Second))
	feedOne(t, p, rootSpan(2, 1, 0, "b", "GET /x", 2*time.Second))
	stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = open()
	defer st.Close()
	p, stop = start(t, st, c)
	defer stop()
	// Trace 2 gets a fragment (its parent is not in the trace) a second
	// before the window: the trace moves to the window before, its API
	// still b's.
	feedOne(t, p, rootSpan(2, 2, 99, "b2", "GET /y", -time.Second))
	feedOne(t, p, rootSpan(5, 1, 0, "d", "GET /x", 5*time.Second)) // a third API in the window: folded
	feedOne(t, p, rootSpan(6, 1, 0, "b", "GET /x", 6*time.Second)) // admitted before: kept
	got := reportAPIs(t, st, c.Analysis)
	if len(got) != 3 || got["a GET /x"] != 1 || got["b GET /x"] != 2 || got[graph.OtherAPI] != 1 {
		t.Fatalf("APIs %v, want a GET /x 1, b GET /x 2 (one a window earlier), %s 1 (d)", got, graph.OtherAPI)
	}
}

// Traces analysed in one batch share their window's caps: 20 new APIs in
// one request, a cap of 5, and exactly 5 are admitted (which 5 depends on
// the order the batch holds them in), 15 counted under ⟨other APIs⟩ and
// in stormradius_traces_folded_total.
func TestCapWithinOneBatch(t *testing.T) {
	c := cfg()
	c.Analysis.Limits = analysis.Limits{APIs: 5}
	reg := prometheus.NewRegistry()
	c.Registerer = reg
	st := openStore(t, t.TempDir())
	defer st.Close()
	p, stop := start(t, st, c)
	defer stop()
	var spans []graph.Span
	for i := range 20 {
		spans = append(spans, rootSpan(byte(i+1), 1, 0, fmt.Sprintf("svc-%02d", i), "GET /", time.Duration(i)*time.Millisecond))
	}
	feedOne(t, p, spans...)
	got := reportAPIs(t, st, c.Analysis)
	if len(got) != 6 || got[graph.OtherAPI] != 15 {
		t.Fatalf("APIs %v: want 5 of their own and 15 traces under %s", got, graph.OtherAPI)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	folded := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "stormradius_traces_folded_total" {
			for _, m := range mf.GetMetric() {
				folded[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if folded["api"] != 15 || folded["service"] != 0 || len(folded) != 4 {
		t.Fatalf("stormradius_traces_folded_total %v: want api 15, the other kinds 0", folded)
	}
}
