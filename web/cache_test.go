package web_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// response is what a client receives: status, headers, body (decoded
// from gzip when sent so).
type response struct {
	status int
	header http.Header
	body   []byte
}

// fetch GETs path with the given headers; gzip is asked for and decoded
// by hand, so that the Content-Encoding sent is seen.
func fetch(t *testing.T, srv *httptest.Server, path string, hdr ...string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// post returns the status and body of POST path with body.
func post(t *testing.T, srv *httptest.Server, path, body string) (int, []byte) {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// extraRecord is a record of a new root API starting at start: a write
// every figure of a range holding start sees.
func extraRecord(st store.Store, api string, start time.Time, id uint64) *store.Record {
	r := &analysis.TraceResult{API: api, Start: start.UnixNano(), Spans: 3, Radius: 2,
		Events:   []analysis.Event{{Owner: graph.Node{Service: "db-new", Operation: "query"}, Radius: 2}},
		Services: []analysis.ServiceResult{{Service: "new", Requests: 1}, {Service: "db-new", Requests: 2, OwnedFailures: 1}},
		Nodes:    []analysis.NodeCount{{Node: graph.Node{Service: "db-new", Operation: "query"}, Requests: 2, Owned: 1}},
		Hops:     3, Counterfactual: 3, RootFailed: true,
	}
	binary.BigEndian.PutUint64(r.TraceID[8:], id)
	r.TraceID[0] = 0xee
	r.Window = analysis.WindowOf(r.Start, st.Window())
	var asm graph.Assembler
	facts := asm.Assemble([]graph.Span{{TraceID: r.TraceID, SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: "new", Operation: "GET /new"}}).AppendBinary(nil)
	return &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: api, Seq: 1, Result: r, Facts: facts}
}

// TestCacheSameAnswers: with the cache, every endpoint answers exactly
// what it answers without (status and bytes), on both stores: asked
// twice (the second from the cache), at another instant of the same
// minute (the cached answer of the same minutes, with this request's own
// from and to), a minute later, and after a write (the new answer, never
// the one cached before it).
func TestCacheSameAnswers(t *testing.T) {
	stores(t, func(t *testing.T, st store.Store) {
		var now atomic.Int64
		now.Store(fixture.End.UnixNano())
		clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
		cached := serve(t, st, web.Config{Now: clock})
		direct := serve(t, st, web.Config{Now: clock, CacheBytes: -1})
		var list struct {
			Incidents []analysis.IncidentDoc `json:"incidents"`
		}
		getJSON(t, direct, "/api/v1/incidents?from=now-1h", 200, &list)
		if len(list.Incidents) == 0 {
			t.Fatal("the rollout has no incident")
		}
		api := fixture.API
		traces, doc := rollout()
		example := doc.Incidents[0].ExampleTraces[0]
		paths := []string{
			"/api/v1/apis", "/api/v1/apis?from=now-1h", "/api/v1/apis?from=now-35m&to=now-5m", "/api/v1/fleet?from=now-168h",
			"/api/v1/services?from=now-1h", "/api/v1/services?from=now-2h&to=now-1h",
			"/api/v1/radius" + q("api", api, "from", "now-1h"), "/api/v1/radius" + q("api", api, "from", "now-1h", "step", "5m"),
			"/api/v1/radius" + q("api", "nobody GET /x"), "/api/v1/radius" + q("api", api, "step", "1s"),
			"/api/v1/radius" + q("api", api, "from", "now-100d", "step", "1m"),
			"/api/v1/graph" + q("api", api, "from", "now-1h"), "/api/v1/graph" + q("api", "nobody GET /x"), "/api/v1/graph",
			"/api/v1/incidents?from=now-1h", "/api/v1/incidents?from=now-1h&limit=1", "/api/v1/incidents" + q("from", "now-1h", "api", api),
			"/api/v1/incidents?limit=-3", "/api/v1/incidents/" + list.Incidents[0].ID, "/api/v1/incidents/29000000-abcdefabcdef",
			"/api/v1/gate" + q("api", api, "from", "now-1h", "max_radius", "1"),
			"/api/v1/gate" + q("api", api, "from", "now-1h", "max_radius", "99"),
			"/api/v1/gate" + q("api", api, "from", "now-1h", "max_radius", "1", "always_200", "true"),
			"/api/v1/gate" + q("api", api), "/api/v1/apis?from=yesterday",
			"/api/v1/traces/" + example, "/api/v1/traces/0123456789abcdef0123456789abcdef",
		}
		compare := func(when string) map[string][]byte {
			t.Helper()
			bodies := map[string][]byte{}
			for _, p := range paths {
				want := fetch(t, direct, p)
				for i := 0; i < 2; i++ {
					got := fetch(t, cached, p)
					if got.status != want.status || !bytes.Equal(got.body, want.body) {
						t.Fatalf("%s, GET %s (asked %d times): cached %d %s\nwant %d %s", when, p, i+1, got.status, got.body, want.status, want.body)
					}
				}
				bodies[p] = want.body
			}
			// What-ifs (POST): the same answer for the same question.
			for _, wi := range []string{
				`{"api":"` + api + `","fail":["driver"],"policy":"budget"}`, `{"api":"` + api + `","fail":["driver"],"policy":"naive"}`,
				`{"chain":["A","B","C"],"fail":["C"]}`, `{"api":"` + api + `","fail":[]}`, `{"nope":1}`, `not json`,
			} {
				p := "/api/v1/whatif?from=now-1h"
				wc, wb := post(t, direct, p, wi)
				for i := 0; i < 2; i++ {
					if gc, gb := post(t, cached, p, wi); gc != wc || !bytes.Equal(gb, wb) {
						t.Fatalf("%s, POST %s %s (asked %d times): cached %d %s\nwant %d %s", when, p, wi, i+1, gc, gb, wc, wb)
					}
				}
				bodies["whatif "+wi] = wb
			}
			return bodies
		}
		before := compare("at the end of the rollout")
		now.Add(int64(20 * time.Second))
		compare("20 s later, the same minute")
		now.Add(int64(time.Minute))
		compare("a minute later")
		// A write of a root API no answer held before.
		x := context.Background()
		rec := extraRecord(st, "new GET /new", fixture.End.Add(-10*time.Minute), 1)
		if err := st.Apply(x, store.Batch{Changes: []store.Change{{New: rec}}}); err != nil {
			t.Fatal(err)
		}
		after := compare("after a write")
		for _, p := range []string{"/api/v1/apis?from=now-1h", "/api/v1/fleet?from=now-168h", "/api/v1/services?from=now-1h"} {
			if bytes.Equal(before[p], after[p]) {
				t.Errorf("GET %s: the same answer before and after a write it covers", p)
			}
		}
		if !bytes.Contains(after["/api/v1/apis?from=now-1h"], []byte("new GET /new")) {
			t.Errorf("/apis after the write does not list the new API: %s", after["/api/v1/apis?from=now-1h"])
		}
		// A late span of a trace: its view changes, though the write
		// position does not move.
		tp := "/api/v1/traces/" + example
		var late []graph.Span
		for _, tr := range traces {
			if tr[0].TraceID.String() == example {
				late = []graph.Span{{TraceID: tr[0].TraceID, SpanID: graph.SpanID{0xab, 0xcd}, ParentID: tr[0].SpanID, Kind: graph.KindClient,
					Service: tr[0].Service, Name: "late", Start: tr[0].Start + 1e6, End: tr[0].Start + 2e6}}
			}
		}
		if late == nil {
			t.Fatal("the incident's example trace is not among the rollout's")
		}
		if _, err := st.WriteSpans(x, late); err != nil {
			t.Fatal(err)
		}
		if afterSpans := compare("after a span write"); bytes.Equal(after[tp], afterSpans[tp]) {
			t.Errorf("GET %s: the same answer before and after a span of the trace was written", tp)
		}
	})
}

// TestCacheETag: a 200 carries a strong ETag and asks clients to
// revalidate; the ETag sent back gets a 304 without a body until a write
// changes the answer; a gzip client gets the same bytes compressed.
func TestCacheETag(t *testing.T) {
	traces, _ := rollout()
	storesWith(t, traces, func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{})
		for _, p := range []string{"/api/v1/fleet?from=now-1h", "/api/v1/radius" + q("api", fixture.API, "from", "now-1h")} {
			first := fetch(t, srv, p)
			etag := first.header.Get("ETag")
			if first.status != 200 || len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
				t.Fatalf("GET %s: %d, ETag %q: want 200 and a strong ETag", p, first.status, etag)
			}
			if cc := first.header.Get("Cache-Control"); cc != "private, no-cache" {
				t.Errorf("GET %s: Cache-Control %q", p, cc)
			}
			if first.header.Get("Content-Encoding") != "gzip" {
				t.Errorf("GET %s: Content-Encoding %q, want gzip", p, first.header.Get("Content-Encoding"))
			}
			plain := fetch(t, srv, p, "Accept-Encoding", "identity")
			if plain.header.Get("Content-Encoding") != "" || !bytes.Equal(plain.body, first.body) || plain.header.Get("ETag") != etag {
				t.Errorf("GET %s without gzip: %q, ETag %q: want the same body and ETag", p, plain.header.Get("Content-Encoding"), plain.header.Get("ETag"))
			}
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				r := fetch(t, srv, p, "If-None-Match", inm)
				if r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != etag {
					t.Errorf("GET %s, If-None-Match %s: %d, %d bytes, ETag %q: want 304, none, %s", p, inm, r.status, len(r.body), r.header.Get("ETag"), etag)
				}
			}
			if r := fetch(t, srv, p, "If-None-Match", `"other"`); r.status != 200 || !bytes.Equal(r.body, first.body) {
				t.Errorf("GET %s, another ETag: %d: want 200 and the body", p, r.status)
			}
		}
		// A write the answers cover: the old ETag gets the new answer.
		p := "/api/v1/fleet?from=now-1h"
		old := fetch(t, srv, p)
		rec := extraRecord(st, fixture.API, fixture.End.Add(-time.Minute), 2)
		if err := st.Apply(context.Background(), store.Batch{Changes: []store.Change{{New: rec}}}); err != nil {
			t.Fatal(err)
		}
		r := fetch(t, srv, p, "If-None-Match", old.header.Get("ETag"))
		if r.status != 200 || r.header.Get("ETag") == old.header.Get("ETag") || bytes.Equal(r.body, old.body) {
			t.Fatalf("after a write, If-None-Match the old ETag: %d, ETag %q (old %q): want 200, a new answer and ETag", r.status, r.header.Get("ETag"), old.header.Get("ETag"))
		}
		var before, after struct {
			Traces int64 `json:"traces"`
		}
		json.Unmarshal(old.body, &before)
		json.Unmarshal(r.body, &after)
		if after.Traces != before.Traces+1 {
			t.Errorf("after one more trace: %d traces, before %d", after.Traces, before.Traces)
		}
		// A gate that fails (412) has no representation to revalidate.
		g := fetch(t, srv, "/api/v1/gate"+q("api", fixture.API, "from", "now-1h", "max_radius", "0"))
		if g.status != http.StatusPreconditionFailed || g.header.Get("ETag") != "" {
			t.Errorf("failing gate: %d, ETag %q: want 412 without one", g.status, g.header.Get("ETag"))
		}
	})
}

