package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// request builds a request whose spans are named prefix-0, prefix-1, ...
func request(t testing.TB, prefix string, n int) ptrace.Traces {
	defs := make([]spanDef, n)
	for i := range defs {
		defs[i] = spanDef{kind: ptrace.SpanKindServer, name: prefix + "-" + string(rune('0'+i))}
	}
	return tracesOf(t, map[string]any{"service.name": prefix}, defs...)
}

func protoOf(t testing.TB, td ptrace.Traces) []byte {
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonOf(t testing.TB, td ptrace.Traces) []byte {
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frame prefixes each message with its 4-byte big-endian length, as the
// collector's file exporter does with format: proto.
func frame(msgs ...[]byte) []byte {
	var out []byte
	for _, m := range msgs {
		out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
		out = append(out, m...)
	}
	return out
}

func gz(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type readResult struct {
	requests [][]string // span names per emit call
	bad      []error
	stats    FileStats
	err      error
}

func readAll(t testing.TB, d *Decoder, name string, data []byte) readResult {
	var res readResult
	res.stats, res.err = d.ReadFile(bytes.NewReader(data), name, func(spans []graph.Span) error {
		names := make([]string, len(spans))
		for i, s := range spans {
			names[i] = s.Name
		}
		res.requests = append(res.requests, names)
		return nil
	}, func(err error) { res.bad = append(res.bad, err) })
	return res
}

func wantNames(t *testing.T, res readResult, want ...[]string) {
	t.Helper()
	if len(res.requests) != len(want) {
		t.Fatalf("%d requests emitted, want %d: %v", len(res.requests), len(want), res.requests)
	}
	for i := range want {
		if strings.Join(res.requests[i], ",") != strings.Join(want[i], ",") {
			t.Fatalf("request %d: spans %v, want %v", i, res.requests[i], want[i])
		}
	}
}

func TestReadFileJSONLinesWithBadLine(t *testing.T) {
	var f bytes.Buffer
	f.Write(jsonOf(t, request(t, "a", 2)))
	f.WriteString("\n")
	f.Write(jsonOf(t, request(t, "b", 1)))
	f.WriteString("\n")
	f.WriteString(`{"resourceSpans": [ this is not json` + "\n") // line 3
	f.WriteString("\n")                                          // blank line 4
	f.Write(jsonOf(t, request(t, "c", 3)))                       // line 5, no trailing newline

	res := readAll(t, NewDecoder(DecoderConfig{}), "traces.jsonl", f.Bytes())
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantNames(t, res, []string{"a-0", "a-1"}, []string{"b-0"}, []string{"c-0", "c-1", "c-2"})
	if len(res.bad) != 1 {
		t.Fatalf("onBad called %d times, want 1: %v", len(res.bad), res.bad)
	}
	if msg := res.bad[0].Error(); !strings.HasPrefix(msg, "traces.jsonl:3: invalid OTLP JSON") {
		t.Fatalf("bad line error %q, want it to name traces.jsonl:3", msg)
	}
	want := FileStats{Bytes: int64(f.Len()), Requests: 3, BadRequests: 1, Spans: 6}
	if res.stats != want {
		t.Fatalf("stats %+v, want %+v", res.stats, want)
	}
}

func TestReadFileJSONLinesCRLFAndLeadingBlank(t *testing.T) {
	var f bytes.Buffer
	f.WriteString("\r\n\n  ")
	f.Write(jsonOf(t, request(t, "a", 1)))
	f.WriteString("\r\n")
	f.Write(jsonOf(t, request(t, "b", 1)))
	f.WriteString("\r\n")
	res := readAll(t, NewDecoder(DecoderConfig{}), "crlf.json", f.Bytes())
	if res.err != nil || len(res.bad) != 0 {
		t.Fatal(res.err, res.bad)
	}
	wantNames(t, res, []string{"a-0"}, []string{"b-0"})
}

func TestReadFileGzipJSONLines(t *testing.T) {
	var f bytes.Buffer
	for _, p := range []string{"a", "b", "c"} {
		f.Write(jsonOf(t, request(t, p, 2)))
		f.WriteString("\n")
	}
	data := gz(t, f.Bytes())
	res := readAll(t, NewDecoder(DecoderConfig{}), "traces.jsonl.gz", data)
	if res.err != nil || len(res.bad) != 0 {
		t.Fatal(res.err, res.bad)
	}
	wantNames(t, res, []string{"a-0", "a-1"}, []string{"b-0", "b-1"}, []string{"c-0", "c-1"})
	if res.stats.Bytes != int64(len(data)) || res.stats.Spans != 6 || res.stats.Requests != 3 {
		t.Fatalf("stats %+v (compressed size %d)", res.stats, len(data))
	}
}

func TestReadFileRawProto(t *testing.T) {
	res := readAll(t, NewDecoder(DecoderConfig{}), "req.pb", protoOf(t, request(t, "a", 3)))
	if res.err != nil || len(res.bad) != 0 {
		t.Fatal(res.err, res.bad)
	}
	wantNames(t, res, []string{"a-0", "a-1", "a-2"})
	// Gzipped too.
	res = readAll(t, NewDecoder(DecoderConfig{}), "req.pb.gz", gz(t, protoOf(t, request(t, "a", 1))))
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantNames(t, res, []string{"a-0"})
}

func TestReadFileFramedProto(t *testing.T) {
	data := frame(protoOf(t, request(t, "a", 1)), protoOf(t, request(t, "b", 2)), protoOf(t, ptrace.NewTraces()), protoOf(t, request(t, "c", 1)))
	if data[0] != 0 {
		t.Fatal("test premise: framed stream starts with 0x00")
	}
	res := readAll(t, NewDecoder(DecoderConfig{}), "traces.proto", data)
	if res.err != nil || len(res.bad) != 0 {
		t.Fatal(res.err, res.bad)
	}
	wantNames(t, res, []string{"a-0"}, []string{"b-0", "b-1"}, []string{}, []string{"c-0"})
	if res.stats.Requests != 4 || res.stats.Spans != 4 {
		t.Fatalf("stats %+v", res.stats)
	}
	// Gzipped framed stream.
	res = readAll(t, NewDecoder(DecoderConfig{}), "traces.proto.gz", gz(t, data))
	if res.err != nil || len(res.requests) != 4 {
		t.Fatal(res.err, res.requests)
	}
}

func TestReadFileFramedBadMessage(t *testing.T) {
	data := frame(protoOf(t, request(t, "a", 1)), []byte{0x0a, 0x05, 0xff, 0xff}, protoOf(t, request(t, "c", 1)))
	res := readAll(t, NewDecoder(DecoderConfig{}), "traces.proto", data)
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantNames(t, res, []string{"a-0"}, []string{"c-0"})
	if len(res.bad) != 1 || !strings.HasPrefix(res.bad[0].Error(), "traces.proto: message 2: invalid OTLP protobuf") {
		t.Fatalf("bad: %v", res.bad)
	}
	if res.stats.BadRequests != 1 {
		t.Fatalf("stats %+v", res.stats)
	}
}

func TestReadFileFramedJSON(t *testing.T) {
	// The file exporter frames JSON too (when it compresses per message).
	data := frame(jsonOf(t, request(t, "a", 1)), protoOf(t, request(t, "b", 1)))
	res := readAll(t, NewDecoder(DecoderConfig{}), "mixed.bin", data)
	if res.err != nil || len(res.bad) != 0 {
		t.Fatal(res.err, res.bad)
	}
	wantNames(t, res, []string{"a-0"}, []string{"b-0"})
}

func TestReadFileEmpty(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":      nil,
		"blank":      []byte("\n\n  \n"),
		"empty gzip": gz(t, nil),
	} {
		res := readAll(t, NewDecoder(DecoderConfig{}), name, data)
		if res.err != nil || len(res.requests) != 0 || len(res.bad) != 0 || res.stats.Spans != 0 {
			t.Errorf("%s: %+v", name, res)
		}
	}
}

func TestReadFileErrors(t *testing.T) {
	good := protoOf(t, request(t, "a", 2))
	gzJSON := gz(t, append(jsonOf(t, request(t, "a", 2)), '\n'))
	framed := frame(good, good)
	L := len(good)
	tests := []struct {
		name, file string
		data       []byte
		want       string // the whole message
		kind       error
		requests   int // emitted before the error
	}{
		{"garbage", "garbage.bin", []byte("this is not a trace file at all"),
			"garbage.bin: unrecognised format: neither OTLP JSON nor OTLP protobuf (raw or length-prefixed)", ErrFormat, 0},
		{"truncated gzip", "t.jsonl.gz", gzJSON[:len(gzJSON)/2],
			"t.jsonl.gz: gzip stream truncated after 0 lines (the file may still be being written)", ErrTruncated, 0},
		{"gzip header cut", "h.gz", []byte{0x1f, 0x8b, 0x08, 0x00, 0x00},
			"h.gz: gzip stream truncated in its header (the file may still be being written)", ErrTruncated, 0},
		{"corrupt gzip header", "c.gz", []byte{0x1f, 0x8b, 0x07, 0, 0, 0, 0, 0, 0, 0xff, 1, 2, 3},
			"c.gz: gzip stream corrupt in its header: gzip: invalid header", ErrCorrupt, 0},
		{"truncated frame", "f.proto", framed[:len(framed)-3],
			fmt.Sprintf("f.proto: length-prefixed stream truncated in message 2 (1 message read, then %d of its %d bytes; the file may still be being written)", L-3, L), ErrTruncated, 1},
		{"truncated length prefix", "p.proto", append(frame(good), 0, 0),
			"p.proto: length-prefixed stream truncated in message 2 (1 message read, then 2 of its 4 length bytes; the file may still be being written)", ErrTruncated, 1},
		{"oversized length prefix", "o.proto", append(frame(good), 0x7f, 0xff, 0xff, 0xff, 0x0a),
			"o.proto: message 2: length prefix 2147483647 exceeds 268435456 bytes: corrupt length-prefixed stream (1 message read)", ErrCorrupt, 1},
		{"bogus length, short file", "s.proto", []byte{0x0f, 0xff, 0xff, 0xff, 0x0a},
			"s.proto: length-prefixed stream truncated in message 1 (0 messages read, then 1 of its 268435455 bytes; the file may still be being written)", ErrTruncated, 0},
		{"raw proto cut in a field", "r.pb", []byte{0x0a, 0x7f, 0x01},
			"r.pb: protobuf request truncated: a field runs past its end, after 3 bytes (the file may still be being written)", ErrTruncated, 0},
		{"zstd header cut", "z.zst", []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0},
			"z.zst: zstd stream truncated before any data (the file may still be being written)", ErrTruncated, 0},
		{"three gzip layers", "g.gz", gz(t, gz(t, gz(t, []byte("{}\n")))),
			"g.gz: more than 2 nested compression layers (gzip, zstd)", ErrFormat, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := readAll(t, NewDecoder(DecoderConfig{}), tt.file, tt.data)
			if res.err == nil || res.err.Error() != tt.want {
				t.Fatalf("err %v\nwant  %s", res.err, tt.want)
			}
			if !errors.Is(res.err, tt.kind) {
				t.Fatalf("err %v: not %v", res.err, tt.kind)
			}
			if len(res.requests) != tt.requests {
				t.Fatalf("%d requests emitted, want %d", len(res.requests), tt.requests)
			}
		})
	}
}

