package ingest

import (
	"errors"
	"fmt"
)

// Errors that ReadFile and AppendRequest wrap, so that callers can tell what
// kind of problem an error reports with errors.Is, whatever its wording.
var (
	// ErrTruncated reports input that ends part-way: a gzip or zstd stream
	// cut short, a length-prefixed message or a JSON request that the file
	// ends inside. It is what a file copied while it is still being written
	// looks like. Everything before the cut was decoded and emitted.
	ErrTruncated = errors.New("input truncated")

	// ErrTrailingData reports bytes after the end of a gzip or zstd stream
	// that do not start another gzip member or zstd frame (padding, or junk
	// appended to the file). They are ignored; everything before them was
	// decoded and emitted.
	ErrTrailingData = errors.New("trailing data after the compressed stream")

	// ErrCorrupt reports input damaged part-way (a gzip or zstd checksum or
	// decompression error, a length prefix out of range after valid
	// messages), after which nothing more can be read. Everything before the
	// damage was decoded and emitted.
	ErrCorrupt = errors.New("corrupt input")

	// ErrFormat reports a file that is not in any format ReadFile reads
	// (or is damaged from its first bytes): nothing in it is OTLP traces.
	ErrFormat = errors.New("not an OTLP trace file")

	// ErrNotTraces reports a well-formed JSON request that holds something
	// other than OTLP traces: OTLP logs, metrics or profiles (a collector's
	// file exporter shared by several pipelines writes them all to one
	// file), or Jaeger or Zipkin JSON.
	ErrNotTraces = errors.New("not OTLP traces")

	// ErrLimit reports a JSON request that exceeds MaxJSONDepth or
	// MaxJSONElements, rejected before it is decoded, a protobuf request
	// whose attribute values nest deeper than MaxProtoDepth, a
	// zstd-compressed message larger than MaxRequestSize decompressed, or a
	// zstd frame that asks for a window over MaxZstdWindow (which ends the
	// file's reading).
	ErrLimit = errors.New("request exceeds a decoding limit")
)

// kindError is an error with its own text that wraps a kind (one of the
// errors above) and, when there is one, the underlying cause. The kind is not
// part of the text: the text says the same in words that fit the case.
type kindError struct {
	msg  string
	errs []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.errs }

// newKindError returns an error reading msg that wraps kind and cause (which
// may be nil).
func newKindError(kind, cause error, msg string) error {
	if cause == nil {
		return &kindError{msg: msg, errs: []error{kind}}
	}
	return &kindError{msg: msg, errs: []error{kind, cause}}
}

// plural returns "1 line", "2 lines".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
