package ingest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/stormradius/stormradius/graph"
)

// decodeJSON decodes one JSON request that checkJSON (or a jsonScanner)
// accepted, and appends its spans to dst. What it does beyond pdata's
// unmarshal happens only when that fails or finds no span, so that the
// common case pays nothing for it.
func (d *Decoder) decodeJSON(dst []graph.Span, b []byte) ([]graph.Span, error) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 0 && b[0] == '[' {
		return dst, notRequestArray(b)
	}
	if len(b) == 0 || b[0] != '{' {
		return dst, errors.New("not a JSON object: an OTLP/JSON request is an object with resourceSpans")
	}
	td, err := d.jsonU.UnmarshalTraces(b)
	if err != nil && isIDError(err) {
		// Protobuf's generic JSON mapping (protojson, grpcurl) writes bytes
		// as base64, while OTLP/JSON wants trace and span ids in hex.
		// Rewrite base64 ids as hex and decode again: the cost falls only
		// on requests that need it.
		if fixed, n := appendHexIDs(d.ids[:0], b); n > 0 {
			d.ids = fixed
			td, err = d.jsonU.UnmarshalTraces(fixed)
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
// length mismatch, ..." or an invalid hex digit); a change of wording in a
// new pdata only loses the base64 fallback, which a test catches.
func isIDError(err error) bool {
	return strings.Contains(err.Error(), "ID.UnmarshalJSONIter")
}

// otherKind recognises, from its top-level keys, a JSON request that held no
// spans because it is not traces. It returns nil for a trace request that
// happens to be empty ({} or {"resourceSpans":[]}).
func otherKind(b []byte) error {
	var err error
	forEachKey(b, 1, func(key []byte, value int) bool {
		switch string(key) {
		case "resourceLogs", "resource_logs":
			err = newKindError(ErrNotTraces, nil, "OTLP logs, not traces")
		case "resourceMetrics", "resource_metrics":
			err = newKindError(ErrNotTraces, nil, "OTLP metrics, not traces")
		case "resourceProfiles", "resource_profiles":
			err = newKindError(ErrNotTraces, nil, "OTLP profiles, not traces")
		case "data":
			// Jaeger's query API and its UI's "Download JSON":
			// {"data":[{"traceID":..., "spans":[...], "processes":{...}}]}.
			err = newKindError(ErrNotTraces, nil, "Jaeger JSON is not supported: export OTLP (e.g. the collector's file exporter, or Jaeger's /api/v3 OTLP endpoint)")
		case "result":
			// Jaeger's API v3 wraps an OTLP request: {"result":{"resourceSpans":...}}.
			err = newKindError(ErrNotTraces, nil, `a Jaeger API v3 response: its "result" field holds the OTLP request (extract it, e.g. jq -c .result)`)
		}
		return err == nil
	})
	return err
}

// notRequestArray says what a JSON array given as a request is.
func notRequestArray(b []byte) error {
	// Zipkin v2 JSON: [{"traceId":..., "id":..., "localEndpoint":{...}}],
	// or an array of such arrays (its /api/v2/traces).
	var traceID, id bool
	forEachKey(b, -1, func(key []byte, _ int) bool {
		switch string(key) {
		case "traceId":
			traceID = true
		case "id", "localEndpoint", "remoteEndpoint":
			id = true
		}
		return !(traceID && id)
	})
	if traceID && id {
		return newKindError(ErrNotTraces, nil, "Zipkin JSON is not supported: export OTLP (e.g. the collector's file exporter)")
	}
	return newKindError(ErrNotTraces, nil, "a JSON array, not an OTLP/JSON request (an object with resourceSpans)")
}

// forEachKey calls f with each object key in b, JSON that a jsonScanner
// accepted, at the given depth (1: the keys of the top-level object; -1:
// every depth), and the index in b where the key's value starts (after
// the colon and any whitespace). It stops when f returns false. It is for
// cold paths: it walks all of b.
func forEachKey(b []byte, depth int, f func(key []byte, value int) bool) {
	d := 0
	for i := 0; i < len(b); {
		switch b[i] {
		case '{', '[':
			d++
			i++
		case '}', ']':
			d--
			i++
		case '"':
			var s jsonScanner
			j := s.skipString(b, i+1)
			if j < 0 {
				return
			}
			k := skipSpace(b, j)
			if k < len(b) && b[k] == ':' && (depth < 0 || d == depth) {
				if !f(b[i+1:j-1], skipSpace(b, k+1)) {
					return
				}
			}
			i = j
		default:
			i++
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
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

// decodeBase64ID decodes s, in any of the standard or URL-safe base64
// alphabets, padded or not, into dst (which it must fill exactly).
func decodeBase64ID(dst, s []byte) (int, bool) {
	for _, enc := range [...]*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if enc.DecodedLen(len(s)) < len(dst) || enc.DecodedLen(len(s)) > len(dst)+2 {
			continue
		}
		var buf [18]byte
		if n, err := enc.Decode(buf[:], s); err == nil && n == len(dst) {
			copy(dst, buf[:n])
			return n, true
		}
	}
	return 0, false
}