func TestReadFileInvalidRawProto(t *testing.T) {
	// resource_spans holding a field 1 of wire type 7, which does not exist.
	res := readAll(t, NewDecoder(DecoderConfig{}), "r.pb", []byte{0x0a, 0x01, 0x0f})
	if res.err == nil || !strings.HasPrefix(res.err.Error(), "r.pb: invalid OTLP protobuf: ") || !errors.Is(res.err, ErrFormat) {
		t.Fatalf("err %v", res.err)
	}
	if errors.Is(res.err, ErrTruncated) {
		t.Fatalf("err %v: reported as truncated", res.err)
	}
}

func TestReadFileTooLongLine(t *testing.T) {
	defer func(old int) { maxLineSize = old }(maxLineSize)
	maxLineSize = 1000
	var f bytes.Buffer
	f.Write(jsonOf(t, request(t, "a", 1)))
	f.WriteString("\n{\"resourceSpans\":[]," + strings.Repeat(" ", 300_000) + "}\n")
	f.Write(jsonOf(t, request(t, "b", 1)))
	f.WriteString("\n")
	res := readAll(t, NewDecoder(DecoderConfig{}), "long.jsonl", f.Bytes())
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantNames(t, res, []string{"a-0"}, []string{"b-0"})
	if len(res.bad) != 1 || res.bad[0].Error() != "long.jsonl:2: JSON request longer than 1000 bytes: skipped" {
		t.Fatalf("bad: %v", res.bad)
	}
}

