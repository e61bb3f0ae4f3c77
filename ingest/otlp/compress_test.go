package otlp

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// A compressor as the Collector's exporters use them (confighttp's
// compressor.go, configgrpc's grpccompression): the same libraries, the
// same formats. Each returns the compressed bytes of b.
type compressor func(t testing.TB, b []byte) []byte

func writeAll(t testing.TB, newW func(io.Writer) io.WriteCloser, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := newW(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var (
	zlibC = func(t testing.TB, b []byte) []byte {
		return writeAll(t, func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) }, b)
	}
	rawDeflateC = func(t testing.TB, b []byte) []byte {
		return writeAll(t, func(w io.Writer) io.WriteCloser {
			fw, _ := flate.NewWriter(w, flate.DefaultCompression)
			return fw
		}, b)
	}
	// zstdStreamC is confighttp's: a streaming encoder, concurrency 1,
	// the default window (8 MiB, declared in the frame header).
	zstdStreamC = func(t testing.TB, b []byte) []byte {
		return writeAll(t, func(w io.Writer) io.WriteCloser {
			zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			return zw
		}, b)
	}
	// zstdAllC compresses in one go: a single-segment frame with its size.
	zstdAllC = func(t testing.TB, b []byte) []byte {
		zw, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		return zw.EncodeAll(b, nil)
	}
	// snappyBlockC is confighttp's "snappy" since its framedSnappy gate.
	snappyBlockC = func(t testing.TB, b []byte) []byte { return snappy.Encode(nil, b) }
	// snappyFramedC is "x-snappy-framed", "snappy" before the gate, and
	// configgrpc's snappy.
	snappyFramedC = func(t testing.TB, b []byte) []byte {
		return writeAll(t, func(w io.Writer) io.WriteCloser { return snappy.NewBufferedWriter(w) }, b)
	}
	lz4C = func(t testing.TB, b []byte) []byte {
		return writeAll(t, func(w io.Writer) io.WriteCloser { return lz4.NewWriter(w) }, b)
	}
	gzipC = func(t testing.TB, b []byte) []byte { return gzipped(t, b) }
)

// httpCodings are the Content-Encodings a sender may use, each with how it
// compresses.
var httpCodings = []struct {
	name, header string
	compress     compressor
}{
	{"gzip", "gzip", gzipC},
	{"x-gzip", "x-gzip", gzipC},
	{"zstd stream", "zstd", zstdStreamC},
	{"zstd single segment", "ZSTD", zstdAllC},
	{"snappy block", "snappy", snappyBlockC},
	{"snappy framed (older collectors)", "snappy", snappyFramedC},
	{"x-snappy-framed", "x-snappy-framed", snappyFramedC},
	{"deflate (zlib, as the collector sends it)", "deflate", zlibC},
	{"deflate (raw)", "deflate", rawDeflateC},
	{"zlib", "zlib", zlibC},
	{"lz4", "lz4", lz4C},
}

// TestHTTPEveryCoding: every Content-Encoding the Collector's otlp_http
// exporter can send is read, protobuf and JSON, and the spans stored are
// those of the uncompressed body.
func TestHTTPEveryCoding(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg}, rec)
	for i, c := range httpCodings {
		for _, isJSON := range []bool{false, true} {
			seed := byte(2*i + 1)
			if isJSON {
				seed++
			}
			name := c.name + "/proto"
			td := testTraces(seed, 40)
			plain, ct := protoBody(t, td), contentTypeProto
			if isJSON {
				name = c.name + "/json"
				plain, ct = jsonBody(t, td), contentTypeJSON
			}
			t.Run(name, func(t *testing.T) {
				rec.reset()
				r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(c.compress(t, plain)), ct, c.header)
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				checkIDs(t, rec.taken(), seed, 40, nil)
			})
		}
	}
	if n := metricValue(t, reg, "stormradius_otlp_requests_refused_total", "protocol", "http"); n != 0 {
		t.Errorf("%v requests refused", n)
	}
}

// bombOf returns a body that c compresses to at most max bytes and that
// decompresses to at least 16 times max: as many copies as fit of one
// compressed piece of zeros (gzip members, zstd frames, snappy chunks and
// lz4 frames may be concatenated), built without holding what it expands
// to.
func bombOf(t testing.TB, c compressor, max int) []byte {
	t.Helper()
	const size = 4 << 20
	piece := c(t, make([]byte, size))
	n := max / len(piece)
	if n*size < 16*max {
		t.Fatalf("bomb expands to %d bytes only", n*size)
	}
	return bytes.Repeat(piece, n)
}

