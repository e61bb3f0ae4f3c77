package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// startCapped runs the service on the embedded store in dir with the
// given caps (zero: the defaults) and a trace idle time of 50 ms.
func startCapped(t *testing.T, dir string, lim analysis.Limits, metricsAPIs int) *service {
	t.Helper()
	return runService(t, app.Config{
		Store: storeurl.Options{Data: dir, Window: time.Hour},
		Pipeline: pipeline.Config{TraceIdle: 50 * time.Millisecond, MaxTraceAge: 5 * time.Second, Retention: -1,
			SummaryInterval: 20 * time.Millisecond, Analysis: analysis.Config{Limits: lim}},
		OTLP:     otlp.Config{DisableGRPC: true, HTTPAddr: "127.0.0.1:0"},
		HTTPAddr: "127.0.0.1:0",
		Web:      &web.Config{MetricsMaxAPIs: metricsAPIs},
	})
}

// attackRequest is one OTLP/HTTP request of n traces, each one root SERVER
// span "GET /x" of its own service (svc-00000, svc-00001, …), padded with
// an attribute to about 525 bytes a span: the user's 10.5 MB request.
func attackRequest(t *testing.T, n int, start time.Time) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	pad := strings.Repeat("x", 400)
	for i := range n {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%05d", i))
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		var id [16]byte
		id[0], id[1], id[2] = 0xa7, byte(i>>8), byte(i)
		sp.SetTraceID(id)
		sp.SetSpanID([8]byte{1, byte(i >> 8), byte(i)})
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET /x")
		at := start.Add(time.Duration(i) * time.Millisecond)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Millisecond)))
		sp.Attributes().PutStr("http.request.method", "GET")
		sp.Attributes().PutStr("http.route", "/x")
		sp.Attributes().PutStr("padding", pad)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// get returns the body of a GET.
func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, b[:min(len(b), 300)])
	}
	return b
}

// series parses the Prometheus text exposition: family → labels → value.
func series(body []byte) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		name, labels := line[:sp], ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name, labels = name[:i], name[i:]
		}
		v, _ := strconv.ParseFloat(line[sp+1:], 64)
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][labels] = v
	}
	return out
}

