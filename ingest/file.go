package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/stormradius/stormradius/graph"
)

// MaxRequestSize is the largest request ReadFile accepts: one JSON line, one
// length-prefixed message, or a whole raw protobuf file. Longer JSON lines
// are reported as bad and skipped; a longer length prefix makes the file
// unreadable.
const MaxRequestSize = 256 << 20

// maxLineSize is MaxRequestSize, a variable so tests can lower it.
var maxLineSize = MaxRequestSize

const (
	readBufSize   = 256 << 10
	sniffLen      = 4096
	progressEvery = 1 << 20
	maxGzipDepth  = 2
	// Scratch buffers larger than this are dropped after each file.
	keepScratch = 8 << 20
)

// FileStats describes one file read by ReadFile.
type FileStats struct {
	// Bytes is the number of bytes read from the file as given (compressed
	// bytes for a gzip file).
	Bytes int64
	// Requests is the number of requests (JSON lines or protobuf messages)
	// decoded and passed to emit.
	Requests int
	// BadRequests is the number of JSON lines or framed messages rejected
	// (and passed to onBad).
	BadRequests int
	// Spans is the number of spans passed to emit.
	Spans int
}

// ReadFile reads one OTLP trace file, as `stormradius analyze` takes them, and
// calls emit once per decoded request with that request's spans. The slice
// passed to emit is reused after emit returns: emit must copy what it keeps
// (the strings in it are immutable and may be kept). name is used only in
// errors. emit and onBad may be nil.
//
// The format is detected from the content, after an optional gzip layer
// (magic 1f 8b; detected again inside, up to two layers):
//
//   - First byte '{' (after an optional UTF-8 BOM), or a run of whitespace
//     followed by `{"resource` or `{}`: JSON lines, each non-empty line one
//     OTLP/JSON ExportTraceServiceRequest — what the OpenTelemetry
//     Collector's file exporter writes with format: json.
//   - First byte 0x00 (or any byte below 0x10 other than 0x0a): a stream of
//     messages each preceded by its length as a 4-byte big-endian unsigned
//     integer — what the file exporter writes with format: proto (its
//     exportMessageAsBuffer). A message below 16 MiB always has a first
//     length byte of 0x00, and a raw request can never start with a byte
//     below 0x10 other than 0x0a (field 0 or a wrong wire type for field 1).
//     A message whose content is JSON (the exporter frames JSON too when it
//     compresses per message) is decoded as JSON.
//   - First byte 0x0a (field 1, resource_spans, length-delimited): one raw
//     protobuf ExportTraceServiceRequest (or TracesData, same wire format).
//     If it does not decode as one but the file splits exactly into
//     length-prefixed messages (a first message of 160–176 MiB), it is read
//     as a length-prefixed stream.
//   - zstd (magic 28 b5 2f fd), whole-file or per message: not supported,
//     reported as an error that says to decompress the file first.
//
// A JSON line or a length-prefixed message that does not decode is passed to
// onBad as an error naming the file and the line or message number, and
// reading goes on. A file that cannot be read as any of the formats (garbage,
// a truncated gzip stream or message, a length prefix over MaxRequestSize, an
// invalid raw protobuf file) makes ReadFile return an error naming the file;
// requests already emitted stay emitted. An error returned by emit stops
// reading and is returned, wrapped with the file name. An empty file is not
// an error.
func (d *Decoder) ReadFile(r io.Reader, name string, emit func([]graph.Span) error, onBad func(error)) (st FileStats, err error) {
	cr := &countingReader{r: r, progress: d.Progress}
	defer func() {
		st.Bytes = cr.n
		if d.Progress != nil {
			d.Progress(cr.n)
		}
		d.dropScratch()
	}()
	fr := &fileReader{d: d, name: name, emit: emit, onBad: onBad, st: &st}

	src := bufio.NewReaderSize(cr, readBufSize)
	for depth := 0; ; depth++ {
		head, perr := src.Peek(2)
		if perr != nil && perr != io.EOF {
			return st, fmt.Errorf("%s: %w", name, perr)
		}
		if len(head) < 2 || head[0] != 0x1f || head[1] != 0x8b {
			break
		}
		if depth == maxGzipDepth {
			return st, fmt.Errorf("%s: more than %d nested gzip layers", name, maxGzipDepth)
		}
		gz, gerr := gzip.NewReader(src)
		if gerr != nil {
			return st, fmt.Errorf("%s: gzip: %w", name, gerr)
		}
		src = bufio.NewReaderSize(gz, readBufSize)
	}

	f, err := sniff(src)
	if err != nil {
		return st, fmt.Errorf("%s: %w", name, err)
	}
	switch f {
	case formatEmpty:
		return st, nil
	case formatJSON:
		return st, fr.jsonLines(src)
	case formatFramed:
		return st, fr.framed(src)
	case formatRaw:
		return st, fr.raw(src)
	case formatZstd:
		return st, fmt.Errorf("%s: zstd-compressed data is not supported: decompress it first (zstd -d)", name)
	}
	return st, fmt.Errorf("%s: unrecognised format: neither OTLP JSON lines nor OTLP protobuf (raw or length-prefixed)", name)
}