// TestHTTPDecompressionBombs: a body under the limit as sent that expands
// past it is cut off at the limit and answered 413, with memory bounded by
// the limit, not by what it expands to (up to 1 GiB here).
func TestHTTPDecompressionBombs(t *testing.T) {
	const limit = 1 << 20
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg, MaxBodyBytes: limit}, rec)
	for _, c := range []struct {
		name, header string
		compress     compressor
	}{
		{"gzip", "gzip", gzipC},
		{"zstd", "zstd", zstdStreamC},
		{"deflate", "deflate", zlibC},
		{"x-snappy-framed", "x-snappy-framed", snappyFramedC},
		{"lz4", "lz4", lz4C},
	} {
		t.Run(c.name, func(t *testing.T) {
			bomb := bombOf(t, c.compress, limit)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(bomb), contentTypeProto, c.header)
			runtime.ReadMemStats(&after)
			if r.status != 413 {
				t.Fatalf("status %d, want 413: %s", r.status, r.body)
			}
			if code, msg := rpcStatus(t, r); code != codes.ResourceExhausted || !strings.Contains(msg, "as sent or decompressed") {
				t.Errorf("answer (%v, %q)", code, msg)
			}
			// The limit, the bomb, the test's own buffers and a
			// decoder's state: far from the 1 GiB it expands to.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 48<<20 {
				t.Errorf("the request allocated %d MiB", alloc>>20)
			}
		})
	}
	t.Run("snappy block", func(t *testing.T) {
		// A block says its decoded length first: refused before decoding.
		bomb := snappy.Encode(nil, make([]byte, 8<<20))
		if len(bomb) > limit {
			t.Fatalf("bomb of %d bytes", len(bomb))
		}
		r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(bomb), contentTypeProto, "snappy")
		if r.status != 413 {
			t.Fatalf("status %d, want 413: %s", r.status, r.body)
		}
	})
	t.Run("zstd long window", func(t *testing.T) {
		// A frame that asks for a 128 MiB window (zstd --long=27):
		// refused rather than allocated. RFC 8878 §3.1.1: magic, a
		// header descriptor with no content size, a window descriptor
		// of exponent 17 (2^(10+17)), then one empty last raw block.
		frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 17 << 3, 0x01, 0x00, 0x00}
		buf := bytes.NewReader(frame)
		r := post(t, nil, "POST", tracesURL(s), buf, contentTypeProto, "zstd")
		if r.status != 413 {
			t.Fatalf("status %d, want 413: %s", r.status, r.body)
		}
	})
	if len(rec.taken()) != 0 {
		t.Errorf("spans stored from bombs")
	}
	waitMetric(t, reg, 7, "stormradius_otlp_requests_refused_total", "protocol", "http", "reason", "too_large")
	// The receiver still works.
	r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(zstdStreamC(t, protoBody(t, testTraces(9, 5)))), contentTypeProto, "zstd")
	if r.status != 200 {
		t.Fatalf("good request after bombs: %d %s", r.status, r.body)
	}
}

// TestHTTPCorruptCodings: a body that is not what its Content-Encoding says
// is answered 400 naming the coding, and counted as malformed.
func TestHTTPCorruptCodings(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg}, rec)
	good := protoBody(t, testTraces(1, 20))
	for _, c := range []struct {
		header, coding string
		body           []byte
	}{
		{"zstd", "zstd", good},
		{"zstd", "zstd", zstdStreamC(t, good)[:30]}, // cut short
		{"snappy", "snappy", append([]byte{0x80, 0x01}, good[:100]...)},
		{"x-snappy-framed", "snappy", snappyFramedC(t, good)[:40]},
		{"deflate", "deflate", good},
		{"lz4", "lz4", good},
		{"lz4", "lz4", lz4C(t, good)[:25]},
		{"gzip", "gzip", good},
	} {
		r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(c.body), contentTypeProto, c.header)
		code, msg := rpcStatus(t, r)
		if r.status != 400 || code != codes.InvalidArgument || !strings.Contains(msg, c.coding) {
			t.Errorf("%s (%d bytes): %d (%v, %q), want 400 naming %s", c.header, len(c.body), r.status, code, msg, c.coding)
		}
	}
	if len(rec.taken()) != 0 {
		t.Errorf("spans stored from corrupt bodies")
	}
	waitMetric(t, reg, 8, "stormradius_otlp_requests_refused_total", "protocol", "http", "reason", "malformed")
}

