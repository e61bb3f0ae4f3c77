package ingest

import (
	"bufio"
	"fmt"
	"io"
)

// jsonRequest is the JSON request being read by jsonLines.
type jsonRequest struct {
	sc     jsonScanner
	active bool   // a request has started and is being read
	skip   bool   // it was rejected (and reported): skip the rest of it
	start  int    // the line it starts on
	buf    []byte // its bytes, when they are not just frag
	frag   []byte // its bytes, when they are one fragment still in the read buffer
	size   int    // its length so far
	elems  int    // its commas and '[' so far (MaxJSONElements)
}

// bytes returns the request's bytes.
func (r *jsonRequest) bytes() []byte {
	if r.frag != nil {
		return r.frag
	}
	return r.buf
}

// jsonLines reads OTLP/JSON requests: one per line (JSON lines), or spread
// over several lines (pretty-printed documents). See ReadFile.
//
// Each fragment of a line is checked by a jsonScanner as it is read, so a
// request is known to be complete, and valid as far as the scanner can tell,
// before it is decoded; and a rejected one (too deep, too large, not JSON)
// is skipped without keeping its bytes, however long it is. A request that
// fits in one fragment of the read buffer (one line, shorter than
// readBufSize) is decoded where it lies, without a copy. When requests are
// decoded on this goroutine, a whole line is first tried as a request
// without the scanner (decodeLine): the decoder checks as much, and the
// line is read once.
func (fr *fileReader) jsonLines(src *bufio.Reader) error {
	r := &jsonRequest{buf: fr.d.line[:0]}
	long := &longLine{b: fr.d.longLine[:0]}
	defer func() { fr.d.line, fr.d.longLine = r.buf[:0], long.b[:0] }()
	line := 1         // the line the next fragment belongs to
	lineStart := true // the next fragment starts a line
	lineLen := 0      // bytes of the current line before the next fragment
	for {
		if r.frag != nil {
			// The next read reuses the buffer frag lies in.
			r.buf = append(r.buf[:0], r.frag...)
			r.frag = nil
		}
		frag, err := src.ReadSlice('\n')
		if fr.pool == nil && (long.on || err == bufio.ErrBufferFull && lineStart && !r.active && !r.skip) {
			done, eerr := long.add(fr, frag, err)
			if eerr != nil {
				return eerr
			}
			switch done {
			case longMore:
				lineStart = false
				continue
			case longDecoded:
				line++
				lineStart, lineLen = true, 0
				continue
			}
			// Not decoded: its fragments go the scanner's way, as they
			// would have, then frag, the last, below.
			lineLen = long.replay(fr, r, line)
			lineStart = false
		}
		if err == nil && lineStart && !r.active && !r.skip && fr.pool == nil {
			ok, eerr := fr.decodeLine(frag)
			if eerr != nil {
				return eerr
			}
			if ok {
				line++
				continue
			}
		}
		if len(frag) > 0 {
			if lineStart && (frag[0] == '{' || frag[0] == '[') && (r.active || r.skip) {
				// A line that starts with a bracket in its first column starts
				// a new request: pretty-printers indent what is inside one.
				// So whatever came before has ended, and a request that
				// broke off does not swallow those that follow.
				if r.active {
					fr.bad(fmt.Errorf("%s:%d: invalid OTLP JSON: the request %s when line %d starts a new one", fr.name, r.start, r.sc.incomplete(), line))
				}
				r.active, r.skip = false, false
			}
			fr.feed(r, frag, line, lineLen)
			lineLen += len(frag)
		}
		switch err {
		case nil:
			// The line is complete.
			if r.active && r.sc.done() {
				if err := fr.decodeJSON(r); err != nil {
					return err
				}
			}
			line++
			lineStart, lineLen = true, 0
		case bufio.ErrBufferFull:
			lineStart = false
		case io.EOF:
			return fr.endJSON(r, line, lineStart && len(frag) == 0)
		default:
			// A read error, such as a truncated gzip stream: keep a request
			// that was complete but for its newline, then say where
			// reading stopped.
			if r.active && r.sc.done() {
				if err := fr.decodeJSON(r); err != nil {
					return err
				}
			}
			return fr.readErr(err, "after "+plural(line-1, "line"), "")
		}
	}
}

// longLine holds a line longer than the read buffer, when requests are
// decoded on the reading goroutine, fragment by fragment as it is read,
// without scanning it: the decoder checks as much (decodeLine). Once the
// line ends it is decoded whole. A line the decoder does not accept, one
// past longLineMax, or one cut by the end of the file or a read error is
// fed to the scanner fragment by fragment as it would have been (replay):
// what is reported of it, and of what follows, is the same, and a line
// past longLineMax is then checked as it is read, as before, its bytes not
// kept once it is found bad. A collector's file exporter writes a batch a
// line (~550 bytes a span): batches of up to ~7,000 spans are read this
// way.
type longLine struct {
	on   bool
	b    []byte // the line's bytes so far
	lens []int  // its fragments' lengths
}

// longLineMax bounds the bytes of a line held unscanned (longLine).
const longLineMax = 4 << 20

// What longLine.add did.
const (
	longMore    = iota // the line goes on
	longDecoded        // it ended and was decoded
	longReplay         // it is to be replayed (replay), then frag handled
)

