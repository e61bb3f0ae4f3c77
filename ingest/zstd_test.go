package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// testZstd is one zstd encoder for the tests (EncodeAll may be called
// concurrently; streamed frames take the lock): creating one per call
// would dominate the fuzz targets.
var testZstd struct {
	sync.Mutex
	once sync.Once
	enc  *zstd.Encoder
}

func testEncoder(t testing.TB) *zstd.Encoder {
	testZstd.once.Do(func() {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		testZstd.enc = enc
	})
	return testZstd.enc
}

// zstdFrames compresses each part as a zstd frame of its own (as the file
// exporter does per message, and per write with rotation) and returns the
// frames concatenated, and where each ends.
func zstdFrames(t testing.TB, parts ...[]byte) ([]byte, []int) {
	t.Helper()
	enc := testEncoder(t)
	var out []byte
	var ends []int
	for _, p := range parts {
		out = enc.EncodeAll(p, out)
		ends = append(ends, len(out))
	}
	return out, ends
}

// zstdStream compresses b as one streamed frame, as `zstd -c` and the
// exporter's nativeCompression without rotation do (no content size in the
// frame header).
func zstdStream(t testing.TB, b []byte) []byte {
	t.Helper()
	enc := testEncoder(t)
	testZstd.Lock()
	defer testZstd.Unlock()
	var buf bytes.Buffer
	enc.Reset(&buf)
	if _, err := enc.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zstdMessages frames each message as one zstd frame behind its length,
// as the file exporter writes with compression: zstd.
func zstdMessages(t testing.TB, msgs ...[]byte) []byte {
	t.Helper()
	var framed [][]byte
	for _, m := range msgs {
		z, _ := zstdFrames(t, m)
		framed = append(framed, z)
	}
	return frame(framed...)
}

// allocated returns the bytes f allocates (on any goroutine).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Each way of putting JSON lines or length-prefixed protobuf in zstd reads
// as the uncompressed file does; zstd and gzip nest either way.
func TestReadFileZstdLayouts(t *testing.T) {
	lines, spansBefore := jsonLinesOf(t, 4)
	js := bytes.Join(lines, nil)
	var msgs [][]byte
	for i := range 4 {
		msgs = append(msgs, protoOf(t, request(t, fmt.Sprintf("line%d", i), i+1)))
	}
	pb := frame(msgs...)
	perLine, _ := zstdFrames(t, lines...)
	// With rotation the exporter compresses each Write: a request, then
	// its newline.
	var writes [][]byte
	for _, l := range lines {
		writes = append(writes, l[:len(l)-1], []byte("\n"))
	}
	perWrite, _ := zstdFrames(t, writes...)
	perMsg, _ := zstdFrames(t, bytes.SplitAfter(pb, nil)...) // one byte per frame
	jsonMsgs := make([][]byte, len(lines))
	for i, l := range lines {
		jsonMsgs[i] = bytes.TrimSuffix(l, []byte("\n"))
	}
	// pzstd puts a skippable frame before each frame.
	skippable := append([]byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4}, zstdStream(t, js)...)
	for name, data := range map[string][]byte{
		"stream of lines":         zstdStream(t, js),
		"frame per line":          perLine,
		"frame per write":         perWrite,
		"stream of messages":      zstdStream(t, pb),
		"frame per byte":          perMsg,
		"zstd messages":           zstdMessages(t, msgs...),
		"zstd JSON messages":      zstdMessages(t, jsonMsgs...),
		"gzip in zstd":            zstdStream(t, gz(t, js)),
		"zstd in gzip":            gz(t, zstdStream(t, js)),
		"zstd messages in gzip":   gz(t, zstdMessages(t, msgs...)),
		"zstd messages in zstd":   zstdStream(t, zstdMessages(t, msgs...)),
		"skippable frames":        skippable,
		"skippable frame at end":  append(zstdStream(t, js), 0x5f, 0x2a, 0x4d, 0x18, 0, 0, 0, 0),
		"empty frame then stream": append(zstdStream(t, nil), zstdStream(t, js)...),
	} {
		for _, workers := range []int{1, 3} {
			d := NewDecoder(DecoderConfig{})
			d.Workers = workers
			res := readAll(t, d, "x", data)
			if res.err != nil || len(res.bad) != 0 {
				t.Fatalf("%s: %v %v", name, res.err, res.bad)
			}
			if res.stats.Requests != 4 || res.stats.Spans != spansBefore[4] || res.stats.Bytes != int64(len(data)) {
				t.Fatalf("%s, workers=%d: %+v", name, workers, res.stats)
			}
			if workers == 1 {
				wantNames(t, res, []string{"line0-0"}, []string{"line1-0", "line1-1"},
					[]string{"line2-0", "line2-1", "line2-2"}, []string{"line3-0", "line3-1", "line3-2", "line3-3"})
			}
		}
	}
	// Three layers are one too many.
	res := readAll(t, NewDecoder(DecoderConfig{}), "z", zstdStream(t, gz(t, zstdStream(t, js))))
	if want := "z: more than 2 nested compression layers (gzip, zstd)"; res.err == nil || res.err.Error() != want || !errors.Is(res.err, ErrFormat) {
		t.Fatalf("three layers: %v", res.err)
	}
}