// TestGRPCEveryCompression: gzip, zstd and snappy, as the Collector's
// otlp_grpc exporter sends them, are read.
func TestGRPCEveryCompression(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg}, rec)
	conn := dialGRPC(t, s)
	c := ptraceotlp.NewGRPCClient(conn)
	for i, name := range []string{"gzip", "zstd", "snappy"} {
		t.Run(name, func(t *testing.T) {
			rec.reset()
			seed := byte(i + 1)
			req := ptraceotlp.NewExportRequestFromTraces(testTraces(seed, 300))
			if _, err := c.Export(context.Background(), req, grpc.UseCompressor(name)); err != nil {
				t.Fatal(err)
			}
			checkIDs(t, rec.taken(), seed, 300, nil)
		})
	}
	// The same bytes as the Collector's codecs write them, sent by hand:
	// the library's framing, not only our own encoder's.
	plain := protoBody(t, testTraces(7, 30))
	for _, tc := range []struct {
		enc  string
		body []byte
	}{
		{"zstd", zstdStreamC(t, plain)},
		{"zstd", zstdAllC(t, plain)},
		{"snappy", snappyFramedC(t, plain)},
	} {
		rec.reset()
		if code, msg := rawGRPC(t, s, tc.enc, tc.body); code != codes.OK {
			t.Errorf("%s by hand: %v %s", tc.enc, code, msg)
		}
		checkIDs(t, rec.taken(), 7, 30, nil)
	}
	if n := metricValue(t, reg, "stormradius_otlp_requests_refused_total", "protocol", "grpc"); n != 0 {
		t.Errorf("%v requests refused", n)
	}
}

// TestGRPCBadCompression: a message that does not decompress is
// INVALID_ARGUMENT (grpc's own answer would be INTERNAL), a bomb
// RESOURCE_EXHAUSTED, an unknown grpc-encoding UNIMPLEMENTED; each is
// counted by reason.
func TestGRPCBadCompression(t *testing.T) {
	const limit = 1 << 20
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg, MaxBodyBytes: limit}, rec)
	plain := protoBody(t, testTraces(1, 30))
	for _, tc := range []struct {
		name, enc string
		body      []byte
		code      codes.Code
		reason    string
	}{
		{"zstd garbage", "zstd", plain, codes.InvalidArgument, "malformed"},
		{"snappy block", "snappy", snappyBlockC(t, plain), codes.InvalidArgument, "malformed"},
		{"snappy cut", "snappy", snappyFramedC(t, plain)[:30], codes.InvalidArgument, "malformed"},
		{"gzip garbage", "gzip", plain, codes.InvalidArgument, "malformed"},
		{"gzip cut", "gzip", gzipC(t, plain)[:40], codes.InvalidArgument, "malformed"},
		{"zstd bomb", "zstd", bombOf(t, zstdStreamC, limit), codes.ResourceExhausted, "too_large"},
		{"snappy bomb", "snappy", bombOf(t, snappyFramedC, limit), codes.ResourceExhausted, "too_large"},
		{"gzip bomb", "gzip", bombOf(t, gzipC, limit), codes.ResourceExhausted, "too_large"},
		{"brotli", "br", plain, codes.Unimplemented, "unsupported_encoding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := metricValue(t, reg, "stormradius_otlp_requests_refused_total", "protocol", "grpc", "reason", tc.reason)
			code, msg := rawGRPC(t, s, tc.enc, tc.body)
			if code != tc.code {
				t.Fatalf("%v %q, want %v", code, msg, tc.code)
			}
			waitMetric(t, reg, before+1, "stormradius_otlp_requests_refused_total", "protocol", "grpc", "reason", tc.reason)
		})
	}
	if len(rec.taken()) != 0 {
		t.Errorf("spans stored from bad messages")
	}
}

