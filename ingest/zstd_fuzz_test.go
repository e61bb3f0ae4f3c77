package ingest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/graph"
)

// fileRead is what one ReadFile call gave, for comparing two.
type fileRead struct {
	spans []graph.Span
	bad   []string
	stats FileStats
	err   string
}

func readFileAll(t *testing.T, name string, b []byte) fileRead {
	t.Helper()
	var r fileRead
	d := NewDecoder(DecoderConfig{})
	st, err := d.ReadFile(bytes.NewReader(b), name, func(spans []graph.Span) error {
		checkSpans(t, spans)
		r.spans = append(r.spans, spans...)
		return nil
	}, func(err error) {
		if !strings.HasPrefix(err.Error(), name) {
			t.Fatalf("bad request error does not name the file: %v", err)
		}
		r.bad = append(r.bad, err.Error())
	})
	if err != nil {
		r.err = err.Error()
		if !strings.HasPrefix(r.err, name+": ") {
			t.Fatalf("error does not name the file: %v", err)
		}
	} else if st.Bytes != int64(len(b)) {
		t.Fatalf("read %d of %d bytes without error", st.Bytes, len(b))
	}
	if st.Spans != len(r.spans) || st.BadRequests != len(r.bad) || st.NotTraces > st.BadRequests {
		t.Fatalf("stats %+v for %d spans, %d bad", st, len(r.spans), len(r.bad))
	}
	r.stats = st
	return r
}

// sameRead reports whether two reads of the same content gave the same
// requests, spans, bad requests and error (all but the bytes read).
func sameRead(a, b fileRead) bool {
	a.stats.Bytes, b.stats.Bytes = 0, 0
	return a.stats == b.stats && a.err == b.err && slices.Equal(a.spans, b.spans) && slices.Equal(a.bad, b.bad)
}

// splitFramed returns the messages of b when ReadFile reads it as a
// length-prefixed stream that splits exactly into messages, none of them
// zstd (which the stream would decompress once more).
func splitFramed(b []byte) ([][]byte, bool) {
	if len(b) == 0 || b[0] >= 0x10 || b[0] == 0x0a || !framedExactly(b) {
		return nil, false
	}
	var msgs [][]byte
	for len(b) > 0 {
		n := binary.BigEndian.Uint32(b)
		m := b[4 : 4+n]
		if isZstd(m) {
			return nil, false
		}
		msgs = append(msgs, m)
		b = b[4+n:]
	}
	return msgs, true
}

// FuzzReadFileZstd holds the zstd layers to being transparent: a file reads
// the same (spans, bad requests with their errors, counts, and the error
// that ends it) as the whole file compressed as a zstd stream, as a frame
// per 64 bytes (the exporter's rotation mode), and, when it is a
// length-prefixed stream, with each message compressed as a zstd frame
// (the exporter's compression: zstd).
func FuzzReadFileZstd(f *testing.F) {
	for _, td := range fuzzSeeds(f) {
		pb, js := protoOf(f, td), jsonOf(f, td)
		f.Add(frame(pb, pb))
		f.Add(frame(js, pb, nil))
		f.Add(append(append(append([]byte{}, js...), '\n'), js...))
	}
	js := jsonOf(f, benchTraces(1))
	pb := protoOf(f, benchTraces(1))
	f.Add(frame(pb, pb, pb)[:len(frame(pb, pb, pb))-7])
	f.Add(frame(pb, []byte("\x0a\xff\xff garbage"), pb))
	f.Add(append(append([]byte{}, js...), "\n{\"resourceSpans\": [nope\n"...))
	f.Add([]byte("{\n  \"resourceSpans\": [\n    {}\n  ]\n}\n{\n}\n"))
	f.Add(pb)
	f.Add([]byte{})
	for _, b := range jsonSeeds() {
		f.Add(append(b, '\n'))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		plain := readFileAll(t, "f", b)
		if len(b) >= 2 && (b[0] == 0x1f && b[1] == 0x8b || isZstd(b)) {
			return // a compressed file: one more layer changes its nesting
		}
		var chunks [][]byte
		for rest := b; len(rest) > 0; rest = rest[min(64, len(rest)):] {
			chunks = append(chunks, rest[:min(64, len(rest))])
		}
		perChunk, _ := zstdFrames(t, chunks...)
		for name, z := range map[string][]byte{"stream": zstdStream(t, b), "frame per 64 bytes": perChunk} {
			if got := readFileAll(t, "f", z); !sameRead(plain, got) {
				t.Fatalf("%s: zstd read differs:\n%+v\nplain:\n%+v", name, got, plain)
			}
		}
		if msgs, ok := splitFramed(b); ok {
			if got := readFileAll(t, "f", zstdMessages(t, msgs...)); !sameRead(plain, got) {
				t.Fatalf("zstd messages read differs:\n%+v\nplain:\n%+v", got, plain)
			}
		}
	})
}

// FuzzReadFileZstdBytes mutates zstd files themselves (the exporter's, cut
// and damaged ones, frames with odd headers): whatever the bytes, ReadFile
// does not panic, names the file in every error, keeps its counts
// consistent, and allocates within its limits (lowered here: a 1 MiB
// window and message).
func FuzzReadFileZstdBytes(f *testing.F) {
	for _, name := range []string{"json-zstd.bin", "native-json-zstd-rotation.jsonl.zst", "native-proto-zstd.binpb.zst", "pzstd-cli.binpb.zst"} {
		b, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 4096)])
	}
	lines, _ := jsonLinesOf(f, 3)
	z, ends := zstdFrames(f, lines...)
	f.Add(z)
	f.Add(z[:ends[1]+9])
	f.Add(append(append([]byte{}, z...), "junk"...))
	corrupt := append([]byte{}, z...)
	corrupt[ends[0]+20] ^= 0x40
	f.Add(corrupt)
	pb := protoOf(f, request(f, "a", 2))
	f.Add(zstdMessages(f, pb, pb))
	f.Add(zstdMessages(f, bytes.Repeat([]byte{0x0a, 0}, 1<<19), pb)) // decompresses past the limit
	f.Add(zstdStream(f, zstdMessages(f, pb)))
	f.Add(windowFrame(21))
	f.Add(windowFrame(27))
	f.Add(frame([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x0c, 0, 0, 0, 0, 0x53, 0, 0, 'x'}))
	f.Add([]byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		defer func(line int, window uint64) { maxLineSize, zstdWindow = line, window }(maxLineSize, zstdWindow)
		maxLineSize, zstdWindow = 1<<20, 1<<20
		var r fileRead
		n := allocated(func() { r = readFileAll(t, "z", b) })
		// Read buffers, one window, one message decompressed, the
		// requests' spans: far less than this, whatever the input.
		if limit := uint64(48<<20 + 64*len(b)); n > limit {
			t.Fatalf("allocated %d MiB for %d bytes (%+v, %s)", n>>20, len(b), r.stats, r.err)
		}
	})
}