// A zstd stream cut anywhere keeps every line whose frame was complete and
// says it is truncated, after how many lines.
func TestReadFileZstdTruncated(t *testing.T) {
	const n = 4
	lines, spansBefore := jsonLinesOf(t, n)
	stream, ends := zstdFrames(t, lines...)
	for at := 4; at < len(stream); at += 7 {
		complete := 0
		for complete < n && ends[complete] <= at {
			complete++
		}
		res := readAll(t, NewDecoder(DecoderConfig{}), "x.jsonl.zst", stream[:at])
		if res.stats.Requests != complete || res.stats.Spans != spansBefore[complete] || len(res.bad) != 0 {
			t.Fatalf("cut at %d: %+v, bad %v; want %d lines", at, res.stats, res.bad, complete)
		}
		if complete > 0 && at == ends[complete-1] {
			if res.err != nil {
				t.Fatalf("cut at a frame's end %d: %v", at, res.err)
			}
			continue
		}
		where := "after " + plural(complete, "line")
		if complete == 0 {
			// sniff's peek meets the cut: no frame's block came whole
			// (one block each, whose output the decoder gives only with
			// its checksum).
			where = "before any data"
		}
		want := "x.jsonl.zst: zstd stream truncated " + where + " (the file may still be being written)"
		if res.err == nil || res.err.Error() != want || !errors.Is(res.err, ErrTruncated) {
			t.Fatalf("cut at %d: %v\nwant %s", at, res.err, want)
		}
	}
	// Length-prefixed protobuf in a zstd stream (a frame per message, as
	// with rotation): the cut is the stream's.
	pb := frame(protoOf(t, request(t, "a", 2)))
	z, ends := zstdFrames(t, pb, pb, pb)
	res := readAll(t, NewDecoder(DecoderConfig{}), "x.pb.zst", z[:ends[1]+5])
	if want := "x.pb.zst: zstd stream truncated in message 3 (2 messages read; the file may still be being written)"; res.err == nil || res.err.Error() != want || res.stats.Spans != 4 {
		t.Fatalf("framed: %v %+v", res.err, res.stats)
	}
}

