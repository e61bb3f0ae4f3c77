package ingest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// gzFlushed gzips parts, flushing the compressor after each, and returns the
// stream with the offset where each part's data is complete: a stream cut
// there inflates to exactly the parts before the cut, and one byte further
// to no more (a block's first byte holds no data).
func gzFlushed(t testing.TB, parts ...[]byte) (stream []byte, ends []int) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, buf.Len())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), ends
}

// jsonLinesOf returns n JSON lines, line i (from 0) holding i+1 spans, and
// the number of spans in the first k lines for each k.
func jsonLinesOf(t testing.TB, n int) (lines [][]byte, spansBefore []int) {
	spansBefore = []int{0}
	for i := range n {
		lines = append(lines, append(jsonOf(t, request(t, fmt.Sprintf("line%d", i), i+1)), '\n'))
		spansBefore = append(spansBefore, spansBefore[i]+i+1)
	}
	return lines, spansBefore
}

func TestReadFileTruncatedGzipJSON(t *testing.T) {
	const n = 5
	lines, spansBefore := jsonLinesOf(t, n)
	stream, ends := gzFlushed(t, lines...)
	type cut struct {
		at    int
		lines int // complete lines in what is left
	}
	cuts := []cut{
		{len(stream) - 4, n},
		{len(stream) - 8, n}, // just the 8-byte trailer missing
	}
	for k := range n {
		cuts = append(cuts, cut{ends[k], k + 1}, cut{ends[k] + 1, k + 1})
	}
	for _, c := range cuts {
		res := readAll(t, NewDecoder(DecoderConfig{}), "traces.jsonl.gz", stream[:c.at])
		want := fmt.Sprintf("traces.jsonl.gz: gzip stream truncated after %s (the file may still be being written)", plural(c.lines, "line"))
		if res.err == nil || res.err.Error() != want {
			t.Errorf("cut at %d: err %v, want %s", c.at, res.err, want)
		}
		if !errors.Is(res.err, ErrTruncated) || !errors.Is(res.err, io.ErrUnexpectedEOF) || errors.Is(res.err, ErrFormat) {
			t.Errorf("cut at %d: %v is not just ErrTruncated", c.at, res.err)
		}
		if res.stats.Requests != c.lines || res.stats.Spans != spansBefore[c.lines] || len(res.bad) != 0 {
			t.Errorf("cut at %d: stats %+v, bad %v; want %d requests, %d spans", c.at, res.stats, res.bad, c.lines, spansBefore[c.lines])
		}
	}
	// A cut inside the gzip header, and right after it.
	res := readAll(t, NewDecoder(DecoderConfig{}), "traces.jsonl.gz", stream[:5])
	if want := "traces.jsonl.gz: gzip stream truncated in its header (the file may still be being written)"; res.err == nil || res.err.Error() != want {
		t.Errorf("cut in the header: %v", res.err)
	}
	res = readAll(t, NewDecoder(DecoderConfig{}), "traces.jsonl.gz", stream[:10])
	if want := "traces.jsonl.gz: gzip stream truncated before any data (the file may still be being written)"; res.err == nil || res.err.Error() != want || !errors.Is(res.err, ErrTruncated) {
		t.Errorf("cut after the header: %v", res.err)
	}
	// A cut in the middle of line 3's data, checked against compress/gzip
	// so that the premise does not rest on deflate's internals.
	mid := (ends[1] + ends[2]) / 2
	if got := gunzipLines(t, stream[:mid]); got != 2 {
		t.Fatalf("test premise: %d lines before byte %d", got, mid)
	}
	res = readAll(t, NewDecoder(DecoderConfig{}), "traces.jsonl.gz", stream[:mid])
	if !errors.Is(res.err, ErrTruncated) || res.stats.Requests != 2 || res.stats.Spans != spansBefore[2] || !strings.Contains(res.err.Error(), "after 2 lines") {
		t.Errorf("cut in line 3: %v %+v", res.err, res.stats)
	}
}

// gunzipLines counts the complete lines compress/gzip inflates from a
// truncated stream.
func gunzipLines(t *testing.T, b []byte) int {
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(z)
	return bytes.Count(out, []byte{'\n'})
}

