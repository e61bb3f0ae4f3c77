package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/ingest/chsource/oteltable"
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

// serve --source end to end: the service follows the exporter's table
// into a partition of its own (its OTLP receivers off); the incident's
// rows arrive in two phases, a third of the spans near the first phase's
// clock only in the second (late, within --source-lag), and the service
// is stopped and started again between them. Once quiet, the stored
// report equals analyze of every span; /metrics shows the position.
func TestServeSource(t *testing.T) {
	u := chtest.Current(t)
	dsn := chtest.FreshDatabase(t, u)
	fresh, _ := url.Parse(dsn)
	db := strings.TrimPrefix(fresh.Path, "/")
	d := *u
	d.Path = "/default"
	o, err := ch.ParseDSN(d.String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if err := oteltable.Create(ctx, conn, db, "otel_traces", oteltable.V0165); err != nil {
		t.Fatal(err)
	}
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	sc := sim.Mesh(sim.MeshConfig{Seed: 4, APIs: 2, Depth: 5, Fanout: 2, GRPC: 0.4, FailOpen: 0.3, ErrorRate: 0.02, Policy: own})
	sc.Faults = []sim.Fault{{Service: "svc-2-1", Rate: 0.4, Persistent: true}}
	sc.Traces, sc.Start, sc.Spacing = 300, time.Date(2026, 3, 1, 9, 50, 0, 0, time.UTC), 2*time.Second // 9:50 to 10:00
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	tds := res.Exports(2, 16, 8)
	want, _ := storetest.AnalyzeBatches(tds, 10*time.Minute)

	mid, lag := time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2*time.Minute
	var later []ptrace.Traces
	for _, td := range tds {
		now, rest := ptrace.NewTraces(), ptrace.NewTraces()
		td.CopyTo(now)
		td.CopyTo(rest)
		early := func(s ptrace.Span) bool {
			st := s.StartTimestamp().AsTime()
			if st.Before(mid.Add(30*time.Second-lag)) || !st.Before(mid) {
				return st.Before(mid)
			}
			return s.SpanID()[7]%3 != 0 // a third of those the first phase does not read yet arrive late
		}
		for _, rs := range now.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				ss.Spans().RemoveIf(func(s ptrace.Span) bool { return !early(s) })
			}
		}
		for _, rs := range rest.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				ss.Spans().RemoveIf(early)
			}
		}
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, now); err != nil {
			t.Fatal(err)
		}
		later = append(later, rest)
	}

	dir := t.TempDir()
	var clock atomic.Int64
	run := func(until time.Time) {
		t.Helper()
		svc := runService(t, app.Config{
			Store:    storeurl.Options{Data: dir, Window: 10 * time.Minute},
			Pipeline: pipeline.Config{TraceIdle: 50 * time.Millisecond, MaxTraceAge: time.Minute, Retention: -1, SummaryInterval: 20 * time.Millisecond},
			OTLP:     otlp.Config{DisableGRPC: true, DisableHTTP: true},
			HTTPAddr: "127.0.0.1:0",
			Source: app.SourceConfig{DSN: dsn, Follow: chsource.FollowConfig{Lag: lag, Poll: 20 * time.Millisecond,
				Start: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), Now: func() time.Time { return time.Unix(0, clock.Load()) }}},
		})
		re := regexp.MustCompile(`(?m)^stormradius_source_position_seconds\{table="` + db + `\.otel_traces"\} (\S+)$`)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := http.Get("http://" + svc.addrs.HTTP.String() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := re.FindSubmatch(b); m != nil {
				if v, _ := strconv.ParseFloat(string(m[1]), 64); v >= float64(until.Unix()) {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the source's position never reached %s:\n%s", until, grep(string(b), "source"))
			}
		}
		if err := svc.stop(); err != nil { // analyses what it holds
			t.Fatal(err)
		}
	}
	clock.Store(mid.Add(30 * time.Second).UnixNano())
	run(mid.Add(30*time.Second - lag))
	for _, td := range later {
		if err := oteltable.Insert(ctx, conn, db, "otel_traces", oteltable.V0165, td); err != nil {
			t.Fatal(err)
		}
	}
	clock.Store(time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC).UnixNano())
	run(time.Date(2026, 3, 1, 10, 28, 0, 0, time.UTC))

	st, err := storeurl.Open(ctx, storeurl.Options{Data: dir, Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := query.Document(ctx, st, store.Query{}, analysis.Config{Window: st.Window()})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("serve --source's report differs from analyze:\n got %s\nwant %s", g, w)
	}
}
