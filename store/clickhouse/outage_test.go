package clickhouse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/clickhouse"
	"github.com/stormradius/stormradius/store/storetest"
)

// ClickHouse goes away mid-stream: the receivers answer 503 with
// Retry-After (nothing is acknowledged that is not stored), and when it is
// back ingestion resumes by itself — the client retries what was refused,
// as a collector does — and the report equals analyze of every trace.
func TestOutage(t *testing.T) {
	outage(t, clickhouse.FreshDatabase(t))
}

// TestCurrentEngineOutage is TestOutage on a current engine over HTTP
// (chtest.Current).
func TestCurrentEngineOutage(t *testing.T) {
	db, err := url.Parse(chtest.FreshDatabase(t, chtest.Current(t)))
	if err != nil {
		t.Fatal(err)
	}
	outage(t, db)
}

// outage is TestOutage on the database db names.
func outage(t *testing.T, db *url.URL) {
	proxy := clickhouse.NewTestProxy(t, db.Host)
	dsn := *db
	dsn.Host = proxy.Addr()
	q := dsn.Query()
	q.Set("dial_timeout", "500ms")
	q.Set("read_timeout", "3s")
	dsn.RawQuery = q.Encode()

	res, err := sim.Run(storetest.Scenario(240, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const window = 10 * time.Minute
	ref, refW := storetest.Analyze(res, window)
	wantB, _ := json.Marshal(ref)

	ready := make(chan app.Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cs := &checkStore{}
	defer func() {
		if t.Failed() {
			for _, l := range cs.log {
				t.Log(l)
			}
		}
	}()
	go func() {
		done <- app.Run(ctx, app.Config{
			OpenStore: func(ctx context.Context) (store.Store, error) {
				st, err := storeurl.Open(ctx, storeurl.Options{URL: dsn.String(), Window: window})
				cs.Store = st
				return cs, err
			},
			Pipeline: pipeline.Config{TraceIdle: 50 * time.Millisecond, MaxTraceAge: 5 * time.Second, Retention: -1, SummaryInterval: 20 * time.Millisecond},
			OTLP:     otlp.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"},
			Ready:    func(a app.Addrs) { ready <- a },
		})
	}()
	var addrs app.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("service did not start: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	url := "http://" + addrs.OTLPHTTP.String() + otlp.TracesPath
	send := func(body []byte) (int, string) {
		resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	var bodies [][]byte
	for _, td := range res.Exports(3, 4, 0) {
		b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		bodies = append(bodies, b)
	}
	third := len(bodies) / 3
	for _, b := range bodies[:third] {
		if code, _ := send(b); code != 200 {
			t.Fatalf("before the outage: %d", code)
		}
	}
	proxy.Cut()
	var refused [][]byte
	for _, b := range bodies[third : 2*third] {
		code, retry := send(b)
		switch code {
		case 200: // stored before the cut was noticed? Never: the write fails.
			t.Fatalf("a request was acknowledged while ClickHouse was away")
		case 503:
			if retry == "" {
				t.Fatalf("503 without Retry-After")
			}
			refused = append(refused, b)
		default:
			t.Fatalf("during the outage: %d, want 503", code)
		}
	}
	proxy.Resume()
	// The client retries what was refused, then sends the rest.
	for _, b := range append(refused, bodies[2*third:]...) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, _ := send(b)
			if code == 200 {
				break
			}
			if code != 503 || time.Now().After(deadline) {
				t.Fatalf("after the outage: %d", code)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	got := reportWhenQuiet(t, db.String(), int64(res.Stats.Spans))
	if got != string(wantB) {
		st, _ := storeurl.Open(context.Background(), storeurl.Options{URL: db.String(), Existing: true})
		for _, w := range refW.Indexes() {
			sum := analysis.NewState()
			n := 0
			st.WindowRecords(context.Background(), w, nil, func(r *store.Record) error {
				tr, _ := graph.DecodeTrace(r.Facts)
				sum.Add(tr, 1)
				n++
				return nil
			})
			a, _ := json.Marshal(sum)
			b, _ := json.Marshal(refW.State(w))
			stored, exact, _ := st.State(context.Background(), w)
			c, _ := json.Marshal(stored)
			t.Logf("window %d: %d records, records sum == ref: %v, stored state == ref: %v (exact %v)", w, n, string(a) == string(b), string(c) == string(b), exact)
		}
		st.Close()
	}
	if got != string(wantB) {
		t.Fatalf("report after the outage differs from analyze:\n got %s\nwant %s", got, wantB)
	}
}
