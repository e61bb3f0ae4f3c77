package ingest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/stormradius/stormradius/graph"
)

// MaxRequestSize is the largest request ReadFile accepts: one JSON request
// (a line, or a document over several lines), one length-prefixed message
// (and what a zstd-compressed one decompresses to), or a whole raw protobuf
// file. Longer JSON requests are reported as bad and
// skipped; a longer length prefix makes the rest of the file unreadable.
const MaxRequestSize = 256 << 20

// maxLineSize is MaxRequestSize, a variable so tests can lower it.
var maxLineSize = MaxRequestSize

const (
	readBufSize   = 256 << 10
	sniffLen      = 4096
	progressEvery = 1 << 20
	// maxLayers is how many compression layers (gzip, zstd) a file may
	// have, one inside the other.
	maxLayers = 2
	// Scratch buffers larger than this are dropped after each file.
	keepScratch = 8 << 20
)

// FileStats describes one file read by ReadFile.
type FileStats struct {
	// Bytes is the number of bytes read from the file as given (compressed
	// bytes for a gzip or zstd file).
	Bytes int64
	// Requests is the number of requests (JSON documents or lines, or
	// protobuf messages) decoded and passed to emit, including requests
	// with no span.
	Requests int
	// BadRequests is the number of requests rejected (and passed to onBad).
	BadRequests int
	// NotTraces is how many of BadRequests were well-formed JSON of another
	// kind: OTLP logs, metrics or profiles, Jaeger or Zipkin JSON (their
	// errors wrap ErrNotTraces).
	NotTraces int
	// Spans is the number of spans passed to emit. It is 0 for a file that
	// decoded fine but held no span: the caller should say so.
	Spans int
}

