package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
	"github.com/stormradius/stormradius/web"
)

// Analyze is `stormradius analyze` of the simulated traces: the reference.
func analyze(t *testing.T, res *sim.Result, window time.Duration) string {
	t.Helper()
	d, _ := storetest.Analyze(res, window)
	b, _ := json.Marshal(d)
	return string(b)
}

type service struct {
	addrs app.Addrs
	stop  func() error
}

func startService(t *testing.T, dir string, window time.Duration) *service {
	t.Helper()
	return startServiceTB(t, dir, window, 50*time.Millisecond)
}

func startServiceTB(t testing.TB, dir string, window, idle time.Duration) *service {
	t.Helper()
	return startServiceStore(t, storeurl.Options{Data: dir, Window: window}, idle)
}

func startServiceStore(t testing.TB, opts storeurl.Options, idle time.Duration) *service {
	t.Helper()
	return runService(t, app.Config{
		Store:    opts,
		Pipeline: pipeline.Config{TraceIdle: idle, MaxTraceAge: 5 * time.Second, Retention: -1, SummaryInterval: 20 * time.Millisecond},
		OTLP:     otlp.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"},
		HTTPAddr: "127.0.0.1:0",
		Web:      &web.Config{Tokens: []string{apiToken}},
	})
}

// runService runs the service cfg describes until the test stops it, and
// returns once it is ready.
func runService(t testing.TB, cfg app.Config) *service {
	t.Helper()
	ready := make(chan app.Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg.Ready = func(a app.Addrs) { ready <- a }
	go func() { done <- app.Run(ctx, cfg) }()
	select {
	case a := <-ready:
		return &service{addrs: a, stop: func() error { cancel(); return <-done }}
	case err := <-done:
		cancel()
		t.Fatalf("service did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("service did not start in 20 s")
	}
	return nil
}

// reportWhenQuiet polls the stored report until it covers want spans and
// has not changed for over a second (trace-idle, then the summaries).
func reportWhenQuiet(t *testing.T, dir string, wantSpans int64) string {
	t.Helper()
	ctx := context.Background()
	var last string
	same := 0
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := storeurl.Open(ctx, storeurl.Options{Data: dir, Existing: true})
		if err != nil {
			t.Fatal(err)
		}
		d, err := query.Document(ctx, st, store.Query{}, analysis.Config{Window: st.Window()})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(d)
		if d.Spans == wantSpans && string(b) == last {
			if same++; same == 8 {
				return last
			}
		} else {
			same = 0
		}
		last = string(b)
		time.Sleep(150 * time.Millisecond)
	}
	t.Fatalf("the stored report never settled on %d spans; last:\n%s", wantSpans, last)
	return ""
}

// The service end to end: a simulated incident exported service by
// service, shuffled, sampled by the collector's probabilistic sampler at
// 50 % (ot=th on every kept span: sampled traffic, docs/SPEC.md §4.9), over
// OTLP gRPC (gzip), OTLP HTTP protobuf (gzip) and OTLP HTTP JSON at once,
// gives the stored report that `analyze` gives for the same spans;
// /healthz, /readyz and /metrics answer; the metrics count every span
// stored.
func TestServiceEndToEnd(t *testing.T) {
	res, err := sim.Run(storetest.Scenario(800, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 3*time.Second/2))
	if err != nil {
		t.Fatal(err)
	}
	const window = 10 * time.Minute
	exports, st, err := sim.Sample(res.Exports(11, 5, 0), sim.Probabilistic{Percentage: 50})
	if err != nil {
		t.Fatal(err)
	}
	wantDoc0, _ := storetest.AnalyzeBatches(exports, window)
	if !wantDoc0.Sampling.Estimated || wantDoc0.Sampling.TracesReceived != int64(st.Kept) {
		t.Fatalf("analyze of the sample: %+v, want estimates from the %d traces kept", wantDoc0.Sampling, st.Kept)
	}
	b0, _ := json.Marshal(wantDoc0)
	want := string(b0)
	dir := t.TempDir()
	svc := startService(t, dir, window)

	conn, err := grpc.NewClient(svc.addrs.OTLPGRPC.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	httpURL := "http://" + svc.addrs.OTLPHTTP.String() + otlp.TracesPath

	var wg sync.WaitGroup
	errs := make(chan error, len(exports))
	for i, td := range exports {
		wg.Add(1)
		go func(i int, td ptrace.Traces) {
			defer wg.Done()
			req := ptraceotlp.NewExportRequestFromTraces(td)
			switch i % 3 {
			case 0:
				_, err := client.Export(context.Background(), req, grpc.UseCompressor(grpcgzip.Name))
				errs <- err
			case 1:
				b, _ := req.MarshalProto()
				var z bytes.Buffer
				zw := gzip.NewWriter(&z)
				zw.Write(b)
				zw.Close()
				errs <- post(httpURL, "application/x-protobuf", "gzip", z.Bytes())
			case 2:
				b, _ := req.MarshalJSON()
				errs <- post(httpURL, "application/json", "", b)
			}
		}(i, td)
		if i%16 == 15 {
			wg.Wait() // at most 16 requests at once
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := reportWhenQuiet(t, dir, wantDoc0.Spans)
	if got != want {
		t.Fatalf("stored report differs from analyze:\n got %s\nwant %s", got, want)
	}

	base := "http://" + svc.addrs.HTTP.String()
	// The REST API needs the token; what it answers is the stored report.
	apis := base + "/api/v1/apis?from=2026-03-01T09:00:00Z&to=2026-03-01T11:00:00Z"
	if resp, err := http.Get(apis); err != nil || resp.StatusCode != 401 {
		t.Errorf("the API without a token: %v %v", resp.StatusCode, err)
	}
	req, _ := http.NewRequest("GET", apis, nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var gotAPIs, wantDoc struct{ APIs []any }
	json.NewDecoder(resp.Body).Decode(&gotAPIs)
	resp.Body.Close()
	json.Unmarshal([]byte(want), &wantDoc)
	if g, w := fmt.Sprint(gotAPIs.APIs), fmt.Sprint(wantDoc.APIs); g != w || len(gotAPIs.APIs) == 0 {
		t.Errorf("GET /api/v1/apis: %s\nwant %s", g, w)
	}
	// Health, readiness and metrics stay open.
	for path, wantBody := range map[string]string{"/healthz": "ok", "/readyz": "ready",
		"/metrics": fmt.Sprintf("stormradius_spans_stored_total %d", st.KeptSpans)} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), wantBody) {
			t.Errorf("%s: %d, want 200 with %q", path, resp.StatusCode, wantBody)
		}
	}
	if err := svc.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

const apiToken = "s3cret"

func post(url, ctype, encoding string, body []byte) error {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return nil
}