// rawGRPC sends one Export message, compressed with enc (its bytes given as
// they are), over a plain HTTP/2 connection, and returns the status grpc
// answered: what a client with any codec sends, without this process's
// codec registry choosing for it.
func rawGRPC(t testing.TB, s *Server, enc string, compressed []byte) (codes.Code, string) {
	t.Helper()
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	msg := make([]byte, 5, 5+len(compressed))
	msg[0] = 1 // compressed
	binary.BigEndian.PutUint32(msg[1:], uint32(len(compressed)))
	msg = append(msg, compressed...)
	req, err := http.NewRequest("POST", "http://"+s.GRPCAddr().String()+grpcExportPath, bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Grpc-Encoding", enc)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	st := resp.Trailer.Get("Grpc-Status")
	if st == "" { // a trailers-only answer carries it in the headers
		st = resp.Header.Get("Grpc-Status")
	}
	msgText := resp.Trailer.Get("Grpc-Message") + resp.Header.Get("Grpc-Message")
	n, err := strconv.Atoi(st)
	if err != nil {
		t.Fatalf("no grpc-status in the answer (%d): %v", resp.StatusCode, resp.Header)
	}
	return codes.Code(n), msgText
}

// logBuffer is a slog handler's destination that tests can read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines returns the log lines that contain every one of subs.
func (l *logBuffer) lines(subs ...string) []string {
	var out []string
line:
	for _, ln := range strings.Split(l.String(), "\n") {
		for _, s := range subs {
			if !strings.Contains(ln, s) {
				continue line
			}
		}
		out = append(out, ln)
	}
	return out
}

// TestRefusalsLogged: a refused request is counted by reason and logged
// with what the client sent, at most once a second per reason, the next
// line saying how many were left out.
func TestRefusalsLogged(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	rec := &recorder{}
	s := startServer(t, Config{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))}, rec)
	body := protoBody(t, testTraces(1, 3))
	const n = 30
	for range n {
		post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "br", "User-Agent", "OpenTelemetry Collector Contrib/0.165.0")
	}
	waitMetric(t, reg, n, "stormradius_otlp_requests_refused_total", "protocol", "http", "reason", "unsupported_encoding")
	got := logs.lines("otlp: request refused", "reason=unsupported_encoding")
	if len(got) < 1 || len(got) > 2 {
		t.Fatalf("%d log lines for %d refusals, want 1 or 2 (one a second):\n%s", len(got), n, logs)
	}
	for _, want := range []string{"protocol=http", "answer=415", "content_encoding=br", `user_agent="OpenTelemetry Collector Contrib/0.165.0"`} {
		if !strings.Contains(got[0], want) {
			t.Errorf("log line lacks %s: %s", want, got[0])
		}
	}
	time.Sleep(1100 * time.Millisecond)
	post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "br")
	last := logs.lines("reason=unsupported_encoding")
	if len(last) < 2 || !strings.Contains(last[len(last)-1], "like_refusals_not_logged=") {
		t.Errorf("the line after a quiet second does not count the refusals left out:\n%s", logs)
	}
	// gRPC: an encoding grpc has no codec for, answered by grpc itself.
	if code, _ := rawGRPC(t, s, "br", body); code != codes.Unimplemented {
		t.Fatalf("gRPC br: %v", code)
	}
	waitMetric(t, reg, 1, "stormradius_otlp_requests_refused_total", "protocol", "grpc", "reason", "unsupported_encoding")
	if l := logs.lines("protocol=grpc", "reason=unsupported_encoding", "grpc_encoding=br"); len(l) != 1 {
		t.Errorf("gRPC refusal logged %d times:\n%s", len(l), logs)
	}
}

// FuzzDecompress: whatever a client sends under any Content-Encoding, the
// receiver's decompression neither panics nor returns more than the limit,
// and what it returns for a valid body is that body.
func FuzzDecompress(f *testing.F) {
	plain := protoBody(f, testTraces(1, 5))
	for c := range nCodings {
		f.Add(uint8(c), plain)
	}
	for _, cc := range httpCodings {
		f.Add(uint8(0), cc.compress(f, plain))
		for c := range nCodings {
			f.Add(uint8(c), cc.compress(f, plain))
		}
	}
	const limit = 64 << 10
	w := &work{}
	f.Fuzz(func(t *testing.T, c uint8, raw []byte) {
		cd := coding(c % uint8(nCodings))
		out, err := w.decompress(cd, raw, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("%s: %d bytes past the limit", codingNames[cd], len(out))
		}
		if cd == codingIdentity && (err != nil || !bytes.Equal(out, raw)) {
			t.Fatalf("identity changed the body")
		}
	})
}