// ReadFile reads one OTLP trace file, as `stormradius analyze` takes them, and
// calls emit once per decoded request with that request's spans. The slice
// passed to emit is reused after emit returns: emit must copy what it keeps
// (the strings in it are immutable and may be kept). name is used only in
// errors. emit and onBad may be nil.
//
// The format is detected from the content, never from the file name. First
// come up to two compression layers, one inside the other:
//
//   - gzip (magic 1f 8b): possibly several members, one after another.
//   - zstd (magic 28 b5 2f fd, or a skippable frame 5x 2a 4d 18): one or
//     more frames, one after another — what `zstd -c` and pzstd write, and
//     what the collector's file exporter writes with compression: zstd
//     under its exporter.file.nativeCompression feature gate (a frame per
//     flush, or per write with rotation). A frame may ask for a window of
//     at most MaxZstdWindow (128 MiB, as `zstd -d`): that is the most a
//     zstd layer holds in memory.
//
// Then the format, from the first bytes:
//
//   - First byte '{' or '[' (after an optional UTF-8 BOM), or a run of
//     whitespace followed by `{"resource`, `{"data"`, `{}`, `[{` or `[[`:
//     OTLP/JSON ExportTraceServiceRequests, checked and decoded as
//     AppendRequest does. Usually one per line — what the OpenTelemetry
//     Collector's file exporter writes with format: json — but a request
//     may also span lines, as in a pretty-printed document (or several, one
//     after another): a line that leaves brackets open is continued by the
//     lines after it, until its brackets close or a line starts with '{' or
//     '[' in its first column, which starts a new request (so a request
//     that breaks off does not swallow those after it).
//   - First byte 0x00 (or any byte below 0x10 other than 0x0a): a stream of
//     messages each preceded by its length as a 4-byte big-endian unsigned
//     integer — what the file exporter writes with format: proto (its
//     exportMessageAsBuffer). A message below 16 MiB always has a first
//     length byte of 0x00, and a raw request can never start with a byte
//     below 0x10 other than 0x0a (field 0 or a wrong wire type for field 1).
//     A message whose content is JSON (the exporter frames JSON too when it
//     compresses per message) is decoded as JSON. A message that is a zstd
//     frame is decompressed first: what the file exporter writes with
//     compression: zstd (without the nativeCompression feature gate, its
//     default), format json or proto. A message that decompresses to more
//     than MaxRequestSize is refused before it is (the error wraps
//     ErrLimit), as is one whose frame declares more than its bytes can
//     hold; either is skipped like any bad message, and reading goes on.
//   - First byte 0x0a (field 1, resource_spans, length-delimited): one raw
//     protobuf ExportTraceServiceRequest (or TracesData, same wire format).
//     If it does not decode as one but the file splits exactly into
//     length-prefixed messages (a first message of 160–176 MiB), it is read
//     as a length-prefixed stream.
//
// A request that cannot be decoded is passed to onBad as an error naming
// the file and the line (JSON) or message number, and reading goes on: a
// request that is not valid OTLP/JSON or protobuf, or a zstd-compressed
// message that does not decompress; one nested deeper than
// MaxJSONDepth or with more than MaxJSONElements elements, or a protobuf
// one with attribute values nested deeper than MaxProtoDepth (the error
// wraps ErrLimit); one longer than MaxRequestSize; one that is OTLP logs, metrics
// or profiles, Jaeger or Zipkin JSON (the error wraps ErrNotTraces, and it
// is counted in FileStats.NotTraces too). A JSON request with no span ({} or
// {"resourceSpans":[]}) is a request, not an error.
//
// ReadFile returns an error naming the file when it cannot read it to its
// end; requests emitted before that stay emitted, and the error says, in
// words a user understands, what happened and how far reading got:
//
//   - ErrTruncated: the input ends part-way, as a file copied while it is
//     being written does: a gzip or zstd stream cut short
//     ("traces.jsonl.gz: gzip stream truncated after 196 lines (the file
//     may still be being written)"), a length-prefixed stream cut inside a message
//     ("x.pb: length-prefixed stream truncated in message 12 (11 messages
//     read, ...)"), a file that ends inside a JSON request (a last line
//     without its end, or a document cut after one of its lines; a
//     complete last line without a newline is fine), a raw protobuf request
//     with a field that runs past the end of the file.
//   - ErrTrailingData: bytes after the end of the gzip or zstd stream that
//     are not another gzip member or zstd frame ("123 bytes of trailing
//     data after the gzip stream: ignored"); everything before them was
//     read.
//   - ErrCorrupt: a gzip or zstd stream that fails its checksum or does
//     not decompress, or a length prefix over MaxRequestSize after valid
//     messages.
//   - ErrLimit: a zstd frame that asks for a window over MaxZstdWindow.
//   - ErrFormat: nothing in the file is in a format ReadFile reads
//     (garbage, more than two compression layers, a raw protobuf file that
//     does not decode).
//
// An error returned by emit stops reading and is returned, wrapped with the
// file name. An empty file is not an error.
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
	if d.Workers > 1 {
		fr.startPool(d.Workers)
		defer func() {
			// Every queued request is decoded and emitted before ReadFile
			// returns; an error of emit is ReadFile's.
			if perr := fr.pool.close(); perr != nil && err == nil {
				err = perr
			}
		}()
	}

	src := bufio.NewReaderSize(cr, readBufSize)
	var layers []layer
	defer func() {
		for _, l := range layers {
			l.close()
		}
	}()
	for depth := 0; ; depth++ {
		head, perr := src.Peek(4)
		if len(head) < 4 && perr != nil && perr != io.EOF {
			return st, fr.readErr(perr, "before any data", "")
		}
		gzip := len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b
		if !gzip && !isZstd(head) {
			break
		}
		if depth == maxLayers {
			return st, newKindError(ErrFormat, nil, fmt.Sprintf("%s: more than %d nested compression layers (gzip, zstd)", name, maxLayers))
		}
		var l layer
		if gzip {
			g, gerr := newGzipReader(src)
			if gerr != nil {
				return st, fr.readErr(gerr, "in its header", "")
			}
			l = g
		} else {
			z, zerr := newZstdReader(src)
			if zerr != nil {
				return st, fmt.Errorf("%s: %w", name, zerr)
			}
			l = z
		}
		layers = append(layers, l)
		src = bufio.NewReaderSize(l, readBufSize)
	}

	f, err := sniff(src)
	if err != nil {
		return st, fr.readErr(err, "before any data", "")
	}
	switch f {
	case formatEmpty:
	case formatJSON:
		err = fr.jsonLines(src)
	case formatFramed:
		err = fr.framed(src)
	case formatRaw:
		err = fr.raw(src)
	default:
		return st, newKindError(ErrFormat, nil, fmt.Sprintf("%s: unrecognised format: neither OTLP JSON nor OTLP protobuf (raw or length-prefixed)", name))
	}
	if err != nil {
		return st, err
	}
	var trailing int64
	codec := ""
	for _, l := range layers {
		if c, n := l.trailingBytes(); n > 0 {
			trailing += n
			codec = c
		}
	}
	if trailing > 0 {
		return st, newKindError(ErrTrailingData, nil, fmt.Sprintf("%s: %s of trailing data after the %s stream: ignored", name, plural(int(min(trailing, math.MaxInt)), "byte"), codec))
	}
	return st, nil
}

