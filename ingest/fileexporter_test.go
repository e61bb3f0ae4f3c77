package ingest

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// exporterFixture is one file of testdata/fileexporter (see its README):
// what the collector's file exporter (or the zstd CLI) wrote, and how it is
// laid out, as its configuration says — which refRead decodes without any
// of ReadFile's detection.
type exporterFixture struct {
	file    string
	stream  string // "", "gzip" or "zstd": a compression layer around the whole file
	framed  bool   // 4-byte big-endian length-prefixed messages, else JSON lines
	msgZstd bool   // each message one zstd frame
	json    bool   // messages are OTLP JSON, else protobuf
	// frames is how many zstd frames the stream has at least (a flush or a
	// write each), skippable says some are skippable (pzstd).
	frames    int
	skippable bool
}

const fixtureDir = "testdata/fileexporter"

// exporterFixtures are the file exporter's format × compression
// combinations, each the real exporter's output (the README says how they
// were made).
var exporterFixtures = []exporterFixture{
	{file: "json.jsonl", json: true},                                            // format: json
	{file: "proto.binpb", framed: true},                                         // format: proto
	{file: "json-zstd.bin", framed: true, msgZstd: true, json: true},            // format: json, compression: zstd
	{file: "proto-zstd.bin", framed: true, msgZstd: true},                       // format: proto, compression: zstd
	{file: "native-json-zstd.jsonl.zst", stream: "zstd", json: true, frames: 3}, // nativeCompression gate, flush_interval 10ms
	{file: "native-json-zstd-rotation.jsonl.zst", stream: "zstd", json: true, frames: 2},
	{file: "native-proto-zstd.binpb.zst", stream: "zstd", framed: true, frames: 1}, // compression_params level 11
	{file: "native-proto-zstd-rotation.binpb.zst", stream: "zstd", framed: true, frames: 2},
	{file: "zstd-cli.jsonl.zst", stream: "zstd", json: true, frames: 1},                     // zstd -19 -c json.jsonl
	{file: "pzstd-cli.binpb.zst", stream: "zstd", framed: true, frames: 1, skippable: true}, // pzstd -c proto.binpb
}

