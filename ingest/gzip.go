package ingest

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
)

// gzipReader decompresses a gzip file member by member (a file may hold
// several: `cat a.gz b.gz` and some log shippers make them), so that it can
// tell a member cut short from bytes after the last member that do not start
// another one. compress/gzip on its own reports both the same way (a header
// error, or io.ErrUnexpectedEOF when the junk is shorter than a header).
//
// Its errors are a *streamError, or a read error of the file; the caller,
// which knows how far it got, says where.
type gzipReader struct {
	src      *bufio.Reader // the compressed bytes; gzip reads no further than it needs from an io.ByteReader
	z        gzip.Reader
	trailing int64 // bytes after the last member that are not gzip: counted, ignored
	err      error
}

// newGzipReader starts reading the gzip stream at the start of src.
func newGzipReader(src *bufio.Reader) (*gzipReader, error) {
	g := &gzipReader{src: src}
	if err := g.z.Reset(src); err != nil {
		return nil, gzipError(err)
	}
	g.z.Multistream(false)
	return g, nil
}

func (g *gzipReader) Read(p []byte) (int, error) {
	for {
		if g.err != nil {
			return 0, g.err
		}
		n, err := g.z.Read(p)
		switch {
		case err == io.EOF:
			g.err = g.next()
		case err != nil:
			g.err = gzipError(err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// next moves on after a member's trailer: to the next member, or to the end
// of the stream (io.EOF), counting any bytes that are not gzip.
func (g *gzipReader) next() error {
	head, err := g.src.Peek(2)
	if len(head) == 0 {
		if err == io.EOF {
			return io.EOF
		}
		return err
	}
	if head[0] == 0x1f && (len(head) == 1 || head[1] == 0x8b) {
		// Another member, or the first byte of one: the file was cut there.
		if err := g.z.Reset(g.src); err != nil {
			return gzipError(err)
		}
		g.z.Multistream(false)
		return nil
	}
	n, err := io.Copy(io.Discard, g.src)
	g.trailing = n
	if err != nil {
		return err
	}
	return io.EOF
}

// gzipError classifies an error of compress/gzip.
func gzipError(err error) error {
	var corrupt flate.CorruptInputError
	switch {
	case err == io.ErrUnexpectedEOF:
		return &streamError{codec: "gzip", kind: ErrTruncated}
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader), errors.As(err, &corrupt):
		return &streamError{codec: "gzip", kind: ErrCorrupt, err: err}
	}
	return err
}

// streamError is an error of a compressed layer of the file (gzip or
// zstd): its stream ends part-way (kind ErrTruncated), is damaged
// (ErrCorrupt), or needs more memory than it may have (ErrLimit). err is
// the decompressor's own error, nil for a truncation.
type streamError struct {
	codec string
	kind  error
	err   error
}

func (e *streamError) Error() string {
	if e.err == nil {
		return e.codec + " stream truncated"
	}
	return e.codec + " stream: " + e.err.Error()
}

func (e *streamError) Unwrap() []error {
	if e.err == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.err}
}

func (g *gzipReader) trailingBytes() (string, int64) { return "gzip", g.trailing }
func (g *gzipReader) close()                         {}