type format uint8

const (
	formatUnknown format = iota
	formatEmpty
	formatJSON
	formatFramed
	formatRaw
)

// sniff decides the format from the first bytes of src (see ReadFile). It
// consumes a UTF-8 byte order mark, nothing else. A read error after some
// bytes is left for the format's reader to meet, when it knows how far it
// got.
func sniff(src *bufio.Reader) (format, error) {
	b, err := src.Peek(sniffLen)
	if len(b) == 0 {
		if err != nil && err != io.EOF {
			return formatUnknown, err
		}
		return formatEmpty, nil
	}
	if bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}) {
		_, _ = src.Discard(3)
		return formatJSON, nil
	}
	switch c := b[0]; {
	case c == '{' || c == '[':
		return formatJSON, nil
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

// looksLikeJSON reports whether b (which starts with whitespace) is JSON:
// whitespace, then `{` and `"resource`, `"data"` (Jaeger, to say it is not
// supported) or `}`, or `[` and `{` or `[` (Zipkin, likewise), with optional
// whitespace between. A window of nothing but whitespace counts as JSON
// (blank lines). A raw protobuf request starts with 0x0a, a newline, but
// cannot go on like this: its nested lengths would not fit.
func looksLikeJSON(b []byte) bool {
	i := skipSpace(b, 0)
	if i == len(b) {
		return true
	}
	open := b[i]
	if open != '{' && open != '[' {
		return false
	}
	rest := b[skipSpace(b, i+1):]
	if open == '[' {
		return len(rest) > 0 && (rest[0] == '{' || rest[0] == '[')
	}
	return bytes.HasPrefix(rest, []byte(`"resource`)) || bytes.HasPrefix(rest, []byte(`"data"`)) || bytes.HasPrefix(rest, []byte{'}'})
}

// layer is a compression layer of a file: a gzip or zstd stream.
type layer interface {
	io.Reader
	// trailingBytes says how many bytes after the end of the stream were
	// not part of it (and which stream, for errors).
	trailingBytes() (codec string, n int64)
	close()
}

// fileReader is the state of one ReadFile call.
type fileReader struct {
	d     *Decoder
	name  string
	emit  func([]graph.Span) error
	onBad func(error)
	st    *FileStats
	pool  *decodePool // decoding goroutines, when Decoder.Workers > 1
}

// message decodes one message of a length-prefixed stream (protobuf, JSON,
// or either compressed as one zstd frame) and emits its spans. A decoding
// error is reported through onBad.
func (fr *fileReader) message(b []byte, n int) error {
	return fr.decodeRequest(decodeJob{b: b, where: fmt.Sprintf(": message %d", n)})
}

// rejected reports a request that did not decode; where is ":<line>" or
// ": message <n>".
func (fr *fileReader) rejected(err error, where string, json bool) {
	if errors.Is(err, ErrNotTraces) {
		fr.lock()
		fr.st.NotTraces++
		fr.unlock()
	}
	var zerr *zstdMessageError
	switch {
	case errors.Is(err, ErrNotTraces), errors.As(err, &zerr):
		fr.bad(fmt.Errorf("%s%s: %w", fr.name, where, err))
	case errors.Is(err, ErrLimit):
		fr.bad(fmt.Errorf("%s%s: %w: skipped", fr.name, where, err))
	case json:
		fr.bad(fmt.Errorf("%s%s: invalid OTLP JSON: %w", fr.name, where, err))
	default:
		fr.bad(fmt.Errorf("%s%s: invalid OTLP protobuf: %w", fr.name, where, err))
	}
}

// lock and unlock serialise the file's counts and callbacks when requests
// are decoded on several goroutines.
func (fr *fileReader) lock() {
	if fr.pool != nil {
		fr.pool.mu.Lock()
	}
}

func (fr *fileReader) unlock() {
	if fr.pool != nil {
		fr.pool.mu.Unlock()
	}
}

func (fr *fileReader) emitSpans(spans []graph.Span) error {
	fr.d.spans = spans
	fr.lock()
	defer fr.unlock()
	return fr.emitLocked(spans)
}

func (fr *fileReader) bad(err error) {
	fr.lock()
	defer fr.unlock()
	fr.st.BadRequests++
	if fr.onBad != nil {
		fr.onBad(err)
	}
}

// mayBeWritten ends the message of every truncation error: it is what a
// truncated trace file usually is.
const mayBeWritten = "the file may still be being written"

// readErr describes an error met reading the file (or its gzip or zstd
// stream); where says where reading stopped ("after 196 lines"), and read,
// if not empty, what was read before ("11 messages read").
func (fr *fileReader) readErr(err error, where, read string) error {
	if read != "" {
		read += "; "
	}
	var se *streamError
	if errors.As(err, &se) {
		switch se.kind {
		case ErrTruncated:
			return newKindError(ErrTruncated, io.ErrUnexpectedEOF, fmt.Sprintf("%s: %s stream truncated %s (%s%s)", fr.name, se.codec, where, read, mayBeWritten))
		case ErrCorrupt, ErrLimit:
			if read != "" {
				where += " (" + strings.TrimSuffix(read, "; ") + ")"
			}
			verb := "corrupt"
			if se.kind == ErrLimit {
				verb = "refused"
			}
			return newKindError(se.kind, se.err, fmt.Sprintf("%s: %s stream %s %s: %v", fr.name, se.codec, verb, where, se.err))
		}
	}
	return fmt.Errorf("%s: read error %s: %w", fr.name, where, err)
}

// framed reads a stream of 4-byte big-endian length-prefixed messages.
func (fr *fileReader) framed(src io.Reader) error {
	var hdr [4]byte
	for msg := 1; ; msg++ {
		read := plural(msg-1, "message")
		n, err := io.ReadFull(src, hdr[:])
		switch {
		case err == io.EOF:
			return nil
		case err == io.ErrUnexpectedEOF:
			return newKindError(ErrTruncated, err, fmt.Sprintf("%s: length-prefixed stream truncated in message %d (%s read, then %d of its 4 length bytes; %s)", fr.name, msg, read, n, mayBeWritten))
		case err != nil:
			return fr.readErr(err, fmt.Sprintf("in message %d", msg), read+" read")
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > MaxRequestSize {
			// Unreachable for message 1 (sniff sends files whose first
			// byte is 0x10 or more elsewhere): the stream was valid so far.
			return newKindError(ErrCorrupt, nil, fmt.Sprintf("%s: message %d: length prefix %d exceeds %d bytes: corrupt length-prefixed stream (%s read)", fr.name, msg, size, MaxRequestSize, read))
		}
		payload, err := fr.d.readN(src, int(size))
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return newKindError(ErrTruncated, io.ErrUnexpectedEOF, fmt.Sprintf("%s: length-prefixed stream truncated in message %d (%s read, then %d of its %d bytes; %s)", fr.name, msg, read, len(payload), size, mayBeWritten))
		case err != nil:
			return fr.readErr(err, fmt.Sprintf("in message %d", msg), read+" read")
		}
		if err := fr.message(payload, msg); err != nil {
			return err
		}
	}
}

// isJSON reports whether a message of a length-prefixed stream is JSON (the
// file exporter frames JSON too when it compresses per message).
func isJSON(msg []byte) bool {
	t := bytes.TrimLeft(msg, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
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
		return fr.readErr(err, "after "+plural(int(n), "byte"), "")
	}
	if n > MaxRequestSize {
		return newKindError(ErrFormat, nil, fmt.Sprintf("%s: protobuf request larger than %d bytes", fr.name, MaxRequestSize))
	}
	b := d.whole
	spans, err := d.AppendRequest(d.spans[:0], b, false)
	if err != nil {
		if framedExactly(b) {
			return fr.framed(bytes.NewReader(b))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// A field runs past the end of the file: cut short, or corrupt.
			return newKindError(ErrTruncated, err, fmt.Sprintf("%s: protobuf request truncated: a field runs past its end, after %s (%s)", fr.name, plural(len(b), "byte"), mayBeWritten))
		}
		return newKindError(ErrFormat, err, fmt.Sprintf("%s: invalid OTLP protobuf: %v", fr.name, err))
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
	if cap(d.esc) > keepScratch {
		d.esc = nil
	}
	if cap(d.arena) > keepScratch {
		d.arena = nil
	}
	if cap(d.unz) > keepScratch {
		d.unz = nil
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
