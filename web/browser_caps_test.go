package web_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
)

// loadCapped feeds spans to st through a pipeline with the given caps,
// trace by trace, each analysed before the next comes (so that names are
// admitted in the order of spans), and returns once all are.
func loadCapped(t *testing.T, st store.Store, spans []graph.Span, lim analysis.Limits) {
	t.Helper()
	p := pipeline.New(st, pipeline.Config{Analysis: analysis.Config{Window: fixture.Window, Limits: lim},
		TraceIdle: 20 * time.Millisecond, MaxTraceAge: time.Second, Tick: 5 * time.Millisecond,
		SummaryInterval: 20 * time.Millisecond, Retention: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-p.Started()
	var err error
	for _, tr := range graph.GroupTraces(spans) {
		err = errors.Join(err, p.Consume(context.Background(), tr), p.Flush(context.Background()))
	}
	cancel()
	if err = errors.Join(err, <-done); err != nil {
		t.Fatal(err)
	}
}

// The overflow buckets in the UI: a fleet where two root APIs have their
// own rows and the rest — among them one of a hostile service whose
// 300-byte name was cut — share ⟨other APIs⟩, whose page says what it is
// and draws the merged call graph (several roots, ⟨other services⟩ among
// them); every name is text, nothing runs.
func TestBrowserOverflow(t *testing.T) {
	b := newUIBrowser(t)
	hostile := uiHostile + strings.Repeat("y", 300)
	td := ptrace.NewTraces()
	add := func(n byte, service, route string, call string) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		at := fixture.Start.Add(time.Duration(n) * time.Second)
		sp := spans.AppendEmpty()
		sp.SetTraceID([16]byte{0xe0, n})
		sp.SetSpanID([8]byte{n, 1})
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET " + route)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(10 * time.Millisecond)))
		if call != "" {
			cl := spans.AppendEmpty()
			cl.SetTraceID([16]byte{0xe0, n})
			cl.SetSpanID([8]byte{n, 2})
			cl.SetParentSpanID([8]byte{n, 1})
			cl.SetKind(ptrace.SpanKindClient)
			cl.SetName("SELECT")
			cl.Attributes().PutStr("peer.service", call)
			cl.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Millisecond)))
			cl.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(2 * time.Millisecond)))
			cl.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	add(1, "front", "/a", "")
	add(2, "front", "/b", "")
	add(3, hostile, "/c", "db") // the third API: folded; its service the 2nd, db the 3rd
	add(4, "fourth", "/d", "")  // the 4th service: folded, and its API
	spans := ingest.NewDecoder(ingest.DecoderConfig{}).AppendTraces(nil, td)
	cut := spans[2].Service
	if len(cut) != graph.MaxNameLen || !strings.HasPrefix(cut, uiHostile) {
		t.Fatalf("the hostile name was not cut: %q", cut)
	}
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	loadCapped(t, st, spans, analysis.Limits{APIs: 2, Services: 3})
	srv := serve(t, st, uiConfig())

	var apis struct{ APIs []analysis.APIDoc }
	uiGetJSON(t, srv, "/api/v1/apis?"+uiRange(), &apis)
	var names []string
	for _, a := range apis.APIs {
		names = append(names, a.API)
	}
	slices.Sort(names)
	if want := []string{"front GET /a", "front GET /b", graph.OtherAPI}; !slices.Equal(names, want) {
		t.Fatalf("/api/v1/apis: %q, want %q", names, want)
	}

	b.open(srv.URL, "/", nil)
	b.waitPage("fleet")
	var shown []string
	for _, r := range uiTableRows(b, "#apis") {
		shown = append(shown, r.Data["api"])
	}
	slices.Sort(shown)
	if !slices.Equal(shown, names) {
		t.Errorf("the fleet shows %q, want %q", shown, names)
	}
	if title := uiEval[string](b, `document.querySelector('#apis a[data-api-link="`+graph.OtherAPI+`"]').title`); !strings.Contains(title, "--max-apis") {
		t.Errorf("the overflow row's link says %q", title)
	}
	b.safe("fleet with an overflow bucket")

	b.open(srv.URL, "/api", url.Values{"name": {graph.OtherAPI}})
	b.waitPage("api")
	if h := uiEval[string](b, `document.getElementById('api-name').textContent`); h != graph.OtherAPI {
		t.Errorf("heading %q", h)
	}
	if n := uiEval[string](b, `(document.getElementById('api-overflow')||{}).textContent || ''`); !strings.Contains(n, "counted together") {
		t.Errorf("no word on what the bucket is: %q", n)
	}
	cards := uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('api-cards'))`)
	uiShows(t, "overflow traces", cards["traces"], 2, "")
	nodes := uiEval[[]string](b, `[...document.querySelectorAll('.dag svg g.node')].map((n) => n.dataset.node)`)
	slices.Sort(nodes)
	want := []string{cut + " GET /c", "db SELECT", graph.OtherService + " " + graph.OtherOperation}
	slices.Sort(want)
	if !slices.Equal(nodes, want) {
		t.Errorf("the merged call graph draws %q, want %q", nodes, want)
	}
	b.safe("the overflow API's page")

	b.open(srv.URL, "/services", nil)
	b.waitPage("services")
	var svcs []string
	for _, r := range uiTableRows(b, "#services") {
		svcs = append(svcs, r.Data["service"])
	}
	slices.Sort(svcs)
	wantSvcs := []string{cut, "db", "front", graph.OtherService}
	slices.Sort(wantSvcs)
	if !slices.Equal(svcs, wantSvcs) {
		t.Errorf("services %q, want %q", svcs, wantSvcs)
	}
	b.safe("services with an overflow bucket")
}
