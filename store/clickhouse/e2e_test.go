package clickhouse_test

import (
	"context"
	"encoding/json"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
)

// The service on ClickHouse end to end: a simulated incident exported
// service by service over OTLP gRPC, stored and analysed in a ClickHouse
// database, stopped half way and restarted on the same database (the
// second half re-opens many traces of the first), gives the report
// `analyze` gives for the same traces.
func TestServiceOnClickHouse(t *testing.T) {
	serviceOn(t, chtest.FreshDSN(t))
}

// TestCurrentEngineService is TestServiceOnClickHouse on a current engine
// over HTTP (chtest.Current).
func TestCurrentEngineService(t *testing.T) {
	serviceOn(t, chtest.FreshDatabase(t, chtest.Current(t)))
}

// serviceOn is TestServiceOnClickHouse on the database dsn names.
func serviceOn(t *testing.T, dsn string) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}

	res, err := sim.Run(storetest.Scenario(300, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const window = 10 * time.Minute
	d, _ := storetest.Analyze(res, window)
	wantB, _ := json.Marshal(d)
	want := string(wantB)

	exports := res.Exports(11, 5, 0)
	half := len(exports) / 2
	sent := 0
	for _, part := range [][]ptrace.Traces{exports[:half], exports[half:]} { // a restart half way
		stop := startService(t, u.String(), window, part)
		for _, td := range part {
			sent += td.SpanCount()
		}
		// Stopped as soon as the last request is acknowledged: pending
		// traces are analysed at the stop, a batch under way is finished.
		if err := stop(); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
	got := reportWhenQuiet(t, u.String(), int64(res.Stats.Spans))
	if got != want {
		t.Fatalf("stored report differs from analyze:\n got %s\nwant %s", got, want)
	}
}

// startService runs the service on the store at dsn, sends exports over
// OTLP gRPC and returns its stop.
func startService(t *testing.T, dsn string, window time.Duration, exports []ptrace.Traces) func() error {
	t.Helper()
	ready := make(chan app.Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := app.Config{
		Store:    storeurl.Options{URL: dsn, Window: window},
		Pipeline: pipeline.Config{TraceIdle: 50 * time.Millisecond, MaxTraceAge: 5 * time.Second, Retention: -1, SummaryInterval: 20 * time.Millisecond},
		OTLP:     otlp.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"},
		HTTPAddr: "127.0.0.1:0",
		Ready:    func(a app.Addrs) { ready <- a },
	}
	go func() { done <- app.Run(ctx, cfg) }()
	var addrs app.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("service did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("service did not start in 60 s")
	}
	conn, err := grpc.NewClient(addrs.OTLPGRPC.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	var wg sync.WaitGroup
	errs := make(chan error, len(exports))
	for i, td := range exports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
			errs <- err
		}()
		if i%8 == 7 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return func() error { cancel(); return <-done }
}

// reportWhenQuiet polls the stored report until it covers want spans and
// has not changed for a while.
func reportWhenQuiet(t *testing.T, dsn string, wantSpans int64) string {
	t.Helper()
	ctx := context.Background()
	st, err := storeurl.Open(ctx, storeurl.Options{URL: dsn, Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var last string
	same := 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		d, err := query.Document(ctx, st, store.Query{}, analysis.Config{Window: st.Window()})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(d)
		if d.Spans == wantSpans && string(b) == last {
			if same++; same == 5 {
				return last
			}
		} else {
			same = 0
		}
		last = string(b)
	}
	t.Fatalf("the stored report never settled on %d spans; last:\n%s", wantSpans, last)
	return ""
}