// gatedStore holds every Report until release is closed, counting the
// Reports and Positions asked.
type gatedStore struct {
	store.Store
	reports, positions atomic.Int64
	release            chan struct{}
}

func (g *gatedStore) Report(ctx context.Context, q store.Query) (*analysis.Report, error) {
	g.reports.Add(1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Store.Report(ctx, q)
}

func (g *gatedStore) Position(ctx context.Context) (uint64, error) {
	g.positions.Add(1)
	return g.Store.Position(ctx)
}

// TestCacheComputesOnce: concurrent requests for an answer not held
// compute it once, and /fleet, /apis and /services asked together read
// the figures of their range once.
func TestCacheComputesOnce(t *testing.T) {
	traces, _ := rollout()
	storesWith(t, traces, func(t *testing.T, st store.Store) {
		for _, c := range []struct {
			name  string
			paths []string
		}{
			{"same", []string{"/api/v1/fleet?from=now-2h"}},
			{"document", []string{"/api/v1/fleet?from=now-3h", "/api/v1/apis?from=now-3h", "/api/v1/services?from=now-3h"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				g := &gatedStore{Store: st, release: make(chan struct{})}
				srv := httptest.NewServer(web.Handler(query.New(g), web.Config{Now: func() time.Time { return fixture.End }}))
				defer srv.Close()
				const n = 8
				var wg sync.WaitGroup
				bodies := make([][]byte, n*len(c.paths))
				for i := range bodies {
					wg.Add(1)
					go func() {
						defer wg.Done()
						code, b := get(t, srv, c.paths[i%len(c.paths)], "")
						if code != 200 {
							t.Errorf("%d %s", code, b)
						}
						bodies[i] = b
					}()
				}
				// Every request has asked the position (the paths' own
				// computations once more each) before the reads go on.
				want := int64(len(bodies) + len(c.paths))
				for deadline := time.Now().Add(10 * time.Second); g.positions.Load() < want; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d positions asked, want %d", g.positions.Load(), want)
					}
				}
				time.Sleep(50 * time.Millisecond)
				close(g.release)
				wg.Wait()
				if r := g.reports.Load(); r != 1 {
					t.Errorf("%d requests read the rollups %d times, want once", len(bodies), r)
				}
				for i := range bodies {
					if !bytes.Equal(bodies[i], bodies[i%len(c.paths)]) {
						t.Fatalf("request %d answered differently", i)
					}
				}
			})
		}
	})
}