// heapAfterGC is the live heap, collected.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// vmRSS is the process's resident set (Linux), 0 elsewhere.
func vmRSS() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// waitAnalysedAll waits until the stored report counts n traces and has
// stopped changing (the summaries are stored too).
func waitAnalysedAll(t *testing.T, st store.Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	same := 0
	for time.Now().Before(deadline) {
		rep, err := st.Report(context.Background(), store.Query{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Traces == n {
			if same++; same == 5 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%d traces were never all analysed", n)
}

// The attack the issue measured: one 10.5 MB OTLP/HTTP request of 20,000
// traces, each a root API of a service of its own, into the service with
// its default caps (5,000 root APIs, 10,000 services per window; 1,000
// APIs with /metrics series of their own). Everything is counted, under
// the reserved buckets past the caps; /metrics, /api/v1/apis and
// /api/v1/services stay bounded, and so does the heap.
func TestCardinalityAttack(t *testing.T) {
	if testing.Short() || raceEnabled {
		// It measures the heap and reads 20,000 traces' rollups within
		// the metrics' 10 s: the race detector's slowness defeats both.
		// The paths it takes are raced by the pipeline's and web's tests.
		t.Skip("20,000 traces through the service: not under -short or -race")
	}
	const n = 20_000
	lim := analysis.Limits{}.OrDefaults()
	dir := t.TempDir()
	svc := startCapped(t, dir, analysis.Limits{}, 0)
	defer svc.stop()
	base := "http://" + svc.addrs.HTTP.String()
	start := time.Now()
	body := attackRequest(t, n, start)
	t.Logf("request: %.1f MB", float64(len(body))/1e6)
	get(t, base+"/metrics") // the collector's first read: its own cost, not the attack's
	heap0, rss0 := heapAfterGC(), vmRSS()

	if err := post("http://"+svc.addrs.OTLPHTTP.String()+otlp.TracesPath, "application/x-protobuf", "", body); err != nil {
		t.Fatal(err)
	}
	body = nil
	waitAnalysedAll(t, svc.addrs.Store, n)
	// The metrics are read from the rollups at most every 10 s: scrape
	// until a read after the attack shows it.
	var metrics []byte
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(2 * time.Second) {
		metrics = get(t, base+"/metrics")
		if m := series(metrics); len(m["stormradius_max_radius"]) > 0 && m["stormradius_rollups_up"][""] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed the attack's APIs:\n%s", metrics)
		}
	}
	rng := "?from=" + start.Add(-time.Minute).Format(time.RFC3339) + "&to=" + time.Now().Add(time.Minute).Format(time.RFC3339)
	apisBody := get(t, base+"/api/v1/apis"+rng)
	servicesBody := get(t, base+"/api/v1/services"+rng)
	heap1, rss1 := heapAfterGC(), vmRSS()
	t.Logf("/metrics %d bytes, /api/v1/apis %d bytes, /api/v1/services %d bytes", len(metrics), len(apisBody), len(servicesBody))
	t.Logf("heap after GC %.1f → %.1f MB; RSS %.1f → %.1f MB", float64(heap0)/1e6, float64(heap1)/1e6, float64(rss0)/1e6, float64(rss1)/1e6)

	m := series(metrics)
	other := `{api="` + graph.OtherAPI + `"}`
	for _, f := range []string{"stormradius_max_radius", "stormradius_mean_radius", "stormradius_suppressed_retries_total",
		"stormradius_spurious_requests_prevented_total", "stormradius_misattributed_errors_total"} {
		if got, want := len(m[f]), web.DefaultMetricsMaxAPIs+1; got != want {
			t.Errorf("%s: %d series, want %d + 1", f, got, web.DefaultMetricsMaxAPIs)
		}
		if _, ok := m[f][other]; !ok {
			t.Errorf("%s: no %s series", f, other)
		}
	}
	for labels, want := range map[string]float64{
		`{kind="api"}`:       n - float64(lim.APIs),     // 15,000
		`{kind="service"}`:   n - float64(lim.Services), // 10,000
		`{kind="operation"}`: 0,
		`{kind="version"}`:   0,
	} {
		if got := m["stormradius_traces_folded_total"][labels]; got != want {
			t.Errorf("stormradius_traces_folded_total%s = %v, want %v", labels, got, want)
		}
	}
	// The APIs admitted, less those with series of their own.
	if got, want := m["stormradius_metrics_apis_folded"][""], float64(lim.APIs-web.DefaultMetricsMaxAPIs); got != want {
		t.Errorf("stormradius_metrics_apis_folded = %v, want %v", got, want)
	}
	if got := m["stormradius_spans_stored_total"][""]; got != n {
		t.Errorf("stormradius_spans_stored_total = %v, want %d", got, n)
	}

	var apis struct {
		APIs []struct {
			API    string `json:"api"`
			Traces int64  `json:"traces"`
		} `json:"apis"`
	}
	if err := json.Unmarshal(apisBody, &apis); err != nil {
		t.Fatal(err)
	}
	byAPI := map[string]int64{}
	for _, a := range apis.APIs {
		byAPI[a.API] = a.Traces
	}
	if len(apis.APIs) != lim.APIs+1 || byAPI[graph.OtherAPI] != n-int64(lim.APIs) {
		t.Errorf("/api/v1/apis: %d APIs, %d traces under %s; want %d + 1, %d", len(apis.APIs), byAPI[graph.OtherAPI],
			graph.OtherAPI, lim.APIs, n-lim.APIs)
	}
	var services struct {
		Services []struct {
			Service  string `json:"service"`
			Requests int64  `json:"requests"`
		} `json:"services"`
	}
	if err := json.Unmarshal(servicesBody, &services); err != nil {
		t.Fatal(err)
	}
	bySvc := map[string]int64{}
	for _, s := range services.Services {
		bySvc[s.Service] = s.Requests
	}
	if len(services.Services) != lim.Services+1 || bySvc[graph.OtherService] != n-int64(lim.Services) {
		t.Errorf("/api/v1/services: %d services, %d requests of %s; want %d + 1, %d", len(services.Services),
			bySvc[graph.OtherService], graph.OtherService, lim.Services, n-lim.Services)
	}
	// Bounded: a window's state holds 5,000 APIs and 10,000 services,
	// whatever the request brought. (Measured here: about 20 MB with the
	// caps, over 60 MB without them.)
	if grown := int64(heap1) - int64(heap0); grown > maxAttackHeap {
		t.Errorf("the heap grew by %.1f MB, want at most %.1f MB", float64(grown)/1e6, float64(maxAttackHeap)/1e6)
	}
}

// maxAttackHeap bounds the heap the attack leaves behind.
const maxAttackHeap = 40 << 20

// A 10 KiB service name is cut at the edge to the documented 256 bytes —
// its first 245 bytes, "…" and the FNV-1a 32-bit hash of the whole name
// in hexadecimal — and that is the name the report, the REST API and the
// /metrics labels show; the span is counted as cut.
func TestLongNameEndToEnd(t *testing.T) {
	long := strings.Repeat("a", 10<<10)
	h := fnv.New32a()
	h.Write([]byte(long))
	cut := long[:245] + "…" + fmt.Sprintf("%08x", h.Sum32())
	if len(cut) != 256 {
		t.Fatalf("the expected name is %d bytes", len(cut))
	}
	wantAPI := cut + " GET /x"

	dir := t.TempDir()
	svc := startCapped(t, dir, analysis.Limits{}, 0)
	defer svc.stop()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", long)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID([16]byte{0xb1})
	sp.SetSpanID([8]byte{1})
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetName("GET /x")
	now := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
	sp.Attributes().PutStr("http.request.method", "GET")
	sp.Attributes().PutStr("http.route", "/x")
	sp.Status().SetCode(ptrace.StatusCodeError)
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := post("http://"+svc.addrs.OTLPHTTP.String()+otlp.TracesPath, "application/json", "", b); err != nil {
		t.Fatal(err)
	}
	waitAnalysedAll(t, svc.addrs.Store, 1)

	doc, err := query.Document(context.Background(), svc.addrs.Store, store.Query{}, analysis.Config{Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.APIs) != 1 || doc.APIs[0].API != wantAPI || len(doc.Services) != 1 || doc.Services[0].Service != cut {
		t.Fatalf("report: APIs %+v, services %+v", doc.APIs, doc.Services)
	}
	base := "http://" + svc.addrs.HTTP.String()
	var apis struct {
		APIs []struct {
			API string `json:"api"`
		} `json:"apis"`
	}
	if err := json.Unmarshal(get(t, base+"/api/v1/apis"), &apis); err != nil {
		t.Fatal(err)
	}
	if len(apis.APIs) != 1 || apis.APIs[0].API != wantAPI {
		t.Fatalf("/api/v1/apis: %+v", apis.APIs)
	}
	m := series(get(t, base+"/metrics"))
	if v, ok := m["stormradius_max_radius"][`{api="`+wantAPI+`"}`]; !ok || len(m["stormradius_max_radius"]) != 1 {
		t.Errorf("stormradius_max_radius: %v (%v)", m["stormradius_max_radius"], v)
	}
	if m["stormradius_spans_name_truncated_total"][""] != 1 {
		t.Errorf("stormradius_spans_name_truncated_total = %v, want 1", m["stormradius_spans_name_truncated_total"][""])
	}
}
