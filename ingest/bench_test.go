package ingest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// benchTraces builds a realistic synthetic request: nTraces HotROD-like
// traces (15 spans each: HTTP, gRPC, redis and mysql calls, some retried
// with resend numbers and claim headers), grouped by service as an SDK or a
// collector batch would send them. Spans carry 8–15 attributes.
func benchTraces(nTraces int) ptrace.Traces {
	rng := rand.New(rand.NewPCG(1, 2))
	td := ptrace.NewTraces()
	type svc struct {
		name  string
		spans ptrace.SpanSlice
	}
	services := map[string]*svc{}
	for _, n := range []string{"frontend", "customer", "driver", "route", "redis-proxy"} {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", n)
		ra.PutStr("service.version", "1.8."+fmt.Sprint(len(n)%4))
		ra.PutStr("service.instance.id", fmt.Sprintf("%s-7d9f8c-%d", n, len(n)))
		ra.PutStr("host.name", "node-"+n)
		ra.PutStr("telemetry.sdk.name", "opentelemetry")
		ra.PutStr("telemetry.sdk.language", "go")
		ra.PutStr("telemetry.sdk.version", "1.38.0")
		ra.PutInt("process.pid", int64(1000+len(n)))
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
		services[n] = &svc{name: n, spans: ss.Spans()}
	}
	var spanSeq uint64
	newSpan := func(s string, tid pcommon.TraceID, parent pcommon.SpanID, kind ptrace.SpanKind, name string, start, dur int64) ptrace.Span {
		spanSeq++
		sp := services[s].spans.AppendEmpty()
		sp.SetTraceID(tid)
		var sid pcommon.SpanID
		for i := range 8 {
			sid[i] = byte(spanSeq >> (8 * i))
		}
		sid[7] |= 0x80
		sp.SetSpanID(sid)
		sp.SetParentSpanID(parent)
		sp.SetKind(kind)
		sp.SetName(name)
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(start + dur))
		return sp
	}
	httpServer := func(sp ptrace.Span, method, route, path string, status int64, claim string) {
		a := sp.Attributes()
		a.PutStr("http.request.method", method)
		a.PutStr("http.route", route)
		a.PutStr("url.path", path)
		a.PutStr("url.scheme", "http")
		a.PutStr("server.address", "0.0.0.0")
		a.PutInt("server.port", 8080)
		a.PutStr("network.protocol.version", "1.1")
		a.PutStr("user_agent.original", "Go-http-client/1.1")
		a.PutStr("client.address", "10.0.3.17")
		a.PutInt("http.response.status_code", status)
		if claim != "" {
			a.PutEmptySlice("http.response.header.x-error-claim").AppendEmpty().SetStr(claim)
		}
		if status >= 500 {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	httpClient := func(sp ptrace.Span, method, peer, url string, status int64, resend int64, claim string) {
		a := sp.Attributes()
		a.PutStr("http.request.method", method)
		a.PutStr("url.full", url)
		a.PutStr("server.address", peer)
		a.PutInt("server.port", 8081)
		a.PutStr("network.protocol.version", "1.1")
		a.PutStr("network.peer.address", "10.0.4.2")
		a.PutInt("network.peer.port", 8081)
		a.PutInt("http.response.status_code", status)
		if resend > 0 {
			a.PutInt("http.request.resend_count", resend)
			a.PutBool("retry.criteria_satisfied", true)
		}
		if claim != "" {
			a.PutEmptySlice("http.response.header.x-error-claim").AppendEmpty().SetStr(claim)
		}
		if status >= 500 {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	grpcAttrs := func(sp ptrace.Span, code int64, client bool) {
		a := sp.Attributes()
		a.PutStr("rpc.system", "grpc")
		a.PutStr("rpc.service", "driver.DriverService")
		a.PutStr("rpc.method", "FindNearest")
		a.PutInt("rpc.grpc.status_code", code)
		a.PutStr("network.transport", "tcp")
		a.PutStr("network.type", "ipv4")
		a.PutStr("network.peer.address", "10.0.5.9")
		a.PutInt("network.peer.port", 8082)
		if client {
			a.PutStr("server.address", "driver")
			a.PutInt("server.port", 8082)
		}
		if code != 0 {
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage("driver unavailable")
		}
	}
	dbAttrs := func(sp ptrace.Span, system, query string, attempt int64) {
		a := sp.Attributes()
		a.PutStr("db.system", system)
		a.PutStr("db.statement", query)
		a.PutStr("db.operation.name", "SELECT")
		a.PutStr("db.namespace", "prod")
		a.PutStr("server.address", system+".svc")
		a.PutInt("server.port", 6379)
		a.PutStr("network.peer.address", "10.0.6.1")
		a.PutStr("network.transport", "tcp")
		if attempt > 0 {
			a.PutInt("retry.attempt", attempt)
		}
	}

	t0 := int64(1_760_000_000_000_000_000)
	for i := range nTraces {
		var tid pcommon.TraceID
		for j := range 16 {
			tid[j] = byte(rng.Uint32())
		}
		start := t0 + int64(i)*int64(7_000_000)
		fail := rng.IntN(10) == 0
		claim := ""
		status := int64(200)
		if fail {
			claim, status = "claimed", 503
		}
		root := newSpan("frontend", tid, pcommon.SpanID{}, ptrace.SpanKindServer, "GET /dispatch", start, 900_000_000)
		httpServer(root, "GET", "/dispatch", "/dispatch", status, claim)

		c := newSpan("frontend", tid, root.SpanID(), ptrace.SpanKindClient, "GET", start+1_000, 200_000_000)
		httpClient(c, "GET", "customer", fmt.Sprintf("http://customer:8081/customer?customer=%d", 100+i%4), 200, 0, "")
		cs := newSpan("customer", tid, c.SpanID(), ptrace.SpanKindServer, "GET /customer", start+2_000, 190_000_000)
		httpServer(cs, "GET", "/customer", "/customer", 200, "")
		db := newSpan("customer", tid, cs.SpanID(), ptrace.SpanKindClient, "SQL SELECT", start+3_000, 180_000_000)
		dbAttrs(db, "mysql", "SELECT * FROM customer WHERE customer_id=?", 0)

		code := int64(0)
		if fail {
			code = 14
		}
		g := newSpan("frontend", tid, root.SpanID(), ptrace.SpanKindClient, "driver.DriverService/FindNearest", start+200_000_000, 300_000_000)
		grpcAttrs(g, code, true)
		gs := newSpan("driver", tid, g.SpanID(), ptrace.SpanKindServer, "driver.DriverService/FindNearest", start+200_001_000, 290_000_000)
		grpcAttrs(gs, code, false)
		if fail {
			gs.Attributes().PutStr("rpc.response.metadata.x-error-claim", "claimed")
		}
		for k := range 3 {
			r := newSpan("driver", tid, gs.SpanID(), ptrace.SpanKindClient, "FindDriverIDs", start+200_002_000+int64(k)*10_000_000, 9_000_000)
			dbAttrs(r, "redis", "GETDRIVER T7"+fmt.Sprint(k), int64(k))
		}
		for k := range 3 {
			rc := newSpan("frontend", tid, root.SpanID(), ptrace.SpanKindClient, "GET", start+500_000_000+int64(k)*1_000, 50_000_000)
			httpClient(rc, "GET", "route", fmt.Sprintf("http://route:8083/route?dropoff=%d&pickup=%d", k, i%7), 200, int64(k%2), "")
			rs := newSpan("route", tid, rc.SpanID(), ptrace.SpanKindServer, "GET /route", start+500_001_000+int64(k)*1_000, 49_000_000)
			httpServer(rs, "GET", "/route", "/route", 200, "")
		}
	}
	return td
}

var (
	benchOnce  sync.Once
	benchTD    ptrace.Traces
	benchProto []byte
	benchJSON  []byte
	benchSpans int
)

// benchCorpus is ~5,000 spans (333 traces × 15 spans) as pdata, OTLP
// protobuf and OTLP JSON.
func benchCorpus(b *testing.B) (ptrace.Traces, []byte, []byte, int) {
	benchOnce.Do(func() {
		benchTD = benchTraces(333)
		benchSpans = benchTD.SpanCount()
		var err error
		if benchProto, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTD); err != nil {
			panic(err)
		}
		if benchJSON, err = (&ptrace.JSONMarshaler{}).MarshalTraces(benchTD); err != nil {
			panic(err)
		}
	})
	return benchTD, benchProto, benchJSON, benchSpans
}

var (
	sampledOnce  sync.Once
	sampledTD    ptrace.Traces
	sampledProto []byte
	sampledJSON  []byte
)

// sampledCorpus is benchCorpus's spans with the tracestate an SDK's
// probability sampler writes on every span, ot=th:e666 (1 in 10 at four
// digits of precision).
func sampledCorpus(b *testing.B) (ptrace.Traces, []byte, []byte, int) {
	sampledOnce.Do(func() {
		sampledTD = withTraceState(benchTraces(333), "ot=th:e666")
		var err error
		if sampledProto, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(sampledTD); err != nil {
			panic(err)
		}
		if sampledJSON, err = (&ptrace.JSONMarshaler{}).MarshalTraces(sampledTD); err != nil {
			panic(err)
		}
	})
	return sampledTD, sampledProto, sampledJSON, sampledTD.SpanCount()
}

// withTraceState sets the tracestate of every span of td to ts.
func withTraceState(td ptrace.Traces, ts string) ptrace.Traces {
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				spans.At(k).TraceState().FromRaw(ts)
			}
		}
	}
	return td
}

