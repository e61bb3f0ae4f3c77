package web_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/storetest"
	"github.com/stormradius/stormradius/web"
)

// TestLoad is the bounded load test of the endpoints the UI calls, on
// each store (the embedded one; ClickHouse too when the test server
// answers, chtest) holding 7 days of rollups for 100 root APIs:
// STORMRADIUS_LOAD_CLIENTS (default 16) concurrent clients on loopback for
// STORMRADIUS_LOAD (e.g. 10s) per run, then p50/p99 per endpoint and the
// throughput of each run (docs/PERFORMANCE.md records the figures). The
// runs, one after the other on the same store:
//
//   - reference: without the answer cache (web.Config.CacheBytes < 0), as
//     every request was served before it;
//   - quiet: plain requests (no If-None-Match), nothing written;
//   - quiet, revalidating: each client sends the ETag it last received
//     for the path (a browser's or Grafana's revalidation);
//   - writing and writing, revalidating: the same while a writer stores
//     the spans of 4 traces and applies their records in the open minute
//     every 200 ms and puts the open window's summary every second, as the
//     pipeline does (loadWriter): the write position moves six times a
//     second and answers are computed again.
//
// It only reports; the target (p99 < 50 ms, ≥ 1,000 requests/s) is read
// from its output, not asserted.
func TestLoad(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("STORMRADIUS_LOAD"))
	if err != nil || d <= 0 {
		t.Skip("set STORMRADIUS_LOAD=10s to run the load test of the read endpoints")
	}
	clients := 16
	if n, err := strconv.Atoi(os.Getenv("STORMRADIUS_LOAD_CLIENTS")); err == nil && n > 0 {
		clients = n
	}
	end := time.Date(2026, 3, 8, 12, 30, 0, 0, time.UTC)
	t.Run("sqlite", func(t *testing.T) {
		// STORMRADIUS_LOAD_DIR keeps the filled store for the next run.
		dir := os.Getenv("STORMRADIUS_LOAD_DIR")
		fill := true
		if dir == "" {
			dir = t.TempDir()
		} else if _, err := os.Stat(dir + "/results.db"); err == nil {
			fill = false
		}
		st, err := storeurl.Open(context.Background(), storeurl.Options{Data: dir, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		loadStore(t, st, fill, end, d, clients)
	})
	t.Run("clickhouse", func(t *testing.T) {
		// STORMRADIUS_LOAD_CLICKHOUSE_DB names a database kept for the
		// next run (filled when it holds nothing).
		u := chtest.Server(t)
		dsn, fill := "", true
		if name := os.Getenv("STORMRADIUS_LOAD_CLICKHOUSE_DB"); name != "" {
			d := *u
			d.Path = "/" + name
			dsn = d.String()
		} else {
			dsn = chtest.FreshDatabase(t, u)
		}
		st, err := storeurl.Open(context.Background(), storeurl.Options{URL: dsn, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if os.Getenv("STORMRADIUS_LOAD_CLICKHOUSE_DB") != "" {
			rep, err := st.Report(context.Background(), store.Query{})
			if err != nil {
				t.Fatal(err)
			}
			fill = len(rep.APIs) == 0
		}
		loadStore(t, st, fill, end, d, clients)
	})
}

// loadRequest is one request a client makes.
type loadRequest struct {
	name, method, path, body string
}

// loadStore runs TestLoad's runs on one store.
func loadStore(t *testing.T, st store.Store, fill bool, end time.Time, d time.Duration, clients int) {
	if fill {
		t0 := time.Now()
		storetest.FillWeek(t, st, 100, end)
		t.Logf("7 days × 100 APIs × 1 trace a minute stored in %v", time.Since(t0).Round(time.Millisecond))
	}
	// One trace with its spans, for the trace page.
	tid := graph.TraceID{0xfe, 1}
	t0 := end.Add(-2 * time.Minute).UnixNano()
	spans := []graph.Span{
		{TraceID: tid, SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: "svc-042", Operation: "GET /api", Start: t0, End: t0 + 9e6, Failed: true},
		{TraceID: tid, SpanID: graph.SpanID{2}, ParentID: graph.SpanID{1}, Kind: graph.KindClient, Service: "svc-042", Name: "query", Start: t0 + 1e6, End: t0 + 3e6, Failed: true},
		{TraceID: tid, SpanID: graph.SpanID{3}, ParentID: graph.SpanID{2}, Kind: graph.KindServer, Service: "db-svc-042", Operation: "query", Start: t0 + 1e6, End: t0 + 3e6, Failed: true},
	}
	if _, err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}

	api := "svc-042 GET /api"
	ui := func(kv ...string) string { return q(append([]string{"from", "now-1h", "to", "now"}, kv...)...) }
	reqs := []loadRequest{
		// The overview page, on the UI's default range (the last hour).
		{"fleet 1h", "GET", "/api/v1/fleet" + ui(), ""},
		{"apis 1h", "GET", "/api/v1/apis" + ui(), ""},
		{"incidents 1h limit 5", "GET", "/api/v1/incidents" + ui("limit", "5"), ""},
		// The API page.
		{"radius 1h", "GET", "/api/v1/radius" + ui("api", api), ""},
		{"graph 1h", "GET", "/api/v1/graph" + ui("api", api), ""},
		{"incidents 1h api", "GET", "/api/v1/incidents" + ui("api", api), ""},
		// The services page.
		{"services 1h", "GET", "/api/v1/services" + ui(), ""},
		// The longer presets.
		{"apis 24h", "GET", "/api/v1/apis" + q("from", "now-24h", "to", "now"), ""},
		{"fleet 7d", "GET", "/api/v1/fleet" + q("from", "now-168h", "to", "now"), ""},
		{"radius 7d", "GET", "/api/v1/radius" + q("api", api, "from", "now-168h", "to", "now"), ""},
		// The trace page, the what-if page (not cached), the rollout gate.
		{"trace", "GET", "/api/v1/traces/" + tid.String(), ""},
		{"whatif 1h", "POST", "/api/v1/whatif" + ui(), `{"api":"` + api + `","fail":["db-svc-042"],"policy":"budget"}`},
		{"gate 1h", "GET", "/api/v1/gate" + q("api", api, "max_radius", "3"), ""},
	}
	type run struct {
		name       string
		cache      bool
		revalidate bool
		write      bool
	}
	runs := []run{
		{"reference: no cache, quiet", false, false, false},
		{"quiet", true, false, false},
		{"quiet, revalidating", true, true, false},
		{"writing", true, false, true},
		{"writing, revalidating", true, true, true},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%d clients, %v a run, on loopback\n", clients, d)
	var nextID atomic.Uint64
	nextID.Store(uint64(time.Now().UnixNano())) // new trace ids, whatever a kept store holds
	for _, r := range runs {
		// STORMRADIUS_LOAD_RUNS=writing runs only the runs named so.
		if only := os.Getenv("STORMRADIUS_LOAD_RUNS"); only != "" && !strings.Contains(r.name, only) {
			continue
		}
		cfg := web.Config{Now: func() time.Time { return end }}
		if !r.cache {
			cfg.CacheBytes = -1
		}
		srv := httptest.NewServer(web.Handler(query.New(st), cfg))
		stopWriter := func() (int, int) { return 0, 0 }
		if r.write {
			stopWriter = loadWriter(t, st, end, &nextID)
		}
		lat, notModified, unavailable, status := loadRun(t, srv, reqs, clients, d, r.revalidate)
		applies, sums := stopWriter()
		srv.Close()
		fmt.Fprintf(&out, "\n%s", r.name)
		if r.write {
			fmt.Fprintf(&out, " (%d applies, %d summary puts)", applies, sums)
		}
		fmt.Fprintf(&out, "\n%-22s %8s %6s %6s %9s %9s %9s\n", "endpoint", "requests", "304s", "503s", "p50", "p99", "max")
		var all []time.Duration
		nm, un := 0, 0
		for k, l := range lat {
			all = append(all, l...)
			out.WriteString(loadRow(reqs[k].name, l, notModified[k], unavailable[k]))
			nm, un = nm+notModified[k], un+unavailable[k]
		}
		out.WriteString(loadRow("all", all, nm, un))
		fmt.Fprintf(&out, "throughput %.0f requests/s\n", float64(len(all))/d.Seconds())
		if status != "" {
			t.Error(status)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&out, "load average after: %s", load)
	t.Log("\n" + out.String())
}

// loadRun runs clients for d and returns each request's latencies, how
// many were answered 304, and the first unexpected status.
func loadRun(t *testing.T, srv *httptest.Server, reqs []loadRequest, clients int, d time.Duration, revalidate bool) (lat [][]time.Duration, notModified, unavailable []int, bad string) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	lat = make([][]time.Duration, len(reqs))
	notModified = make([]int, len(reqs))
	unavailable = make([]int, len(reqs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var badOnce atomic.Value
	stop := time.Now().Add(d)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			mine := make([][]time.Duration, len(reqs))
			mineNM := make([]int, len(reqs))
			mineUnavail := make([]int, len(reqs))
			etags := make([]string, len(reqs))
			for i := c; time.Now().Before(stop); i++ {
				k := i % len(reqs)
				rq := reqs[k]
				var body io.Reader
				if rq.body != "" {
					body = bytes.NewReader([]byte(rq.body))
				}
				req, _ := http.NewRequest(rq.method, srv.URL+rq.path, body)
				if revalidate && etags[k] != "" {
					req.Header.Set("If-None-Match", etags[k])
				}
				t1 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					badOnce.CompareAndSwap(nil, err.Error())
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				el := time.Since(t1)
				switch resp.StatusCode {
				case http.StatusOK:
					etags[k] = resp.Header.Get("ETag")
				case http.StatusNotModified:
					mineNM[k]++
				case http.StatusServiceUnavailable:
					// The store did not answer within the request timeout:
					// counted (an overloaded store) with its latency, not a
					// failure.
					mineUnavail[k]++
				default:
					badOnce.CompareAndSwap(nil, fmt.Sprintf("%s %s: %d", rq.method, rq.path, resp.StatusCode))
					return
				}
				mine[k] = append(mine[k], el)
			}
			mu.Lock()
			for k := range mine {
				lat[k] = append(lat[k], mine[k]...)
				notModified[k] += mineNM[k]
				unavailable[k] += mineUnavail[k]
			}
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	bad, _ = badOnce.Load().(string)
	return lat, notModified, unavailable, bad
}

// loadWriter writes the spans of 4 traces and applies their records in
// the open minute (the minute before end: 1,200 traces a minute, twelve
// times the filled rate) every 200 ms, as the pipeline does, and puts the
// open window's summary every second, until the returned function is
// called; that deletes the records it wrote and returns how many applies
// and summary puts it made.
func loadWriter(t *testing.T, st store.Store, end time.Time, nextID *atomic.Uint64) func() (int, int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var applies, sums int
	var werr error
	var written []store.Change // to delete at the end: each run starts from the filled store
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		facts := (&graph.Assembler{}).Assemble([]graph.Span{{TraceID: graph.TraceID{1}, SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: "a", Operation: "op"}}).AppendBinary(nil)
		win := analysis.WindowOf(end.UnixNano()-1, st.Window())
		sum, err := st.Summaries(ctx, win, win)
		if err != nil || len(sum) != 1 {
			werr = fmt.Errorf("the open window's summary: %v (%d)", err, len(sum))
			return
		}
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var batch []store.Change
			var spans []graph.Span
			for j := 0; j < 4; j++ {
				id := nextID.Add(1)
				a := int(id % 100)
				svc := fmt.Sprintf("svc-%03d", a)
				r := &analysis.TraceResult{API: svc + " GET /api", Start: end.Add(-time.Minute).UnixNano() + int64(id%60)*int64(time.Second),
					Spans: 30, Radius: 1 + a%3, Hops: 12, Counterfactual: 15, Suppressed: 1, RootFailed: a%2 == 0,
					Events:   []analysis.Event{{Owner: graph.Node{Service: "db-" + svc, Operation: "query"}, Radius: 1 + a%3}},
					Services: []analysis.ServiceResult{{Service: svc, Requests: 4}, {Service: "db-" + svc, Requests: 8, OwnedFailures: 2}},
					Nodes:    []analysis.NodeCount{{Node: graph.Node{Service: "db-" + svc, Operation: "query"}, Requests: 8, Owned: 1}},
				}
				r.TraceID[0] = 0xfd
				binary.BigEndian.PutUint64(r.TraceID[8:], id)
				r.Window = analysis.WindowOf(r.Start, st.Window())
				rec := &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: r.API, Seq: 1, Result: r, Facts: facts}
				spans = append(spans,
					graph.Span{TraceID: r.TraceID, SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: svc, Operation: "GET /api", Start: r.Start, End: r.Start + 9e6, Failed: r.RootFailed},
					graph.Span{TraceID: r.TraceID, SpanID: graph.SpanID{2}, ParentID: graph.SpanID{1}, Kind: graph.KindClient, Service: svc, Name: "query", Start: r.Start + 1e6, End: r.Start + 3e6})
				batch = append(batch, store.Change{New: rec})
				written = append(written, store.Change{Old: rec})
			}
			if _, err := st.WriteSpans(ctx, spans); err != nil {
				if ctx.Err() == nil {
					werr = err
				}
				return
			}
			if err := st.Apply(ctx, store.Batch{Changes: batch}); err != nil {
				if ctx.Err() == nil {
					werr = err
				}
				return
			}
			applies++
			if i%5 == 4 {
				if err := st.PutSummaries(ctx, sum); err != nil {
					if ctx.Err() == nil {
						werr = err
					}
					return
				}
				sums++
			}
		}
	}()
	return func() (int, int) {
		cancel()
		<-done
		if werr != nil {
			t.Errorf("writer: %v", werr)
		}
		if err := st.Apply(context.Background(), store.Batch{Changes: written}); err != nil {
			t.Errorf("writer: deleting its records: %v", err)
		}
		return applies, sums
	}
}

func loadRow(name string, l []time.Duration, notModified, unavailable int) string {
	if len(l) == 0 {
		return fmt.Sprintf("%-22s %8d %6d %6d\n", name, 0, notModified, unavailable)
	}
	slices.Sort(l)
	p := func(f float64) time.Duration {
		return l[min(len(l)-1, int(f*float64(len(l))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("%-22s %8d %6d %6d %9v %9v %9v\n", name, len(l), notModified, unavailable, p(0.5), p(0.99), l[len(l)-1].Round(10*time.Microsecond))
}