func TestReadFileTruncatedFramed(t *testing.T) {
	var msgs [][]byte
	for i := range 5 {
		msgs = append(msgs, protoOf(t, request(t, fmt.Sprintf("m%d", i), i+1)))
	}
	// Spans in messages 1..3: 1+2+3.
	const spans3 = 6
	whole := frame(msgs...)
	start4 := len(frame(msgs[:3]...)) // where message 4's length prefix starts
	size4 := len(msgs[3])
	tests := []struct {
		at   int
		want string
	}{
		{start4 + 1, "x.pb: length-prefixed stream truncated in message 4 (3 messages read, then 1 of its 4 length bytes; the file may still be being written)"},
		{start4 + 3, "x.pb: length-prefixed stream truncated in message 4 (3 messages read, then 3 of its 4 length bytes; the file may still be being written)"},
		{start4 + 4, fmt.Sprintf("x.pb: length-prefixed stream truncated in message 4 (3 messages read, then 0 of its %d bytes; the file may still be being written)", size4)},
		{start4 + 4 + size4/2, fmt.Sprintf("x.pb: length-prefixed stream truncated in message 4 (3 messages read, then %d of its %d bytes; the file may still be being written)", size4/2, size4)},
		{start4 + 4 + size4 - 1, fmt.Sprintf("x.pb: length-prefixed stream truncated in message 4 (3 messages read, then %d of its %d bytes; the file may still be being written)", size4-1, size4)},
	}
	for _, tt := range tests {
		res := readAll(t, NewDecoder(DecoderConfig{}), "x.pb", whole[:tt.at])
		if res.err == nil || res.err.Error() != tt.want || !errors.Is(res.err, ErrTruncated) {
			t.Errorf("cut at %d: %v\nwant %s", tt.at, res.err, tt.want)
		}
		if res.stats.Requests != 3 || res.stats.Spans != spans3 {
			t.Errorf("cut at %d: stats %+v", tt.at, res.stats)
		}
	}
	// Gzipped, cut where message 3 ends and one byte later.
	stream, ends := gzFlushed(t, frame(msgs[0]), frame(msgs[1]), frame(msgs[2]), frame(msgs[3]), frame(msgs[4]))
	for _, at := range []int{ends[2], ends[2] + 1} {
		res := readAll(t, NewDecoder(DecoderConfig{}), "x.pb.gz", stream[:at])
		want := "x.pb.gz: gzip stream truncated in message 4 (3 messages read; the file may still be being written)"
		if res.err == nil || res.err.Error() != want || !errors.Is(res.err, ErrTruncated) {
			t.Errorf("gzip cut at %d: %v", at, res.err)
		}
		if res.stats.Requests != 3 || res.stats.Spans != spans3 {
			t.Errorf("gzip cut at %d: stats %+v", at, res.stats)
		}
	}
}

func TestReadFileTruncatedRawGzip(t *testing.T) {
	pb := protoOf(t, request(t, "a", 3))
	stream, ends := gzFlushed(t, pb[:10], pb[10:])
	res := readAll(t, NewDecoder(DecoderConfig{}), "req.pb.gz", stream[:ends[0]])
	want := "req.pb.gz: gzip stream truncated after 10 bytes (the file may still be being written)"
	if res.err == nil || res.err.Error() != want || !errors.Is(res.err, ErrTruncated) || res.stats.Requests != 0 {
		t.Fatalf("%v %+v", res.err, res.stats)
	}
}

func TestReadFileTruncatedJSON(t *testing.T) {
	lines, spansBefore := jsonLinesOf(t, 4)
	three := bytes.Join(lines[:3], nil)
	line4 := bytes.TrimSuffix(lines[3], []byte{'\n'})

	// Cut in the middle of line 4: the file ends inside a request.
	res := readAll(t, NewDecoder(DecoderConfig{}), "x.jsonl", append(append([]byte{}, three...), line4[:len(line4)/2]...))
	want := "x.jsonl: file truncated in the JSON request on line 4 (after 3 complete lines; the file may still be being written)"
	if res.err == nil || res.err.Error() != want || !errors.Is(res.err, ErrTruncated) {
		t.Errorf("cut in line 4: %v", res.err)
	}
	if res.stats.Requests != 3 || res.stats.Spans != spansBefore[3] || len(res.bad) != 0 {
		t.Errorf("cut in line 4: %+v %v", res.stats, res.bad)
	}

	// Line 4 complete but for its newline: decoded.
	res = readAll(t, NewDecoder(DecoderConfig{}), "x.jsonl", append(append([]byte{}, three...), line4...))
	if res.err != nil || res.stats.Requests != 4 || res.stats.Spans != spansBefore[4] {
		t.Errorf("line 4 without newline: %v %+v", res.err, res.stats)
	}

	// A whole line that leaves brackets open is a bad line, not a
	// truncation: the writer ended the line.
	open := "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[\n"
	res = readAll(t, NewDecoder(DecoderConfig{}), "x.jsonl", append(append([]byte{}, three...), open...))
	if res.err != nil || res.stats.Requests != 3 || len(res.bad) != 1 ||
		res.bad[0].Error() != "x.jsonl:4: invalid OTLP JSON: the request ends with 6 brackets unclosed" {
		t.Errorf("unbalanced last line: %v %+v %v", res.err, res.stats, res.bad)
	}

	// Gzipped, the same cut is the gzip stream's.
	stream, ends := gzFlushed(t, three, line4[:len(line4)/2], line4[len(line4)/2:])
	res = readAll(t, NewDecoder(DecoderConfig{}), "x.jsonl.gz", stream[:ends[1]])
	if want := "x.jsonl.gz: gzip stream truncated after 3 lines (the file may still be being written)"; res.err == nil || res.err.Error() != want {
		t.Errorf("gzip cut in line 4: %v", res.err)
	}
	// Cut after line 4's last byte but before any newline: the request is
	// complete and kept.
	res = readAll(t, NewDecoder(DecoderConfig{}), "x.jsonl.gz", stream[:ends[2]])
	if !errors.Is(res.err, ErrTruncated) || res.stats.Requests != 4 || res.stats.Spans != spansBefore[4] {
		t.Errorf("gzip cut after line 4: %v %+v", res.err, res.stats)
	}
}