type format uint8

const (
	formatUnknown format = iota
	formatEmpty
	formatJSON
	formatFramed
	formatRaw
	formatZstd
)

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// sniff decides the format from the first bytes of src (see ReadFile). It
// consumes a UTF-8 byte order mark, nothing else.
func sniff(src *bufio.Reader) (format, error) {
	b, err := src.Peek(sniffLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return formatUnknown, err
	}
	if len(b) == 0 {
		return formatEmpty, nil
	}
	if bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}) {
		_, _ = src.Discard(3)
		return formatJSON, nil
	}
	switch c := b[0]; {
	case c == '{':
		return formatJSON, nil
	case bytes.HasPrefix(b, zstdMagic):
		return formatZstd, nil
	case isSpace(c) && looksLikeJSON(b):
		return formatJSON, nil
	case c == 0x0a:
		return formatRaw, nil
	case c < 0x10:
		return formatFramed, nil
	}
	return formatUnknown, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// looksLikeJSON reports whether b (which starts with whitespace) is JSON
// lines: whitespace, then `{`, optional whitespace and `"resource` or `}`.
// A window of nothing but whitespace counts as JSON (blank lines).
func looksLikeJSON(b []byte) bool {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i == len(b) {
		return true
	}
	if b[i] != '{' {
		return false
	}
	i++
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	rest := b[i:]
	return bytes.HasPrefix(rest, []byte(`"resource`)) || bytes.HasPrefix(rest, []byte{'}'})
}

// fileReader is the state of one ReadFile call.
type fileReader struct {
	d     *Decoder
	name  string
	emit  func([]graph.Span) error
	onBad func(error)
	st    *FileStats
}

// request decodes one request and emits its spans. A decoding error is
// reported through onBad, naming the file and line (JSON lines) or message
// (length-prefixed stream) number n.
func (fr *fileReader) request(b []byte, json, line bool, n int) error {
	d := fr.d
	spans, err := d.AppendRequest(d.spans[:0], b, json)
	if err != nil {
		kind := "OTLP protobuf"
		if json {
			kind = "OTLP JSON"
		}
		if line {
			fr.bad(fmt.Errorf("%s:%d: invalid %s: %w", fr.name, n, kind, err))
		} else {
			fr.bad(fmt.Errorf("%s: message %d: invalid %s: %w", fr.name, n, kind, err))
		}
		return nil
	}
	return fr.emitSpans(spans)
}

func (fr *fileReader) emitSpans(spans []graph.Span) error {
	fr.d.spans = spans
	fr.st.Requests++
	fr.st.Spans += len(spans)
	if fr.emit != nil {
		if err := fr.emit(spans); err != nil {
			return fmt.Errorf("%s: %w", fr.name, err)
		}
	}
	return nil
}

func (fr *fileReader) bad(err error) {
	fr.st.BadRequests++
	if fr.onBad != nil {
		fr.onBad(err)
	}
}

// jsonLines reads JSON lines: every non-blank line is one request.
func (fr *fileReader) jsonLines(src *bufio.Reader) error {
	for lineNo := 1; ; lineNo++ {
		line, tooLong, err := fr.d.readLine(src)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", fr.name, lineNo, err)
		}
		if tooLong {
			fr.bad(fmt.Errorf("%s:%d: line longer than %d bytes: skipped", fr.name, lineNo, maxLineSize))
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if err := fr.request(line, true, true, lineNo); err != nil {
			return err
		}
	}
}

// readLine returns the next line without its '\n'; the slice is valid until
// the next read. A line longer than MaxRequestSize is consumed and reported
// with tooLong. io.EOF is returned only when no bytes remain; any other
// error is a read error.
func (d *Decoder) readLine(src *bufio.Reader) (line []byte, tooLong bool, err error) {
	d.line = d.line[:0]
	n := 0
	for {
		frag, err := src.ReadSlice('\n')
		n += len(frag)
		if n > maxLineSize {
			tooLong = true
			d.line = d.line[:0]
		}
		switch {
		case err == nil && len(d.line) == 0 && !tooLong:
			return frag[:len(frag)-1], false, nil // the common case: no copy
		case err == nil:
			if !tooLong {
				d.line = append(d.line, frag[:len(frag)-1]...)
			}
			return d.line, tooLong, nil
		case err == bufio.ErrBufferFull:
			if !tooLong {
				d.line = append(d.line, frag...)
			}
		case err == io.EOF:
			if n == 0 {
				return nil, false, io.EOF
			}
			if !tooLong {
				d.line = append(d.line, frag...)
			}
			return d.line, tooLong, nil
		default:
			return nil, false, err
		}
	}
}