// add adds the fragment read (with the error ReadSlice returned).
func (l *longLine) add(fr *fileReader, frag []byte, err error) (int, error) {
	if !l.on {
		if cap(l.b) < longLineMax+readBufSize { // once: it never regrows
			l.b = make([]byte, 0, longLineMax+readBufSize)
		}
		l.on, l.b, l.lens = true, l.b[:0], l.lens[:0]
	}
	l.b = append(l.b, frag...)
	l.lens = append(l.lens, len(frag))
	if err == bufio.ErrBufferFull && len(l.b) <= longLineMax {
		return longMore, nil
	}
	l.on = false
	if err == nil {
		ok, eerr := fr.decodeLine(l.b)
		if eerr != nil || ok {
			return longDecoded, eerr
		}
	}
	return longReplay, nil
}

// replay feeds the line's fragments but the last to the scanner, as
// jsonLines would have, and returns the line's length before the last.
func (l *longLine) replay(fr *fileReader, r *jsonRequest, line int) int {
	off := 0
	for _, n := range l.lens[:len(l.lens)-1] {
		fr.feed(r, l.b[off:off+n], line, off)
		if r.frag != nil { // it lies in l.b: copied, as the next read would
			r.buf = append(r.buf[:0], r.frag...)
			r.frag = nil
		}
		off += n
	}
	return off
}

// decodeLine decodes a whole line that starts no request in progress, when
// requests are decoded on the reading goroutine, as one request, without
// scanning it first: the decoder checks the syntax as strictly as the
// scanner does, so a line it accepts is one the scanner would have found
// to be a complete request. It reports false, having emitted nothing, for a
// line it does not accept (blank, too large, invalid, a line of a
// document that spans several): that line goes the scanner's way, as
// before, and its errors are the scanner's, or the decoder's from a
// second try. Emit's error, if any, is returned.
func (fr *fileReader) decodeLine(line []byte) (bool, error) {
	if len(line) > maxLineSize || skipSpace(line, 0) == len(line) || countElements(line) > MaxJSONElements {
		return false, nil
	}
	spans, err := fr.d.decodeJSON(fr.d.spans[:0], line)
	if err != nil {
		fr.d.spans = spans
		return false, nil
	}
	return true, fr.emitSpans(spans)
}

// feed adds one fragment of line (lineLen bytes of which came before it) to
// the request being read, starting one if none is.
func (fr *fileReader) feed(r *jsonRequest, frag []byte, line, lineLen int) {
	if r.skip {
		return
	}
	if !r.active {
		if skipSpace(frag, 0) == len(frag) {
			return // blank
		}
		r.sc.reset()
		r.active, r.start, r.size, r.elems = true, line, 0, 0
		r.buf = r.buf[:0]
	}
	before := r.size
	r.size += len(frag)
	if r.size > maxLineSize {
		fr.reject(r, fmt.Errorf("%s:%d: JSON request longer than %d bytes: skipped", fr.name, r.start, maxLineSize))
		return
	}
	if r.elems += countElements(frag); r.elems > MaxJSONElements {
		fr.reject(r, fmt.Errorf("%s:%d: %w: skipped", fr.name, r.start, elementsError()))
		return
	}
	if !r.sc.scan(frag) {
		// Where: the column of the offending byte on its line, and the
		// line too if the request started on another.
		col := lineLen + int(r.sc.faultAt-int64(before)) + 1
		where := fmt.Sprintf("at column %d", col)
		if line != r.start {
			where = fmt.Sprintf("on line %d, column %d", line, col)
		}
		problem := r.sc.problem()
		if r.sc.fault == faultTooDeep {
			fr.reject(r, fmt.Errorf("%s:%d: %w (%s): skipped", fr.name, r.start, problem, where))
		} else {
			fr.reject(r, fmt.Errorf("%s:%d: invalid OTLP JSON: %w %s", fr.name, r.start, problem, where))
		}
		return
	}
	if before == 0 {
		r.frag = frag
	} else {
		r.buf = append(r.buf, frag...)
	}
}

// reject reports the request being read as bad and skips the rest of it.
func (fr *fileReader) reject(r *jsonRequest, err error) {
	fr.bad(err)
	r.active, r.skip = false, true
	r.frag, r.buf = nil, r.buf[:0]
}

// decodeJSON decodes the complete request r and emits its spans.
func (fr *fileReader) decodeJSON(r *jsonRequest) error {
	b := r.bytes()
	r.active, r.frag, r.buf = false, nil, r.buf[:0]
	return fr.decodeRequest(decodeJob{b: b, lines: true, line: r.start, where: fmt.Sprintf(":%d", r.start)})
}

// endJSON finishes reading at the end of the file, which is on line (the
// line after the last when the file ends with a newline: atNewline).
func (fr *fileReader) endJSON(r *jsonRequest, line int, atNewline bool) error {
	if !r.active {
		return nil
	}
	if r.sc.done() {
		return fr.decodeJSON(r) // a last line without a newline
	}
	last := line
	if atNewline {
		last--
	}
	r.active = false
	if atNewline && r.start == last {
		// A whole line that leaves brackets open: a bad line, not a
		// truncated file (writers end a line when they end a request).
		fr.bad(fmt.Errorf("%s:%d: invalid OTLP JSON: the request %s", fr.name, r.start, r.sc.incomplete()))
		return nil
	}
	where := fmt.Sprintf("on line %d", r.start)
	if r.start != last {
		where = fmt.Sprintf("that starts on line %d", r.start)
	}
	complete := last - 1
	if atNewline {
		complete = last
	}
	return newKindError(ErrTruncated, io.ErrUnexpectedEOF, fmt.Sprintf("%s: file truncated in the JSON request %s (after %s; %s)", fr.name, where, plural(complete, "complete line"), mayBeWritten))
}
