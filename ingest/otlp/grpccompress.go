package otlp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/encoding"

	"github.com/stormradius/stormradius/ingest"

	// grpc's gzip codec, registered first: ours (below) wraps it.
	_ "google.golang.org/grpc/encoding/gzip"
)

// The Collector's otlp_grpc exporter compresses with gzip (the default),
// zstd or snappy (configgrpc); grpc answers a grpc-encoding it has no
// decompressor for with UNIMPLEMENTED, which the exporter takes for a
// permanent error and drops the data. So the receiver registers the two
// grpc lacks, under the names configgrpc sends, with the formats it writes:
// zstd frames, and snappy's framing format (configgrpc's snappy writer is
// snappy.NewBufferedWriter). grpc registers codecs process-wide, at init.
//
// It also wraps grpc's own gzip codec, for one reason: grpc answers a
// message that fails to decompress INTERNAL, and writes that status itself
// before the handler sees the error, where OTLP asks for INVALID_ARGUMENT
// (the client sent bad bytes). So every decompressor here is wrapped in a
// softReader, which ends a stream that fails with a trailer saying why
// instead of an error; Export finds it (decompressFailure) and answers
// INVALID_ARGUMENT. Compression, and decompression of what is valid, are
// unchanged, for any other grpc client or server in the process too.
//
// grpc bounds what the decompressors produce: it reads at most
// MaxRecvMsgSize+1 bytes from one and answers RESOURCE_EXHAUSTED past the
// limit, so a decompression bomb costs the limit, not what it expands to.
// The zstd decoder's window is bounded by zstdMaxWindow.
func init() {
	encoding.RegisterCompressor(softGzip{encoding.GetCompressor("gzip")})
	for _, c := range []encoding.Compressor{&zstdCompressor{}, &snappyCompressor{}} {
		if encoding.GetCompressor(c.Name()) == nil {
			encoding.RegisterCompressor(c)
		}
	}
}

// failureMark starts the trailer of a softReader's stream that failed: the
// mark, the error's text, and the text's length (2 bytes, big-endian). A
// valid message ends with these 16 bytes and a length that points back at
// them with odds of 2^-128.
var failureMark = []byte("\x00\xffstormradius\xfe\x01\x00")

// softReader reads r, and ends with a failure trailer in place of an
// error other than io.EOF.
type softReader struct {
	r       io.Reader
	trailer []byte
	failed  bool
}

func (s *softReader) Read(p []byte) (int, error) {
	if !s.failed {
		n, err := s.r.Read(p)
		if err == nil || err == io.EOF {
			return n, err
		}
		msg := err.Error()
		if len(msg) > 1000 {
			msg = msg[:1000]
		}
		s.failed = true
		s.trailer = append(append(bytes.Clone(failureMark), msg...), byte(len(msg)>>8), byte(len(msg)))
		if n > 0 {
			return n, nil
		}
	}
	if len(s.trailer) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.trailer)
	s.trailer = s.trailer[n:]
	return n, nil
}

func (s *softReader) Close() error {
	if c, ok := s.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// decompressFailure returns the error a softReader met decompressing msg,
// nil when msg decompressed.
func decompressFailure(msg []byte) error {
	if len(msg) < len(failureMark)+2 {
		return nil
	}
	n := int(binary.BigEndian.Uint16(msg[len(msg)-2:]))
	at := len(msg) - 2 - n - len(failureMark)
	if at < 0 || !bytes.Equal(msg[at:at+len(failureMark)], failureMark) {
		return nil
	}
	return errors.New(string(msg[at+len(failureMark) : len(msg)-2]))
}

// softGzip is grpc's own "gzip" codec (its pooled readers and writers)
// with its decompression wrapped in a softReader.
type softGzip struct{ encoding.Compressor }

func (c softGzip) Decompress(r io.Reader) (io.Reader, error) {
	z, err := c.Compressor.Decompress(r)
	if err != nil {
		return &softReader{r: errReader{err}}, nil
	}
	return &softReader{r: z}, nil // softReader.Close hands z back to grpc's pool
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// pooledReader reads r and hands it back (put) once read to the end, or
// closed (grpc closes a decompressor's reader that is an io.Closer, also
// when it stops reading at the size limit).
type pooledReader struct {
	r   io.Reader
	put func()
}

func (p *pooledReader) Read(b []byte) (int, error) {
	if p.put == nil {
		return 0, io.EOF
	}
	n, err := p.r.Read(b)
	if err != nil {
		p.Close()
	}
	return n, err
}

func (p *pooledReader) Close() error {
	if p.put != nil {
		p.put()
		p.put = nil
	}
	return nil
}

// zstdCompressor is grpc's "zstd" codec, with pooled decoders.
type zstdCompressor struct {
	decoders sync.Pool // *zstd.Decoder
	encoders sync.Pool // *zstd.Encoder
}

func (*zstdCompressor) Name() string { return "zstd" }

func (c *zstdCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	// Answers are empty messages, which grpc never compresses; a client
	// of this process (tests) may still ask for it.
	enc, ok := c.encoders.Get().(*zstd.Encoder)
	if !ok {
		var err error
		if enc, err = zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(512<<10)); err != nil {
			return nil, err
		}
	} else {
		enc.Reset(w)
	}
	return &zstdWriter{Encoder: enc, pool: &c.encoders}, nil
}

func (c *zstdCompressor) Decompress(r io.Reader) (io.Reader, error) {
	dec, ok := c.decoders.Get().(*zstd.Decoder)
	if !ok {
		var err error
		if dec, err = ingest.NewZstdReader(nil, zstdMaxWindow); err != nil {
			return nil, err
		}
	}
	if err := dec.Reset(r); err != nil {
		c.decoders.Put(dec)
		return &softReader{r: errReader{err}}, nil
	}
	return &softReader{r: &pooledReader{r: dec, put: func() {
		if dec.Reset(nil) == nil {
			c.decoders.Put(dec)
		}
	}}}, nil
}

type zstdWriter struct {
	*zstd.Encoder
	pool *sync.Pool
}

func (z *zstdWriter) Close() error {
	err := z.Encoder.Close()
	z.pool.Put(z.Encoder)
	return err
}

// snappyCompressor is grpc's "snappy" codec: snappy's framing format, as
// configgrpc writes it.
type snappyCompressor struct {
	readers sync.Pool // *s2.Reader
}

func (*snappyCompressor) Name() string { return "snappy" }

func (*snappyCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	return snappy.NewBufferedWriter(w), nil
}

// errSnappyBlock is the error of a gRPC message in snappy's block format:
// configgrpc, like every gRPC snappy codec, frames it.
var errSnappyBlock = errors.New("snappy: not a framing-format stream (gRPC's snappy encoding is snappy's framing format)")

func (c *snappyCompressor) Decompress(r io.Reader) (io.Reader, error) {
	var head [10]byte
	n, err := io.ReadFull(r, head[:])
	if !isSnappyFramed(head[:n]) {
		if err == nil || err == io.ErrUnexpectedEOF || err == io.EOF {
			err = errSnappyBlock
		}
		return &softReader{r: errReader{err}}, nil
	}
	rd, ok := c.readers.Get().(*s2.Reader)
	if !ok {
		rd = snappy.NewReader(nil)
	}
	rd.Reset(&prefixed{head: head[:], rest: r})
	return &softReader{r: &pooledReader{r: rd, put: func() {
		rd.Reset(nil)
		c.readers.Put(rd)
	}}}, nil
}

// prefixed reads head, then rest: a stream whose first bytes were peeked.
type prefixed struct {
	head []byte
	rest io.Reader
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.rest.Read(b)
}