// refRead decodes a fixture with pdata (and compress/gzip, klauspost zstd)
// by the layout f states: the independent reference for ReadFile.
func refRead(t *testing.T, f exporterFixture) []ptrace.Traces {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir, f.file))
	if err != nil {
		t.Fatal(err)
	}
	data := raw
	switch f.stream {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
		checkFrames(t, f, raw)
	}
	var msgs [][]byte
	if f.framed {
		for len(data) > 0 {
			n := binary.BigEndian.Uint32(data)
			msgs = append(msgs, data[4:4+n])
			data = data[4+n:]
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if len(sc.Bytes()) > 0 {
				msgs = append(msgs, slices.Clone(sc.Bytes()))
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var out []ptrace.Traces
	for i, m := range msgs {
		if f.msgZstd {
			if !bytes.HasPrefix(m, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
				t.Fatalf("%s: message %d is not a zstd frame", f.file, i+1)
			}
			zd, _ := zstd.NewReader(nil)
			var err error
			m, err = zd.DecodeAll(m, nil)
			zd.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		var td ptrace.Traces
		if f.json {
			td, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(m)
		} else {
			td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(m)
		}
		if err != nil {
			t.Fatalf("%s: message %d: %v", f.file, i+1, err)
		}
		out = append(out, td)
	}
	return out
}

// checkFrames checks that a zstd fixture has the frames it should (so a
// regenerated fixture that changed shape is noticed): at least f.frames
// zstd frames, skippable ones if f.skippable.
func checkFrames(t *testing.T, f exporterFixture, b []byte) {
	t.Helper()
	frames, skippable := 0, 0
	for off := 0; off < len(b); {
		if b[off] == 0x28 {
			frames++
		}
		if b[off]&0xf0 == 0x50 {
			skippable++
			off += 8 + int(binary.LittleEndian.Uint32(b[off+4:]))
			continue
		}
		// Walk the frame's blocks to its end.
		var h zstd.Header
		if err := h.Decode(b[off:]); err != nil {
			t.Fatalf("%s: frame at %d: %v", f.file, off, err)
		}
		off += h.HeaderSize
		for {
			bh := uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16
			size := int(bh >> 3)
			if (bh>>1)&3 == 1 { // RLE: one byte
				size = 1
			}
			off += 3 + size
			if bh&1 == 1 {
				break
			}
		}
		if h.HasCheckSum {
			off += 4
		}
	}
	if frames < f.frames || (skippable > 0) != f.skippable {
		t.Fatalf("%s: %d zstd frames, %d skippable; want at least %d (skippable: %v)", f.file, frames, skippable, f.frames, f.skippable)
	}
}

// sortedSpans sorts spans by trace and span id.
func sortedSpans(s []graph.Span) []graph.Span {
	slices.SortFunc(s, func(a, b graph.Span) int {
		if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
			return c
		}
		if c := bytes.Compare(a.SpanID[:], b.SpanID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.Start, b.Start)
	})
	return s
}

// readFixture reads a fixture with ReadFile, on workers goroutines.
func readFixture(t *testing.T, file string, workers int) ([]graph.Span, FileStats) {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtureDir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := NewDecoder(DecoderConfig{})
	d.Workers = workers
	var spans []graph.Span
	st, err := d.ReadFile(f, file, func(s []graph.Span) error {
		spans = append(spans, s...)
		return nil
	}, func(err error) { t.Errorf("bad request: %v", err) })
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return sortedSpans(spans), st
}

// TestReadFileExporterFixtures: every format and compression the
// collector's file exporter writes is read, detected from its bytes, with
// the spans pdata finds in it (decoded by the layout its configuration
// states), and the same spans as the reference: the same requests as OTLP
// JSON lines written by pdata.
func TestReadFileExporterFixtures(t *testing.T) {
	input := exporterFixture{file: "input.jsonl.gz", stream: "gzip", json: true}
	var want []graph.Span
	wantCount := 0
	ref := NewDecoder(DecoderConfig{})
	for _, td := range refRead(t, input) {
		want = ref.AppendTraces(want, td)
		wantCount += td.SpanCount()
	}
	want = sortedSpans(want)
	if wantCount < 200 || len(want) != wantCount {
		t.Fatalf("reference: %d spans, pdata counts %d", len(want), wantCount)
	}
	if got, _ := readFixture(t, input.file, 1); !slices.Equal(got, want) {
		t.Fatal("ReadFile of the reference differs from pdata's spans")
	}
	for _, f := range exporterFixtures {
		t.Run(f.file, func(t *testing.T) {
			// pdata on the fixture, by its stated layout.
			d := NewDecoder(DecoderConfig{})
			var pd []graph.Span
			count := 0
			for _, td := range refRead(t, f) {
				pd = d.AppendTraces(pd, td)
				count += td.SpanCount()
			}
			if count != wantCount {
				t.Fatalf("pdata counts %d spans in the fixture, %d in the reference", count, wantCount)
			}
			for _, workers := range []int{1, 2} {
				got, st := readFixture(t, f.file, workers)
				if st.Spans != count || len(got) != count || st.BadRequests != 0 {
					t.Fatalf("workers=%d: %d spans (stats %+v), pdata counts %d", workers, len(got), st, count)
				}
				if !slices.Equal(got, sortedSpans(slices.Clone(pd))) {
					t.Fatalf("workers=%d: spans differ from pdata's", workers)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("workers=%d: spans differ from the reference's", workers)
				}
			}
		})
	}
	// group_by (resource attribute service.name): one file per service,
	// format proto, compression zstd; together, the reference.
	files, err := filepath.Glob(filepath.Join(fixtureDir, "groupby", "*.bin"))
	if err != nil || len(files) != 4 {
		t.Fatalf("group_by files: %v %v", files, err)
	}
	var all []graph.Span
	for _, file := range files {
		rel, _ := filepath.Rel(fixtureDir, file)
		f := exporterFixture{file: rel, framed: true, msgZstd: true}
		got, st := readFixture(t, rel, 1)
		count := 0
		for _, td := range refRead(t, f) {
			count += td.SpanCount()
		}
		if st.Spans != count {
			t.Fatalf("%s: %d spans, pdata counts %d", rel, st.Spans, count)
		}
		for _, s := range got {
			if s.Service+".bin" != filepath.Base(file) {
				t.Fatalf("%s holds a span of %s", rel, s.Service)
			}
		}
		all = append(all, got...)
	}
	if !slices.Equal(sortedSpans(all), want) {
		t.Fatal("group_by files: spans differ from the reference's")
	}
}
