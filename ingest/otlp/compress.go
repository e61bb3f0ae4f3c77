package otlp

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/stormradius/stormradius/ingest"
)

// coding is an HTTP Content-Encoding the receiver reads: every one the
// Collector's otlp_http exporter sends (confighttp: gzip, zstd, zlib and
// deflate, snappy, x-snappy-framed, lz4), and identity.
type coding uint8

const (
	codingIdentity coding = iota
	codingGzip
	codingDeflate // zlib (RFC 1950), as RFC 9110 and the Collector mean it; a raw deflate stream is read too
	codingZstd
	codingSnappy // the block format (RFC-less but what "snappy" means); the framing format too, detected
	codingLZ4    // the LZ4 frame format
	nCodings
)

// codingNames are the codings' names in logs and metrics.
var codingNames = [nCodings]string{"identity", "gzip", "deflate", "zstd", "snappy", "lz4"}

// acceptEncoding is what an unsupported Content-Encoding is told to send
// instead (RFC 9110 §12.5.3).
const acceptEncoding = "gzip, zstd, snappy, x-snappy-framed, deflate, zlib, lz4, identity"

// parseCoding returns the coding a Content-Encoding header names, and
// whether the receiver reads it. Names are case-insensitive (RFC 9110
// §8.4.1).
func parseCoding(ce string) (coding, bool) {
	ce = strings.TrimSpace(ce)
	switch {
	case ce == "", strings.EqualFold(ce, "identity"):
		return codingIdentity, true
	case strings.EqualFold(ce, "gzip"), strings.EqualFold(ce, "x-gzip"):
		return codingGzip, true
	case strings.EqualFold(ce, "zstd"):
		return codingZstd, true
	case strings.EqualFold(ce, "snappy"), strings.EqualFold(ce, "x-snappy-framed"):
		// The Collector sent the framing format as "snappy" until its
		// framedSnappy gate (now stable) moved it to "x-snappy-framed"
		// and made "snappy" the block format: both names read both
		// formats, told apart by the framing format's stream identifier.
		return codingSnappy, true
	case strings.EqualFold(ce, "deflate"), strings.EqualFold(ce, "zlib"):
		return codingDeflate, true
	case strings.EqualFold(ce, "lz4"):
		return codingLZ4, true
	}
	return 0, false
}

// snappyStreamID is the stream identifier chunk every snappy framing-format
// stream starts with (framing_format.txt §4.1).
var snappyStreamID = []byte{0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y'}

// isSnappyFramed reports whether b starts a snappy framing-format stream.
// A block never starts so: its first byte is the varint of its decoded
// length, and 0xff would need a continuation whose next byte is not 0x06.
func isSnappyFramed(b []byte) bool { return bytes.HasPrefix(b, snappyStreamID) }

// zstdMaxWindow bounds the window a zstd frame may ask for, and so the
// decoder's history memory. The Collector's HTTP exporter streams with
// klauspost/compress's default window (8 MiB), its gRPC one with 512 KiB;
// zstd's command line uses 8 MiB at its highest regular levels. Only
// --long frames ask for more; they are refused as too large.
const zstdMaxWindow = 32 << 20

// decoders are one request's decompressors, kept with its work so that a
// steady stream of compressed requests allocates none.
type decoders struct {
	src  bytes.Reader
	gz   *gzip.Reader
	zl   io.ReadCloser // zlib; also a zlib.Resetter
	fl   io.ReadCloser // raw deflate; also a flate.Resetter
	zstd *zstd.Decoder
	s2   *s2.Reader
	lz4  *lz4.Reader
}

// reader returns a reader of raw decompressed by c. Its errors, and those
// of the reader, are bodyErrors or errTooLarge.
func (d *decoders) reader(c coding, raw []byte) (io.Reader, error) {
	d.src.Reset(raw)
	var err error
	switch c {
	case codingGzip:
		if d.gz == nil {
			d.gz, err = gzip.NewReader(&d.src)
		} else {
			err = d.gz.Reset(&d.src)
		}
		if err != nil {
			return nil, codingErr(c, err)
		}
		return d.gz, nil
	case codingDeflate:
		if isZlib(raw) {
			if d.zl == nil {
				d.zl, err = zlib.NewReader(&d.src)
			} else {
				err = d.zl.(zlib.Resetter).Reset(&d.src, nil)
			}
			if err != nil {
				return nil, codingErr(c, err)
			}
			return d.zl, nil
		}
		if d.fl == nil {
			d.fl = flate.NewReader(&d.src)
		} else if err := d.fl.(flate.Resetter).Reset(&d.src, nil); err != nil {
			return nil, codingErr(c, err)
		}
		return d.fl, nil
	case codingZstd:
		if d.zstd == nil {
			if d.zstd, err = ingest.NewZstdReader(nil, zstdMaxWindow); err != nil {
				return nil, fmt.Errorf("zstd decoder: %w", err) // options are constants: not the client's fault
			}
		}
		if err := d.zstd.Reset(&d.src); err != nil {
			return nil, codingErr(c, err)
		}
		return d.zstd, nil
	case codingSnappy:
		if d.s2 == nil {
			d.s2 = snappy.NewReader(&d.src)
		} else {
			d.s2.Reset(&d.src)
		}
		return d.s2, nil
	case codingLZ4:
		if d.lz4 == nil {
			d.lz4 = lz4.NewReader(&d.src)
		} else {
			d.lz4.Reset(&d.src)
		}
		return d.lz4, nil
	}
	return &d.src, nil
}

// release drops the references to the last request's bytes.
func (d *decoders) release() {
	d.src.Reset(nil)
	if d.zstd != nil {
		_ = d.zstd.Reset(nil)
	}
}

// isZlib reports whether b starts with a zlib header (RFC 1950 §2.2:
// deflate, a window of at most 32 KiB, a header check that divides by 31).
// Some clients send raw deflate under "deflate"; a zlib header is never a
// valid start of one in practice, and the header check tells them apart.
func isZlib(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

// codingErr classifies an error of a decompressor: errTooLarge when it
// would need more memory than allowed, else a bodyError naming the coding.
func codingErr(c coding, err error) error {
	if err == nil || errors.Is(err, errTooLarge) {
		return err
	}
	var be *bodyError
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return fmt.Errorf("%w (zstd: %v)", errTooLarge, err)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // a coding's stream that ends before it began is cut short
	}
	return &bodyError{fmt.Errorf("read %s body: %w", codingNames[c], err)}
}

// decompressSnappyBlock decodes a snappy block into dst (reused when large
// enough). The decoded length is read from the block's header first, so
// that a block claiming more than limit costs no allocation.
func decompressSnappyBlock(dst, raw []byte, limit int64) ([]byte, error) {
	n, err := snappy.DecodedLen(raw)
	if err != nil {
		return nil, codingErr(codingSnappy, err)
	}
	if int64(n) > limit {
		return nil, errTooLarge
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	out, err := snappy.Decode(dst[:cap(dst)], raw)
	if err != nil {
		return nil, codingErr(codingSnappy, err)
	}
	return out, nil
}