// Junk after the last frame is counted and ignored; one to three bytes look
// like the start of a frame cut short.
func TestReadFileZstdTrailingData(t *testing.T) {
	lines, spansBefore := jsonLinesOf(t, 3)
	z, _ := zstdFrames(t, lines...)
	for _, tt := range []struct {
		name string
		data []byte
		want string
		kind error
	}{
		{"123 bytes of junk", append(append([]byte{}, z...), bytes.Repeat([]byte("junk!"), 25)[:123]...),
			"t.zst: 123 bytes of trailing data after the zstd stream: ignored", ErrTrailingData},
		{"zero padding", append(append([]byte{}, z...), make([]byte, 4096)...),
			"t.zst: 4096 bytes of trailing data after the zstd stream: ignored", ErrTrailingData},
		{"a gzip member", append(append([]byte{}, z...), gz(t, lines[0])...),
			fmt.Sprintf("t.zst: %d bytes of trailing data after the zstd stream: ignored", len(gz(t, lines[0]))), ErrTrailingData},
		{"inner layer", gz(t, append(append([]byte{}, z...), "tail"...)),
			"t.zst: 4 bytes of trailing data after the zstd stream: ignored", ErrTrailingData},
		{"two bytes of a magic number", append(append([]byte{}, z...), 0x28, 0xb5),
			"t.zst: zstd stream truncated after 3 lines (the file may still be being written)", ErrTruncated},
	} {
		res := readAll(t, NewDecoder(DecoderConfig{}), "t.zst", tt.data)
		if res.err == nil || res.err.Error() != tt.want || !errors.Is(res.err, tt.kind) {
			t.Errorf("%s: %v\nwant %s", tt.name, res.err, tt.want)
		}
		if res.stats.Requests != 3 || res.stats.Spans != spansBefore[3] || len(res.bad) != 0 {
			t.Errorf("%s: stats %+v, bad %v", tt.name, res.stats, res.bad)
		}
	}
}

// A damaged frame stops the stream with ErrCorrupt; the lines of the frames
// before it are kept.
func TestReadFileZstdCorrupt(t *testing.T) {
	lines, spansBefore := jsonLinesOf(t, 4)
	z, ends := zstdFrames(t, lines...)
	for _, tt := range []struct {
		name string
		at   int // the byte flipped
	}{
		{"in the third frame's block", ends[1] + (ends[2]-ends[1])/2},
		{"the third frame's checksum", ends[2] - 2},
	} {
		bad := append([]byte{}, z...)
		bad[tt.at] ^= 0xff
		res := readAll(t, NewDecoder(DecoderConfig{}), "c.zst", bad)
		if res.err == nil || !strings.HasPrefix(res.err.Error(), "c.zst: zstd stream corrupt after 2 lines: ") || !errors.Is(res.err, ErrCorrupt) {
			t.Errorf("%s: %v", tt.name, res.err)
		}
		if res.stats.Requests != 2 || res.stats.Spans != spansBefore[2] {
			t.Errorf("%s: %+v", tt.name, res.stats)
		}
	}
}

// windowFrame is a zstd frame header asking for a 2^log-byte window,
// followed by a raw block of "{}\n".
func windowFrame(log int) []byte {
	// Frame_Header_Descriptor 0: no content size, not single-segment, so a
	// Window_Descriptor follows: exponent log-10, no mantissa.
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte(log-10) << 3}
	// Last raw block of 3 bytes: 1 | 0<<1 | 3<<3.
	return append(b, 0x19, 0, 0, '{', '}', '\n')
}

// A frame that asks for a window over MaxZstdWindow is refused before the
// window is allocated; the lines before it are kept.
func TestReadFileZstdWindowLimit(t *testing.T) {
	if res := readAll(t, NewDecoder(DecoderConfig{}), "ok.zst", windowFrame(27)); res.err != nil || res.stats.Requests != 1 {
		t.Fatalf("a 128 MiB window: %v %+v", res.err, res.stats)
	}
	lines, spansBefore := jsonLinesOf(t, 2)
	z, _ := zstdFrames(t, lines...)
	var res readResult
	n := allocated(func() {
		res = readAll(t, NewDecoder(DecoderConfig{}), "w.zst", append(z, windowFrame(28)...))
	})
	want := "w.zst: zstd stream refused after 2 lines: a frame needs a window over 128 MiB, the limit (decompress it first: zstd -d --memory=SIZE): "
	if res.err == nil || !strings.HasPrefix(res.err.Error(), want) || !errors.Is(res.err, ErrLimit) {
		t.Fatalf("%v\nwant %s...", res.err, want)
	}
	if res.stats.Requests != 2 || res.stats.Spans != spansBefore[2] {
		t.Fatalf("%+v", res.stats)
	}
	if n > 32<<20 {
		t.Fatalf("allocated %d MiB for a refused 256 MiB window", n>>20)
	}
}

