package otlp

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
)

func tracesURL(s *Server) string { return "http://" + s.HTTPAddr().String() + TracesPath }

// exportResponse decodes an ExportTraceServiceResponse in the content type
// it came in.
func exportResponse(t *testing.T, r reply) ptraceotlp.ExportResponse {
	t.Helper()
	resp := ptraceotlp.NewExportResponse()
	var err error
	switch ct := r.header.Get("Content-Type"); ct {
	case contentTypeJSON:
		err = resp.UnmarshalJSON(r.body)
	case contentTypeProto:
		err = resp.UnmarshalProto(r.body)
	default:
		t.Fatalf("answer Content-Type %q", ct)
	}
	if err != nil {
		t.Fatalf("decode answer %q: %v", r.body, err)
	}
	return resp
}

// rpcStatus decodes a google.rpc.Status error body.
func rpcStatus(t *testing.T, r reply) (codes.Code, string) {
	t.Helper()
	switch ct := r.header.Get("Content-Type"); ct {
	case contentTypeJSON:
		var st struct {
			Code    int32  `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(r.body, &st); err != nil {
			t.Fatalf("decode JSON status %q: %v", r.body, err)
		}
		return codes.Code(st.Code), st.Message
	case contentTypeProto:
		var st spb.Status
		if err := proto.Unmarshal(r.body, &st); err != nil {
			t.Fatalf("decode protobuf status %q: %v", r.body, err)
		}
		return codes.Code(st.Code), st.Message
	default:
		t.Fatalf("error Content-Type %q", ct)
	}
	return 0, ""
}

func TestHTTPStoresSpans(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg}, rec)
	const n = 37
	total := 0
	for i, tc := range []struct {
		ct, enc string
	}{
		{contentTypeProto, ""},
		{contentTypeProto, "gzip"},
		{contentTypeJSON, ""},
		{contentTypeJSON, "gzip"},
		{"application/json; charset=utf-8", "identity"},
	} {
		t.Run(tc.ct+"/"+tc.enc, func(t *testing.T) {
			rec.reset()
			seed := byte(i + 1)
			td := testTraces(seed, n)
			var body []byte
			if strings.HasPrefix(tc.ct, contentTypeJSON) {
				body = jsonBody(t, td)
			} else {
				body = protoBody(t, td)
			}
			if tc.enc == "gzip" {
				body = gzipped(t, body)
			}
			r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(body), tc.ct, tc.enc)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			resp := exportResponse(t, r)
			if ps := resp.PartialSuccess(); ps.RejectedSpans() != 0 || ps.ErrorMessage() != "" {
				t.Errorf("partial success %d %q on a clean request", ps.RejectedSpans(), ps.ErrorMessage())
			}
			checkIDs(t, rec.taken(), seed, n, nil)
			total += n
		})
	}
	if got := metricValue(t, reg, "stormradius_otlp_spans_accepted_total", "protocol", "http"); got != float64(total) {
		t.Errorf("spans accepted metric %v, want %d", got, total)
	}
	if got := metricValue(t, reg, "stormradius_otlp_requests_total", "protocol", "http", "status", "200"); got != 5 {
		t.Errorf("requests metric %v, want 5", got)
	}
	if got := metricValue(t, reg, "stormradius_otlp_request_duration_seconds", "protocol", "http"); got != 5 {
		t.Errorf("latency observations %v, want 5", got)
	}
}

func TestHTTPPartialSuccess(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	logs := &logBuffer{}
	s := startServer(t, Config{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))}, rec)
	defects := []spanDefect{okSpan, zeroTraceID, zeroSpanID, okSpan, zeroStart, zeroTraceID, okSpan}
	const n = 20
	keep := func(i int) bool { return i >= len(defects) || defects[i] == okSpan }
	for i, ct := range []string{contentTypeProto, contentTypeJSON} {
		t.Run(ct, func(t *testing.T) {
			rec.reset()
			seed := byte(10 + i)
			td := testTraces(seed, n, defects...)
			body := protoBody(t, td)
			if ct == contentTypeJSON {
				body = jsonBody(t, td)
			}
			r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(body), ct, "")
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			ps := exportResponse(t, r).PartialSuccess()
			if ps.RejectedSpans() != 4 {
				t.Errorf("rejected_spans %d, want 4", ps.RejectedSpans())
			}
			want := "4 of 20 spans rejected: 2 with an all-zero (invalid) trace id, 1 with an all-zero (invalid) span id, 1 without a start time"
			if ps.ErrorMessage() != want {
				t.Errorf("error message %q, want %q", ps.ErrorMessage(), want)
			}
			checkIDs(t, rec.taken(), seed, n, keep)
		})
	}
	// What the sender drops for good is logged here too (rate-limited:
	// the two requests may share one line).
	if l := logs.lines("otlp: spans rejected", "protocol=http", "4 of 20 spans rejected"); len(l) == 0 {
		t.Errorf("partial success not logged:\n%s", logs)
	}
	for reason, want := range map[string]float64{"invalid_trace_id": 4, "invalid_span_id": 2, "missing_start_time": 2} {
		if got := metricValue(t, reg, "stormradius_otlp_spans_rejected_total", "protocol", "http", "reason", reason); got != want {
			t.Errorf("rejected %s: %v, want %v", reason, got, want)
		}
	}

	// Nothing valid at all: nothing to store, still a 200 saying so.
	rec.reset()
	body := protoBody(t, testTraces(30, 2, zeroSpanID, zeroSpanID))
	r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(body), contentTypeProto, "")
	if r.status != http.StatusOK || exportResponse(t, r).PartialSuccess().RejectedSpans() != 2 {
		t.Errorf("all spans invalid: status %d, body %q", r.status, r.body)
	}
	if rec.consumed() != 0 {
		t.Errorf("Consume called %d times with nothing to store", rec.consumed())
	}
}

func TestHTTPErrors(t *testing.T) {
	rec := &recorder{}
	s := startServer(t, Config{MaxBodyBytes: 64 << 10}, rec)
	good := protoBody(t, testTraces(1, 3))
	big := protoBody(t, testTraces(1, 2000))
	if len(big) <= 64<<10 {
		t.Fatalf("test body of %d bytes is not over the limit", len(big))
	}
	bigGzip := gzipped(t, big)
	if len(bigGzip) > 64<<10 {
		t.Fatalf("compressed test body of %d bytes is over the limit", len(bigGzip))
	}
	url := tracesURL(s)
	base := "http://" + s.HTTPAddr().String()
	for _, tc := range []struct {
		name      string
		method    string
		url       string
		body      []byte
		chunked   bool // no Content-Length
		ct, enc   string
		status    int
		code      codes.Code
		msg       string // a substring of the message
		header    string // a header the answer must carry
		errJSON   bool
		wantValue string
	}{
		{name: "wrong path", method: "POST", url: base + "/v1/metrics", body: good, ct: contentTypeProto,
			status: 404, code: codes.NotFound, msg: "/v1/traces"},
		{name: "root path", method: "GET", url: base + "/", status: 404, code: codes.NotFound, errJSON: true},
		{name: "GET", method: "GET", url: url, ct: contentTypeJSON, status: 405, code: codes.Unimplemented,
			header: "Allow", wantValue: "POST", errJSON: true},
		{name: "PUT", method: "PUT", url: url, body: good, ct: contentTypeProto, status: 405, code: codes.Unimplemented},
		{name: "text/plain", method: "POST", url: url, body: good, ct: "text/plain", status: 415,
			code: codes.InvalidArgument, msg: "text/plain", errJSON: true},
		{name: "no content type", method: "POST", url: url, body: good, status: 415, code: codes.InvalidArgument, errJSON: true},
		{name: "brotli", method: "POST", url: url, body: good, ct: contentTypeProto, enc: "br", status: 415,
			code: codes.InvalidArgument, msg: "Content-Encoding", header: "Accept-Encoding",
			wantValue: "gzip, zstd, snappy, x-snappy-framed, deflate, zlib, lz4, identity"},
		{name: "garbage protobuf", method: "POST", url: url, body: []byte("\xff\xff\xff garbage"), ct: contentTypeProto,
			status: 400, code: codes.InvalidArgument, msg: "cannot decode the body as an OTLP protobuf"},
		{name: "garbage JSON", method: "POST", url: url, body: []byte(`{"resourceSpans": [`), ct: contentTypeJSON,
			status: 400, code: codes.InvalidArgument, msg: "cannot decode the body as an OTLP JSON", errJSON: true},
		{name: "JSON metrics", method: "POST", url: url, body: []byte(`{"resourceMetrics":[{"scopeMetrics":[]}]}`),
			ct: contentTypeJSON, status: 400, code: codes.InvalidArgument, errJSON: true},
		{name: "bad gzip", method: "POST", url: url, body: good, ct: contentTypeProto, enc: "gzip", status: 400,
			code: codes.InvalidArgument, msg: "gzip"},
		{name: "truncated gzip", method: "POST", url: url, body: gzipped(t, good)[:20], ct: contentTypeProto, enc: "gzip",
			status: 400, code: codes.InvalidArgument, msg: "gzip"},
		{name: "too large", method: "POST", url: url, body: big, ct: contentTypeProto, status: 413,
			code: codes.ResourceExhausted, msg: "larger than 65536 bytes"},
		{name: "too large, chunked", method: "POST", url: url, body: big, chunked: true, ct: contentTypeProto, status: 413,
			code: codes.ResourceExhausted},
		{name: "too large decompressed", method: "POST", url: url, body: bigGzip, ct: contentTypeJSON, enc: "gzip",
			status: 413, code: codes.ResourceExhausted, errJSON: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != nil {
				body = bytes.NewReader(tc.body)
				if tc.chunked {
					body = io.MultiReader(body) // hides the length
				}
			}
			r := post(t, nil, tc.method, tc.url, body, tc.ct, tc.enc)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			wantCT := contentTypeProto
			if tc.errJSON {
				wantCT = contentTypeJSON
			}
			if ct := r.header.Get("Content-Type"); ct != wantCT {
				t.Errorf("Content-Type %q, want %q", ct, wantCT)
			}
			code, msg := rpcStatus(t, r)
			if code != tc.code || !strings.Contains(msg, tc.msg) || msg == "" {
				t.Errorf("status body (%v, %q), want (%v, …%q…)", code, msg, tc.code, tc.msg)
			}
			if tc.header != "" && r.header.Get(tc.header) != tc.wantValue {
				t.Errorf("%s: %q, want %q", tc.header, r.header.Get(tc.header), tc.wantValue)
			}
		})
	}
	if got := rec.taken(); len(got) != 0 {
		t.Errorf("%d spans stored from bad requests", len(got))
	}
	// The receiver still works after all that.
	r := post(t, nil, http.MethodPost, url, bytes.NewReader(good), contentTypeProto, "")
	if r.status != 200 || len(rec.taken()) != 3 {
		t.Fatalf("good request after bad ones: status %d, %d spans stored", r.status, len(rec.taken()))
	}
}

func TestHTTPConsumerFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg, RetryAfter: 1500 * time.Millisecond}, rec)
	body := protoBody(t, testTraces(1, 5))
	for _, tc := range []struct {
		err        error
		status     int
		retryAfter string
		reason     string
	}{
		{fmt.Errorf("pipeline: admit 5 spans: %w", pipeline.ErrBackpressure), 503, "2", "backpressure"},
		{fmt.Errorf("sqlite: write spans: %w", store.ErrUnavailable), 503, "2", "unavailable"},
		{fmt.Errorf("pipeline: %w", store.ErrClosed), 503, "2", "unavailable"},
		{fmt.Errorf("sqlite: write spans: %w", errTest), 500, "", "internal"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			rec.reset()
			rec.setErr(tc.err)
			r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(body), contentTypeProto, "")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if got := r.header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			_, msg := rpcStatus(t, r)
			if strings.Contains(msg, "sqlite") {
				t.Errorf("the store's error reached the client: %q", msg)
			}
		})
	}
	for reason, want := range map[string]float64{"backpressure": 5, "unavailable": 10, "internal": 5} {
		if got := metricValue(t, reg, "stormradius_otlp_spans_rejected_total", "protocol", "http", "reason", reason); got != want {
			t.Errorf("rejected %s: %v, want %v", reason, got, want)
		}
	}
	if got := metricValue(t, reg, "stormradius_otlp_spans_accepted_total", "protocol", "http"); got != 0 {
		t.Errorf("accepted %v spans that were not stored", got)
	}
	if got := metricValue(t, reg, "stormradius_otlp_requests_total", "protocol", "http", "status", "503"); got != 3 {
		t.Errorf("503 answers counted %v, want 3", got)
	}
}

// A consumer that would refuse any span (pipeline.Saturated) gets no call:
// the request is answered 503 with Retry-After before its body is read —
// a body that is not even OTLP is not looked at — and counted as a 503.
func TestHTTPSaturatedConsumer(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{full: true}
	s := startServer(t, Config{Registerer: reg, RetryAfter: 1500 * time.Millisecond}, rec)
	for _, body := range [][]byte{protoBody(t, testTraces(1, 5)), []byte("not a protobuf")} {
		r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(body), contentTypeProto, "")
		if r.status != 503 || r.header.Get("Retry-After") != "2" {
			t.Fatalf("status %d, Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
		}
		if _, msg := rpcStatus(t, r); !strings.Contains(msg, "overloaded") {
			t.Errorf("message %q", msg)
		}
	}
	if n := rec.consumed(); n != 0 {
		t.Errorf("Consume called %d times", n)
	}
	if got := metricValue(t, reg, "stormradius_otlp_requests_total", "protocol", "http", "status", "503"); got != 2 {
		t.Errorf("503 answers counted %v, want 2", got)
	}
	rec.mu.Lock()
	rec.full = false
	rec.mu.Unlock()
	if r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(protoBody(t, testTraces(1, 5))), contentTypeProto, ""); r.status != 200 {
		t.Fatalf("status %d once there is room: %s", r.status, r.body)
	}
}

// gzipBomb returns one gzip member that inflates to mib MiB of zeros, in
// about a thousandth of that, without compressing it all: once deflate's
// window is all zeros, each further MiB of zeros, flushed, compresses to
// the same bytes, so one such segment is repeated.
func gzipBomb(t testing.TB, mib int) []byte {
	t.Helper()
	var d bytes.Buffer
	zw, err := flate.NewWriter(&d, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	var ends [3]int
	for i := range ends {
		zw.Write(zeros)
		zw.Flush()
		ends[i] = d.Len()
	}
	zw.Close()
	raw := d.Bytes()
	seg := raw[ends[0]:ends[1]]
	if !bytes.Equal(seg, raw[ends[1]:ends[2]]) {
		t.Fatal("compress/flate no longer repeats itself on zeros: build the bomb another way")
	}
	out := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff} // gzip header: deflate, no name, unknown OS
	out = append(out, raw[:ends[0]]...)
	for range mib - 1 {
		out = append(out, seg...)
	}
	out = append(out, raw[ends[2]:]...) // the final block
	crc := uint32(0)
	for range mib {
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	out = binary.LittleEndian.AppendUint32(out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(mib<<20))
}

// TestHTTPGzipBomb sends 1 GiB of zeros, gzipped to about 1 MiB, to a
// receiver with the default 20 MiB limit: it must answer 413 having
// inflated no more than the limit.
func TestHTTPGzipBomb(t *testing.T) {
	rec := &recorder{}
	s := startServer(t, Config{}, rec)
	bomb := gzipBomb(t, 1024)
	t.Logf("bomb: 1 GiB of zeros in %d bytes of gzip", len(bomb))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := post(t, nil, http.MethodPost, tracesURL(s), bytes.NewReader(bomb), contentTypeProto, "gzip")
	runtime.ReadMemStats(&after)
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413: %s", r.status, r.body)
	}
	// The receiver's buffer grows to the 20 MiB limit (doubling: about 40
	// MiB allocated in all); the rest is ordinary client and server work
	// (more under the race detector). Far from the bomb's 1 GiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 128<<20 {
		t.Errorf("allocated %d MiB answering a gzip bomb", alloc>>20)
	} else {
		t.Logf("allocated %d MiB answering a gzip bomb", alloc>>20)
	}
	if rec.consumed() != 0 {
		t.Errorf("Consume called for a gzip bomb")
	}
}