func TestReadFileLongLine(t *testing.T) {
	// A line far longer than the read buffer is still one request.
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for range 20_000 {
		ss.Spans().AppendEmpty().SetName("a-rather-long-span-name-to-fill-the-line")
	}
	line := jsonOf(t, td)
	if len(line) < 2*readBufSize {
		t.Fatalf("test premise: line of %d bytes", len(line))
	}
	res := readAll(t, NewDecoder(DecoderConfig{}), "big.jsonl", append(line, '\n'))
	if res.err != nil || len(res.bad) != 0 || res.stats.Spans != 20_000 {
		t.Fatal(res.err, res.bad, res.stats)
	}
}

func TestReadFileEmitErrorStops(t *testing.T) {
	stop := errors.New("stop")
	data := frame(protoOf(t, request(t, "a", 1)), protoOf(t, request(t, "b", 1)))
	calls := 0
	_, err := NewDecoder(DecoderConfig{}).ReadFile(bytes.NewReader(data), "x.proto", func([]graph.Span) error {
		calls++
		return stop
	}, nil)
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

func TestReadFileProgress(t *testing.T) {
	var f bytes.Buffer
	for f.Len() < 3<<20 {
		f.Write(jsonOf(t, request(t, "a", 9)))
		f.WriteString("\n")
	}
	d := NewDecoder(DecoderConfig{})
	var calls []int64
	d.Progress = func(n int64) { calls = append(calls, n) }
	res := readAll(t, d, "p.jsonl", f.Bytes())
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(calls) < 3 || len(calls) > 5 {
		t.Fatalf("progress calls %v for %d bytes", calls, f.Len())
	}
	if calls[len(calls)-1] != int64(f.Len()) {
		t.Fatalf("last progress %d, want %d", calls[len(calls)-1], f.Len())
	}
	for i := 1; i < len(calls)-1; i++ {
		if calls[i]-calls[i-1] < 1<<20 {
			t.Fatalf("progress calls too close: %v", calls)
		}
	}
}

func TestSniff(t *testing.T) {
	// A raw request whose first resource_spans is 123 bytes long starts
	// with 0x0a '{': still protobuf, since `{"resource` does not follow.
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "s")
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("x")
	for n := 0; ; n++ {
		rs.ScopeSpans().At(0).Spans().At(0).SetName(strings.Repeat("x", n+1))
		if b := protoOf(t, td); b[1] == '{' {
			res := readAll(t, NewDecoder(DecoderConfig{}), "brace.pb", b)
			if res.err != nil || res.stats.Spans != 1 {
				t.Fatal(res.err, res.stats)
			}
			return
		} else if b[1] > '{' {
			t.Fatal("could not build the test case")
		}
	}
}