func TestReadFileTrailingData(t *testing.T) {
	lines, spansBefore := jsonLinesOf(t, 3)
	js := bytes.Join(lines, nil)
	z := gz(t, js)
	tests := []struct {
		name string
		data []byte
		want string
		kind error
	}{
		{"123 bytes of junk", append(append([]byte{}, z...), bytes.Repeat([]byte("junk!"), 123/5+1)[:123]...),
			"t.gz: 123 bytes of trailing data after the gzip stream: ignored", ErrTrailingData},
		{"1 byte", append(append([]byte{}, z...), '\n'),
			"t.gz: 1 byte of trailing data after the gzip stream: ignored", ErrTrailingData},
		{"zero padding", append(append([]byte{}, z...), make([]byte, 4096)...),
			"t.gz: 4096 bytes of trailing data after the gzip stream: ignored", ErrTrailingData},
		{"inner layer", gz(t, append(append([]byte{}, z...), "tail"...)),
			"t.gz: 4 bytes of trailing data after the gzip stream: ignored", ErrTrailingData},
		{"first byte of a member", append(append([]byte{}, z...), 0x1f),
			"t.gz: gzip stream truncated after 3 lines (the file may still be being written)", ErrTruncated},
		{"a member's header cut", append(append([]byte{}, z...), z[:6]...),
			"t.gz: gzip stream truncated after 3 lines (the file may still be being written)", ErrTruncated},
		{"a bad member header", append(append([]byte{}, z...), 0x1f, 0x8b, 0x07, 0, 0, 0, 0, 0, 0, 0xff),
			"t.gz: gzip stream corrupt after 3 lines: gzip: invalid header", ErrCorrupt},
	}
	for _, tt := range tests {
		res := readAll(t, NewDecoder(DecoderConfig{}), "t.gz", tt.data)
		if res.err == nil || res.err.Error() != tt.want || !errors.Is(res.err, tt.kind) {
			t.Errorf("%s: %v\nwant %s", tt.name, res.err, tt.want)
		}
		if res.stats.Requests != 3 || res.stats.Spans != spansBefore[3] || len(res.bad) != 0 {
			t.Errorf("%s: stats %+v, bad %v", tt.name, res.stats, res.bad)
		}
	}

	// Several members, as cat a.gz b.gz makes: all read, no error.
	res := readAll(t, NewDecoder(DecoderConfig{}), "cat.gz", append(gz(t, bytes.Join(lines[:2], nil)), gz(t, lines[2])...))
	if res.err != nil || res.stats.Requests != 3 || res.stats.Spans != spansBefore[3] {
		t.Errorf("two members: %v %+v", res.err, res.stats)
	}
	// Junk after a length-prefixed stream's gzip too.
	pb := frame(protoOf(t, request(t, "a", 2)))
	res = readAll(t, NewDecoder(DecoderConfig{}), "f.gz", append(gz(t, pb), 0, 0, 0))
	if !errors.Is(res.err, ErrTrailingData) || res.stats.Spans != 2 {
		t.Errorf("framed: %v %+v", res.err, res.stats)
	}
}

func TestReadFileCorruptGzip(t *testing.T) {
	lines, spansBefore := jsonLinesOf(t, 3)
	stream, ends := gzFlushed(t, lines...)
	bad := append([]byte{}, stream...)
	bad[len(bad)-5] ^= 0xff // the CRC-32 in the trailer
	res := readAll(t, NewDecoder(DecoderConfig{}), "c.gz", bad)
	if want := "c.gz: gzip stream corrupt after 3 lines: gzip: invalid checksum"; res.err == nil || res.err.Error() != want || !errors.Is(res.err, ErrCorrupt) {
		t.Errorf("checksum: %v", res.err)
	}
	if res.stats.Requests != 3 || res.stats.Spans != spansBefore[3] {
		t.Errorf("checksum: %+v", res.stats)
	}
	// A reserved block type (11) right after line 1's data.
	bad = append([]byte{}, stream[:ends[0]]...)
	bad = append(bad, 0x07, 0, 0, 0)
	res = readAll(t, NewDecoder(DecoderConfig{}), "c.gz", bad)
	if res.err == nil || !strings.HasPrefix(res.err.Error(), "c.gz: gzip stream corrupt after 1 line: flate: corrupt input before offset") || !errors.Is(res.err, ErrCorrupt) {
		t.Errorf("bad block: %v", res.err)
	}
	if res.stats.Requests != 1 || res.stats.Spans != spansBefore[1] {
		t.Errorf("bad block: %+v", res.stats)
	}
}
