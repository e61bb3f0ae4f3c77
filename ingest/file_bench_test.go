package ingest

import (
	"bytes"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// fileBench is one trace file of BenchmarkReadFileFormats.
type fileBench struct {
	name string
	data []byte
}

// benchFiles builds the file exporter's formats of 40 requests of 255 spans
// each (~10,000 spans): JSON lines, length-prefixed protobuf, gzip, and the
// exporter's zstd (a stream, or each message).
func benchFiles(b *testing.B) ([]fileBench, int) {
	td := benchTraces(17) // 255 spans
	js, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	pb, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	const requests = 40
	var lines []byte
	var msgs [][]byte
	for range requests {
		lines = append(append(lines, js...), '\n')
		msgs = append(msgs, pb)
	}
	var zmsgs [][]byte
	for _, m := range msgs {
		z, _ := zstdFrames(b, m)
		zmsgs = append(zmsgs, z)
	}
	files := []fileBench{
		{"jsonl", lines},
		{"framed", frame(msgs...)},
		{"jsonl.gz", gz(b, lines)},
		{"jsonl.zst", zstdStream(b, lines)},           // nativeCompression, zstd -c
		{"framed.zst", zstdStream(b, frame(msgs...))}, // nativeCompression, format: proto
		{"framed-zstd", frame(zmsgs...)},              // compression: zstd, format: proto
	}
	return files, requests * td.SpanCount()
}

// BenchmarkReadFileFormats reads each format of benchFiles with one
// decoding goroutine and with two (Decoder.Workers), as analyze does on a
// machine with two cores.
func BenchmarkReadFileFormats(b *testing.B) {
	files, spans := benchFiles(b)
	for _, f := range files {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", f.name, workers), func(b *testing.B) {
				b.SetBytes(int64(len(f.data)))
				b.ReportAllocs()
				d := NewDecoder(DecoderConfig{})
				d.Workers = workers
				for b.Loop() {
					st, err := d.ReadFile(bytes.NewReader(f.data), f.name, nil, nil)
					if err != nil || st.Spans != spans {
						b.Fatal(err, st)
					}
				}
				reportSpans(b, spans)
			})
		}
	}
}