// TestCacheAuth: the token is checked before the cache: a request without
// it gets 401 and nothing of a cached answer, not even a 304.
func TestCacheAuth(t *testing.T) {
	traces, _ := rollout()
	storesWith(t, traces[:200], func(t *testing.T, st store.Store) {
		srv := serve(t, st, web.Config{Tokens: []string{"s3cret"}})
		p := "/api/v1/fleet?from=now-1h"
		ok := fetch(t, srv, p, "Authorization", "Bearer s3cret")
		etag := ok.header.Get("ETag")
		if ok.status != 200 || etag == "" {
			t.Fatalf("with the token: %d, ETag %q", ok.status, etag)
		}
		for _, hdr := range [][]string{nil, {"If-None-Match", etag}, {"Authorization", "Bearer wrong", "If-None-Match", etag}} {
			r := fetch(t, srv, p, hdr...)
			if r.status != http.StatusUnauthorized || r.header.Get("ETag") != "" || bytes.Contains(r.body, []byte("fleet")) {
				t.Errorf("headers %q: %d, ETag %q, %s: want 401 and nothing of the answer", hdr, r.status, r.header.Get("ETag"), r.body)
			}
		}
		if r := fetch(t, srv, p, "Authorization", "Bearer s3cret", "If-None-Match", etag); r.status != http.StatusNotModified {
			t.Errorf("with the token and the ETag: %d, want 304", r.status)
		}
	})
}