func TestReadFileBOMAndNestedGzip(t *testing.T) {
	js := append(jsonOf(t, request(t, "a", 1)), '\n')
	res := readAll(t, NewDecoder(DecoderConfig{}), "bom.jsonl", append([]byte{0xef, 0xbb, 0xbf}, js...))
	if res.err != nil || len(res.bad) != 0 {
		t.Fatal(res.err, res.bad)
	}
	wantNames(t, res, []string{"a-0"})
	res = readAll(t, NewDecoder(DecoderConfig{}), "twice.gz", gz(t, gz(t, js)))
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantNames(t, res, []string{"a-0"})
	if res := readAll(t, NewDecoder(DecoderConfig{}), "thrice.gz", gz(t, gz(t, gz(t, js)))); !errors.Is(res.err, ErrFormat) {
		t.Fatalf("three gzip layers: %v", res.err)
	}
}

func TestFramedExactly(t *testing.T) {
	for _, tt := range []struct {
		b    []byte
		want bool
	}{
		{nil, false},
		{frame([]byte("abc")), true},
		{frame([]byte("abc"), nil, []byte("de")), true},
		{frame([]byte("abc"))[:6], false},
		{append(frame([]byte("abc")), 0), false},
		{[]byte{0xff, 0xff, 0xff, 0xff, 1}, false},
	} {
		if got := framedExactly(tt.b); got != tt.want {
			t.Errorf("framedExactly(%x) = %v", tt.b, got)
		}
	}
}
