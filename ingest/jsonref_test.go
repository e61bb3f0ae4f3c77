package ingest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// appendJSONPdata is the JSON path through pdata's object model, as
// AppendRequest had it before its own decoder, kept as the reference the
// decoder is compared with: the same pre-scan (checkJSON), pdata's
// JSONUnmarshaler, with base64 ids rewritten in hex and the request
// decoded again when pdata rejects an id, then AppendTraces.
func appendJSONPdata(d *Decoder, dst []graph.Span, b []byte) ([]graph.Span, error) {
	if err := checkJSON(b); err != nil {
		return dst, err
	}
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 0 && b[0] == '[' {
		return dst, notRequestArray(b)
	}
	if len(b) == 0 || b[0] != '{' {
		return dst, errors.New("not a JSON object: an OTLP/JSON request is an object with resourceSpans")
	}
	var u ptrace.JSONUnmarshaler
	td, err := u.UnmarshalTraces(b)
	if err != nil && isIDError(err) {
		if fixed, n := appendHexIDs(nil, b); n > 0 {
			td, err = u.UnmarshalTraces(fixed)
		}
		if err != nil && isIDError(err) {
			return dst, fmt.Errorf("trace and span ids must be hex in OTLP/JSON (32 and 16 digits): %w", err)
		}
	}
	if err != nil {
		return dst, err
	}
	n := len(dst)
	dst = d.AppendTraces(dst, td)
	if len(dst) == n {
		if err := otherKind(b); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// isIDError reports whether pdata rejected a trace or span id. pdata's error
// has no type: its text is all there is to go by ("ID.UnmarshalJSONIter:
// length mismatch, ..." or an invalid hex digit).
func isIDError(err error) bool {
	return strings.Contains(err.Error(), "ID.UnmarshalJSONIter")
}

// appendHexIDs appends b to dst with every trace or span id written in
// base64 (protobuf's JSON mapping of bytes) rewritten in hex, and returns it
// with the number of ids rewritten. Only strings that cannot be hex ids
// (base64 of 16 or 8 bytes is 24 or 12 characters with padding, 22 or 11
// without; hex ids have 32 or 16) and that decode as base64 to exactly the
// id's size are rewritten.
func appendHexIDs(dst, b []byte) ([]byte, int) {
	n, last := 0, 0
	var raw [16]byte
	forEachKey(b, -1, func(key []byte, v int) bool {
		size := 0
		switch string(key) {
		case "traceId", "trace_id":
			size = 16
		case "spanId", "span_id", "parentSpanId", "parent_span_id":
			size = 8
		default:
			return true
		}
		if v >= len(b) || b[v] != '"' {
			return true
		}
		end := bytes.IndexByte(b[v+1:], '"')
		if end < 0 {
			return true
		}
		s := b[v+1 : v+1+end]
		if bytes.IndexByte(s, '\\') >= 0 || len(s) == 2*size {
			return true
		}
		if m, ok := decodeBase64ID(raw[:size], s); !ok || m != size {
			return true
		}
		dst = append(dst, b[last:v+1]...)
		dst = hex.AppendEncode(dst, raw[:size])
		last = v + 1 + end
		n++
		return true
	})
	if n == 0 {
		return dst, 0
	}
	return append(dst, b[last:]...), n
}
