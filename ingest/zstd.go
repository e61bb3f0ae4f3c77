package ingest

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// MaxZstdWindow is the largest window a zstd frame of a trace file may ask
// for: 128 MiB, the most `zstd -d` accepts without --memory. A zstd stream
// decoder holds one window of history, allocated when a frame declares it;
// a frame that declares more is refused before anything is allocated (the
// error wraps ErrLimit). The file exporter's frames need at most 8 MiB.
const MaxZstdWindow = 128 << 20

// zstdWindow is MaxZstdWindow, a variable so tests can lower it.
var zstdWindow uint64 = MaxZstdWindow

// zstdFrameMaxRatio bounds what one zstd frame can expand to: every block
// that produces output takes at least 4 bytes (a 3-byte header and an RLE
// byte) and produces at most 128 KiB. A frame that declares more than
// zstdFrameMaxRatio times its own size is lying.
const zstdFrameMaxRatio = (128 << 10) / 4

// isZstd reports whether b starts with a zstd frame (magic 28 b5 2f fd) or
// a skippable frame (magic 50–5f 2a 4d 18; pzstd writes one before each
// frame).
func isZstd(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	return b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd ||
		b[0]&0xf0 == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18
}

// NewZstdReader returns a decoder of the zstd stream r (one or more frames,
// skippable frames skipped) made for untrusted input: it decodes on the
// caller's goroutine (it starts none, so nothing leaks if it is not
// closed), and it refuses a frame whose window exceeds maxWindow before
// allocating it, so that it holds at most maxWindow plus about 256 KiB. What
// bounds memory is the window, not the output: to bound the decompressed
// size too, read it through an io.LimitReader (as a request body reader
// does). Reset reuses it for another stream. maxWindow must be at least
// 1 KiB and at most 512 MiB.
//
// ReadFile uses it with MaxZstdWindow; the OTLP receivers with a window
// of their own, smaller (ingest/otlp: zstdMaxWindow).
func NewZstdReader(r io.Reader, maxWindow uint64) (*zstd.Decoder, error) {
	return zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxWindow),
		// For a stream, the maximum "memory" is the window as well; an
		// in-memory source (a bytes.Buffer under 5 MB, which Reset decodes
		// whole) is held to it in total.
		zstd.WithDecoderMaxMemory(maxWindow),
	)
}

// zstdReader decompresses a whole-file zstd stream: what `zstd -c` writes,
// and what the collector's file exporter writes with compression: zstd
// under the exporter.file.nativeCompression feature gate (one frame per
// flush, or per write with rotation). Its errors are a *streamError, or a
// read error of the file.
type zstdReader struct {
	src      *bufio.Reader
	rec      errRecorder
	z        *zstd.Decoder
	trailing int64 // bytes after the last frame that are not zstd: counted, ignored
	err      error
}

// errRecorder passes reads through and remembers the last error other
// than io.EOF, so that a read error of the file can be told from the
// decoder's own errors.
type errRecorder struct {
	r   io.Reader
	err error
}

func (e *errRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// newZstdReader starts reading the zstd stream at the start of src.
func newZstdReader(src *bufio.Reader) (*zstdReader, error) {
	r := &zstdReader{src: src, rec: errRecorder{r: src}}
	z, err := NewZstdReader(&r.rec, zstdWindow)
	if err != nil {
		return nil, err
	}
	r.z = z
	return r, nil
}

func (r *zstdReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.z.Read(p)
	if err != nil {
		r.err = r.classify(err)
	}
	if n > 0 {
		return n, nil
	}
	return 0, r.err
}

// classify turns an error of the decoder into io.EOF (the end, possibly
// after trailing bytes), a *streamError, or the file's read error.
func (r *zstdReader) classify(err error) error {
	switch {
	case err == io.EOF:
		return io.EOF
	case r.rec.err != nil && err == r.rec.err:
		return err
	case errors.Is(err, zstd.ErrMagicMismatch):
		// Four bytes after a complete frame that start no frame (the
		// reader only starts on a magic number): junk after the stream,
		// which the decoder has consumed the first four bytes of.
		n, cerr := io.Copy(io.Discard, r.src)
		r.trailing = 4 + n
		if cerr != nil {
			return cerr
		}
		return io.EOF
	case err == io.ErrUnexpectedEOF:
		return &streamError{codec: "zstd", kind: ErrTruncated}
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return &streamError{codec: "zstd", kind: ErrLimit, err: fmt.Errorf("a frame needs a window over %d MiB, the limit (decompress it first: zstd -d --memory=SIZE): %w", zstdWindow>>20, err)}
	}
	return &streamError{codec: "zstd", kind: ErrCorrupt, err: err}
}

func (r *zstdReader) trailingBytes() (string, int64) { return "zstd", r.trailing }

// close releases the decoder.
func (r *zstdReader) close() { r.z.Close() }

// zstdMessageError is the error of a zstd-compressed message of a
// length-prefixed stream that does not decompress: the message is skipped,
// the stream read on.
type zstdMessageError struct{ err error }

func (e *zstdMessageError) Error() string {
	return "invalid zstd-compressed message: " + e.err.Error()
}
func (e *zstdMessageError) Unwrap() error { return e.err }

// unzstd decompresses b, one message of a length-prefixed stream as the
// collector's file exporter compresses them (compression: zstd, without the
// nativeCompression feature gate: each message one zstd frame), into the
// decoder's buffer, which it returns. Output over maxLineSize
// (MaxRequestSize) is refused (ErrLimit) when the frame declares it,
// before anything is allocated, or else once that much is decompressed; a
// declared size that b could not hold is refused as corrupt without
// allocating it. Memory stays within maxLineSize plus a block.
func (d *Decoder) unzstd(b []byte) ([]byte, error) {
	limit := uint64(maxLineSize)
	var h zstd.Header
	if h.Decode(b) == nil && h.HasFCS {
		switch {
		case h.FrameContentSize > limit:
			return nil, zstdLimitError(h.FrameContentSize)
		case h.FrameContentSize > zstdFrameMaxRatio*uint64(len(b)):
			return nil, &zstdMessageError{fmt.Errorf("the frame declares %d bytes, more than %d compressed bytes can hold", h.FrameContentSize, len(b))}
		}
	}
	if d.zmsg == nil {
		z, err := NewZstdReader(nil, limit)
		if err != nil {
			return nil, err
		}
		d.zmsg = z
	}
	out, err := d.zmsg.DecodeAll(b, d.unz[:0])
	if cap(out) > cap(d.unz) {
		d.unz = out[:0]
	}
	switch {
	case err == nil && uint64(len(out)) > limit:
		return nil, zstdLimitError(uint64(len(out)))
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, zstdLimitError(0)
	case err != nil:
		return nil, &zstdMessageError{err}
	}
	return out, nil
}

// zstdLimitError reports a zstd-compressed message larger than
// maxLineSize decompressed (size, when known, is how large).
func zstdLimitError(size uint64) error {
	if size > 0 {
		return newKindError(ErrLimit, nil, fmt.Sprintf("zstd-compressed message of %d bytes decompressed, more than %d", size, maxLineSize))
	}
	return newKindError(ErrLimit, nil, fmt.Sprintf("zstd-compressed message larger than %d bytes decompressed", maxLineSize))
}