func reportSpans(b *testing.B, spans int) {
	b.ReportMetric(float64(spans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}

func BenchmarkPdataUnmarshalProto(b *testing.B) {
	_, pb, _, spans := benchCorpus(b)
	b.SetBytes(int64(len(pb)))
	b.ReportAllocs()
	u := &ptrace.ProtoUnmarshaler{}
	for b.Loop() {
		if _, err := u.UnmarshalTraces(pb); err != nil {
			b.Fatal(err)
		}
	}
	reportSpans(b, spans)
}

func BenchmarkPdataUnmarshalJSON(b *testing.B) {
	_, _, js, spans := benchCorpus(b)
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	u := &ptrace.JSONUnmarshaler{}
	for b.Loop() {
		if _, err := u.UnmarshalTraces(js); err != nil {
			b.Fatal(err)
		}
	}
	reportSpans(b, spans)
}

// BenchmarkDecodeProto is what AppendRequest does with protobuf: the wire
// decoder, bytes to spans in one pass.
func BenchmarkDecodeProto(b *testing.B) {
	_, pb, _, spans := benchCorpus(b)
	b.SetBytes(int64(len(pb)))
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	dst := make([]graph.Span, 0, spans)
	var err error
	for b.Loop() {
		if dst, err = d.AppendRequest(dst[:0], pb, false); err != nil || len(dst) != spans {
			b.Fatal(err, len(dst))
		}
	}
	reportSpans(b, spans)
}

// simCorpus is the 149 requests (12,195 spans) of three simulated meshes
// (see simRequests), and their span count.
func simCorpus(b *testing.B) ([][]byte, []string, int) {
	sims, hdrs := simRequests(b)
	n := 0
	for i, r := range sims {
		got, err := NewDecoder(DecoderConfig{ClaimHeader: hdrs[i]}).AppendRequest(nil, r, false)
		if err != nil {
			b.Fatal(err)
		}
		n += len(got)
	}
	return sims, hdrs, n
}

// BenchmarkPdataUnmarshalProtoSim is BenchmarkPdataUnmarshalProto on the
// simulated meshes' requests (lighter spans: about 5 attributes each).
func BenchmarkPdataUnmarshalProtoSim(b *testing.B) {
	sims, _, spans := simCorpus(b)
	benchPdataRequests(b, &ptrace.ProtoUnmarshaler{}, sims, spans)
}

// pdataUnmarshaler is what pdata's protobuf and JSON unmarshalers share.
type pdataUnmarshaler interface {
	UnmarshalTraces([]byte) (ptrace.Traces, error)
}

// benchPdataRequests unmarshals every request with u in each iteration.
func benchPdataRequests(b *testing.B, u pdataUnmarshaler, reqs [][]byte, spans int) {
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range reqs {
			if _, err := u.UnmarshalTraces(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportSpans(b, spans)
}

// BenchmarkDecodeProtoSim is BenchmarkDecodeProto on the same requests.
func BenchmarkDecodeProtoSim(b *testing.B) {
	sims, _, spans := simCorpus(b)
	benchDecodeRequests(b, sims, spans, false)
}

// benchDecodeRequests decodes every request (JSON or protobuf) in each
// iteration, checking the spans.
func benchDecodeRequests(b *testing.B, reqs [][]byte, spans int, json bool) {
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	var dst []graph.Span
	for b.Loop() {
		n := 0
		for _, r := range reqs {
			var err error
			if dst, err = d.AppendRequest(dst[:0], r, json); err != nil {
				b.Fatal(err)
			}
			n += len(dst)
		}
		if n != spans {
			b.Fatal(n, spans)
		}
	}
	reportSpans(b, spans)
}

// BenchmarkDecodeProtoPdata is the protobuf path before the wire decoder:
// pdata's unmarshal, then AppendTraces.
func BenchmarkDecodeProtoPdata(b *testing.B) {
	_, pb, _, spans := benchCorpus(b)
	benchPathBefore(b, pb, spans, appendRequestPdata)
}

// benchPathBefore runs a path of decoding before the decoders (through
// pdata) over data of spans spans.
func benchPathBefore(b *testing.B, data []byte, spans int, path func(*Decoder, []graph.Span, []byte) ([]graph.Span, error)) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	dst := make([]graph.Span, 0, spans)
	var err error
	for b.Loop() {
		if dst, err = path(d, dst[:0], data); err != nil || len(dst) != spans {
			b.Fatal(err, len(dst))
		}
	}
	reportSpans(b, spans)
}

// BenchmarkProtoRatio alternates, within each iteration, pdata's protobuf
// unmarshal (ptrace.ProtoUnmarshaler, the reference) and the wire decoder
// (AppendRequest) on the same requests — the 4,995-span mix, and the 149
// requests of simulated meshes (sim.Mesh, pdata-marshalled as a collector
// sends them) — and reports both speeds and the median of the
// per-iteration ratios of pdata's time over the decoder's: on a shared
// machine, measuring both side by side and taking a median keeps load
// changes out of the ratio. pdata's phase ends with a garbage collection,
// timed with it: its garbage is collected on its own time, not during the
// decoder's phase (which allocates nothing).
func BenchmarkProtoRatio(b *testing.B) {
	_, pb, _, spans := benchCorpus(b)
	sims, _, simSpans := simCorpus(b)
	benchRatio(b, &ptrace.ProtoUnmarshaler{}, false, "wire-spans/s", ratioCorpus{"mix", [][]byte{pb}, spans},
		ratioCorpus{"sim", sims, simSpans})
}

// ratioCorpus is a named set of requests, and their spans.
type ratioCorpus struct {
	name  string
	reqs  [][]byte
	spans int
}

// benchRatio is the ratio benchmarks' body: per corpus, within each
// iteration, pdata's unmarshal u (the reference, ended by a garbage
// collection) then the decoder (JSON or protobuf) on the same requests;
// it reports the median of the per-iteration ratios of pdata's time over
// the decoder's ("speedup"), the decoder's speed (as ours) and pdata's.
func benchRatio(b *testing.B, u pdataUnmarshaler, json bool, ours string, corpora ...ratioCorpus) {
	for _, c := range corpora {
		b.Run(c.name, func(b *testing.B) {
			d := NewDecoder(DecoderConfig{})
			var dst []graph.Span
			var tPdata, tOurs time.Duration
			ratios := make([]float64, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				for _, r := range c.reqs {
					if _, err := u.UnmarshalTraces(r); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				t1 := time.Now()
				n := 0
				for _, r := range c.reqs {
					var err error
					if dst, err = d.AppendRequest(dst[:0], r, json); err != nil {
						b.Fatal(err)
					}
					n += len(dst)
				}
				if n != c.spans {
					b.Fatalf("%d spans, want %d", n, c.spans)
				}
				dp, do := t1.Sub(t0), time.Since(t1)
				tPdata += dp
				tOurs += do
				ratios = append(ratios, float64(dp)/float64(do))
			}
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "speedup")
			b.ReportMetric(float64(b.N)*float64(c.spans)/tOurs.Seconds(), ours)
			b.ReportMetric(float64(b.N)*float64(c.spans)/tPdata.Seconds(), "pdata-spans/s")
		})
	}
}

func BenchmarkDecodeJSON(b *testing.B) {
	_, _, js, spans := benchCorpus(b)
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	dst := make([]graph.Span, 0, spans)
	var err error
	for b.Loop() {
		if dst, err = d.AppendRequest(dst[:0], js, true); err != nil || len(dst) != spans {
			b.Fatal(err, len(dst))
		}
	}
	reportSpans(b, spans)
}

func BenchmarkAppendTraces(b *testing.B) { benchAppendTraces(b, benchCorpus) }

// benchAppendTraces is pdata's path over the corpus corpus gives.
func benchAppendTraces(b *testing.B, corpus func(*testing.B) (ptrace.Traces, []byte, []byte, int)) {
	td, pb, _, spans := corpus(b)
	b.SetBytes(int64(len(pb)))
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	dst := make([]graph.Span, 0, spans)
	for b.Loop() {
		dst = d.AppendTraces(dst[:0], td)
	}
	if len(dst) != spans {
		b.Fatal(len(dst))
	}
	reportSpans(b, spans)
}

func TestBenchCorpusShape(t *testing.T) {
	td := benchTraces(333)
	if n := td.SpanCount(); n < 4900 || n > 5100 {
		t.Fatalf("%d spans, want ~5000", n)
	}
	spans := NewDecoder(DecoderConfig{}).AppendTraces(nil, td)
	var failed, claims, resends int
	for _, s := range spans {
		if s.Failed {
			failed++
		}
		if s.Claim != graph.ClaimMissing {
			claims++
		}
		if s.HasResend {
			resends++
		}
	}
	if failed == 0 || claims == 0 || resends == 0 {
		t.Fatalf("corpus lacks variety: failed=%d claims=%d resends=%d", failed, claims, resends)
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		ss := rss.At(i).ScopeSpans().At(0).Spans()
		for j := 0; j < ss.Len(); j++ {
			if n := ss.At(j).Attributes().Len(); n < 8 || n > 15 {
				t.Fatalf("span with %d attributes", n)
			}
		}
	}
}

// BenchmarkCheckJSON is the pre-scan AppendRequest runs on a JSON request
// before pdata's unmarshal (BenchmarkPdataUnmarshalJSON, same input): the
// ratio of the two is what the depth and size limits cost.
func BenchmarkCheckJSON(b *testing.B) {
	_, _, js, spans := benchCorpus(b)
	b.SetBytes(int64(len(js)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkJSON(js); err != nil {
			b.Fatal(err)
		}
	}
	reportSpans(b, spans)
}

// BenchmarkReadFileJSONLines reads a JSON-lines file of 20 requests of 250
// spans each (~200 KB lines, as a collector's file exporter writes them).
func BenchmarkReadFileJSONLines(b *testing.B) {
	td := benchTraces(17) // 255 spans
	line, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	var file []byte
	for range 20 {
		file = append(append(file, line...), '\n')
	}
	spans := 20 * td.SpanCount()
	b.SetBytes(int64(len(file)))
	b.ReportAllocs()
	d := NewDecoder(DecoderConfig{})
	for b.Loop() {
		st, err := d.ReadFile(bytes.NewReader(file), "bench.jsonl", nil, nil)
		if err != nil || st.Spans != spans {
			b.Fatal(err, st)
		}
	}
	reportSpans(b, spans)
}

// BenchmarkDecodeProtoSampled is BenchmarkDecodeProto with a tracestate
// (ot=th) on every span.
func BenchmarkDecodeProtoSampled(b *testing.B) {
	_, pb, _, spans := sampledCorpus(b)
	benchPathBefore(b, pb, spans, func(d *Decoder, dst []graph.Span, data []byte) ([]graph.Span, error) {
		return d.AppendRequest(dst, data, false)
	})
}

// BenchmarkDecodeJSONSampled is BenchmarkDecodeJSON with a tracestate
// (ot=th) on every span.
func BenchmarkDecodeJSONSampled(b *testing.B) {
	_, _, js, spans := sampledCorpus(b)
	benchPathBefore(b, js, spans, func(d *Decoder, dst []graph.Span, data []byte) ([]graph.Span, error) {
		return d.AppendRequest(dst, data, true)
	})
}

// BenchmarkAppendTracesSampled is BenchmarkAppendTraces with a tracestate
// (ot=th) on every span.
func BenchmarkAppendTracesSampled(b *testing.B) { benchAppendTraces(b, sampledCorpus) }