// A message of the exporter's per-message compression that does not
// decompress, or decompresses to more than the limit, is a bad message:
// skipped, reported, and the messages after it are read. Neither costs
// more memory than the limit; a declared size the frame cannot hold costs
// none.
func TestReadFileZstdMessagesBad(t *testing.T) {
	defer func(old int) { maxLineSize = old }(maxLineSize)
	maxLineSize = 1 << 20
	good := protoOf(t, request(t, "a", 2))
	goodZ, _ := zstdFrames(t, good)

	big := bytes.Repeat([]byte{0x0a, 0x00}, 1<<20) // 2 MiB of empty resource_spans
	bigDeclared, _ := zstdFrames(t, big)
	bigStreamed := zstdStream(t, big)
	var h zstd.Header
	if err := h.Decode(bigStreamed); err != nil || h.HasFCS {
		t.Fatalf("the streamed frame should not declare its size: %+v %v", h, err)
	}
	cut := goodZ[:len(goodZ)-6]

	for _, tt := range []struct {
		name string
		msg  []byte
		want string
		kind error
	}{
		{"declared too large", bigDeclared,
			"z.bin: message 2: zstd-compressed message of 2097152 bytes decompressed, more than 1048576: skipped", ErrLimit},
		{"streamed too large", bigStreamed,
			"z.bin: message 2: zstd-compressed message larger than 1048576 bytes decompressed: skipped", ErrLimit},
		{"frame cut", cut,
			"z.bin: message 2: invalid zstd-compressed message: ", nil},
		{"not a frame after the magic", []byte{0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff},
			"z.bin: message 2: invalid zstd-compressed message: ", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := frame(goodZ, tt.msg, goodZ)
			for _, workers := range []int{1, 2} {
				d := NewDecoder(DecoderConfig{})
				d.Workers = workers
				var res readResult
				n := allocated(func() { res = readAll(t, d, "z.bin", file) })
				if res.err != nil || res.stats.Requests != 2 || res.stats.Spans != 4 || len(res.bad) != 1 {
					t.Fatalf("workers=%d: %v %+v %v", workers, res.err, res.stats, res.bad)
				}
				if got := res.bad[0].Error(); !strings.HasPrefix(got, tt.want) || (tt.kind != nil && !errors.Is(res.bad[0], tt.kind)) {
					t.Fatalf("workers=%d: %v\nwant %s", workers, got, tt.want)
				}
				if n > 8<<20 {
					t.Fatalf("workers=%d: allocated %d MiB", workers, n>>20)
				}
			}
		})
	}
}

// A frame that declares a size under MaxRequestSize that its bytes cannot
// hold is refused without allocating that size.
func TestReadFileZstdMessageLyingSize(t *testing.T) {
	good, _ := zstdFrames(t, protoOf(t, request(t, "a", 2)))
	// A single-segment frame declaring 200 MiB that holds one RLE block of
	// 10 bytes.
	liar := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}
	liar = append(liar, 0, 0, 0, 0x0c, 0, 0, 0, 0) // 200 MiB, little-endian
	liar = append(liar, 0x53, 0, 0, 'x')           // last RLE block of 10
	var res readResult
	n := allocated(func() { res = readAll(t, NewDecoder(DecoderConfig{}), "z.bin", frame(good, liar, good)) })
	want := "z.bin: message 2: invalid zstd-compressed message: the frame declares 201326592 bytes, more than 17 compressed bytes can hold"
	if res.err != nil || res.stats.Requests != 2 || len(res.bad) != 1 || res.bad[0].Error() != want {
		t.Fatalf("%v %+v %v\nwant %s", res.err, res.stats, res.bad, want)
	}
	if n > 8<<20 {
		t.Fatalf("allocated %d MiB", n>>20)
	}
}
