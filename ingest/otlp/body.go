package otlp

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errTooLarge reports a body over MaxBodyBytes, as sent or decompressed.
var errTooLarge = errors.New("request body too large")

// bodyError is a body that could not be read or decompressed: the client's
// fault (400), unlike errTooLarge (413).
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// minRead is the first buffer size when the body's length is not known, and
// the least a buffer grows by.
const minRead = 32 << 10

// readBody reads the request body (gzip-decompressed when gz) into w.body
// and returns it. It reads at most limit bytes, before and after
// decompression: past that it stops and returns errTooLarge, so a gzip
// bomb costs limit bytes of memory and the time to inflate them, no more.
func (w *work) readBody(rw http.ResponseWriter, r *http.Request, gz bool, limit int64) ([]byte, error) {
	// MaxBytesReader also tells the server to close the connection rather
	// than read the rest of an oversized body.
	var src io.Reader = http.MaxBytesReader(rw, r.Body, limit)
	size := int64(-1)
	if gz {
		if w.br == nil {
			w.br = bufio.NewReaderSize(src, minRead)
		} else {
			w.br.Reset(src)
		}
		var err error
		if w.gz == nil {
			w.gz, err = gzip.NewReader(w.br)
		} else {
			err = w.gz.Reset(w.br)
		}
		if err != nil {
			return nil, bodyErr(err, "gzip")
		}
		src = w.gz
	} else if r.ContentLength >= 0 {
		size = r.ContentLength
	}
	defer func() {
		if w.br != nil {
			w.br.Reset(nil) // drop the request body
		}
	}()

	buf := w.body[:0]
	if size >= 0 && int64(cap(buf)) < size+1 {
		// One allocation of the announced size (and a byte to see EOF).
		buf = make([]byte, 0, size+1)
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				w.body = buf
				return nil, errTooLarge
			}
			grow := max(cap(buf), minRead)
			// Never beyond limit+1: the byte past the limit is enough to
			// tell that the body is too large.
			grow = int(min(int64(grow), limit+1-int64(len(buf))))
			buf = append(buf[:cap(buf)], make([]byte, grow)...)[:len(buf)]
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			w.body = buf
			return nil, errTooLarge
		}
		if err == io.EOF {
			w.body = buf
			return buf, nil
		}
		if err != nil {
			w.body = buf
			if gz {
				return nil, bodyErr(err, "gzip")
			}
			return nil, bodyErr(err, "")
		}
	}
}

// bodyErr wraps a read error: errTooLarge when the sent body was over the
// limit, else a bodyError saying what failed.
func bodyErr(err error, what string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errTooLarge
	}
	if what != "" {
		return &bodyError{fmt.Errorf("read %s body: %w", what, err)}
	}
	return &bodyError{fmt.Errorf("read body: %w", err)}
}