// framed reads a stream of 4-byte big-endian length-prefixed messages.
func (fr *fileReader) framed(src io.Reader) error {
	var hdr [4]byte
	for msg := 1; ; msg++ {
		n, err := io.ReadFull(src, hdr[:])
		if err == io.EOF {
			return nil
		}
		if err == io.ErrUnexpectedEOF {
			return fmt.Errorf("%s: message %d: truncated length prefix (%d of 4 bytes)", fr.name, msg, n)
		}
		if err != nil {
			return fmt.Errorf("%s: message %d: %w", fr.name, msg, err)
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > MaxRequestSize {
			return fmt.Errorf("%s: message %d: length prefix %d exceeds %d bytes: not a length-prefixed OTLP stream, or corrupt", fr.name, msg, size, MaxRequestSize)
		}
		payload, err := fr.d.readN(src, int(size))
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return fmt.Errorf("%s: message %d: truncated: %d of %d bytes", fr.name, msg, len(payload), size)
			}
			return fmt.Errorf("%s: message %d: %w", fr.name, msg, err)
		}
		if bytes.HasPrefix(payload, zstdMagic) {
			return fmt.Errorf("%s: message %d: zstd-compressed messages are not supported: decompress the file first", fr.name, msg)
		}
		json := false
		if t := bytes.TrimLeft(payload, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			json = true
		}
		if err := fr.request(payload, json, false, msg); err != nil {
			return err
		}
	}
}

// readN reads exactly n bytes into the decoder's frame buffer, growing it as
// data arrives (so a bogus length does not allocate more than the input
// holds, give or take a MiB).
func (d *Decoder) readN(src io.Reader, n int) ([]byte, error) {
	buf := d.frame[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), 1<<20)
		buf = slices.Grow(buf, chunk)
		m, err := io.ReadFull(src, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+m]
		if err != nil {
			d.frame = buf
			return buf, err
		}
	}
	d.frame = buf
	return buf, nil
}

// raw reads a file holding one protobuf request (see ReadFile for the
// fallback to a length-prefixed stream).
func (fr *fileReader) raw(src io.Reader) error {
	d := fr.d
	buf := bytes.NewBuffer(d.whole[:0])
	n, err := buf.ReadFrom(io.LimitReader(src, MaxRequestSize+1))
	d.whole = buf.Bytes()
	if err != nil {
		return fmt.Errorf("%s: %w", fr.name, err)
	}
	if n > MaxRequestSize {
		return fmt.Errorf("%s: protobuf request larger than %d bytes", fr.name, MaxRequestSize)
	}
	b := d.whole
	spans, err := d.AppendRequest(d.spans[:0], b, false)
	if err != nil {
		if framedExactly(b) {
			return fr.framed(bytes.NewReader(b))
		}
		return fmt.Errorf("%s: invalid OTLP protobuf: %w", fr.name, err)
	}
	return fr.emitSpans(spans)
}

// framedExactly reports whether b splits exactly into one or more 4-byte
// big-endian length-prefixed messages.
func framedExactly(b []byte) bool {
	n := 0
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		size := binary.BigEndian.Uint32(b)
		if uint64(size) > uint64(len(b)-4) {
			return false
		}
		b = b[4+size:]
		n++
	}
	return n > 0
}

// dropScratch releases scratch buffers grown large by one file.
func (d *Decoder) dropScratch() {
	if cap(d.line) > keepScratch {
		d.line = nil
	}
	if cap(d.frame) > keepScratch {
		d.frame = nil
	}
	if cap(d.whole) > keepScratch {
		d.whole = nil
	}
	if cap(d.spans) > keepScratch/64 {
		d.spans = nil
	}
}

// countingReader counts bytes and reports progress about once per MiB.
type countingReader struct {
	r        io.Reader
	n        int64
	last     int64
	progress func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n < 0 || n > len(p) {
		return 0, errors.New("reader returned an invalid count")
	}
	c.n += int64(n)
	if c.progress != nil && c.n-c.last >= progressEvery {
		c.last = c.n
		c.progress(c.n)
	}
	return n, err
}
