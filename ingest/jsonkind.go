package ingest

import (
	"encoding/base64"
)

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
