// Package ingest is OTLP decoding at the edge: it turns OpenTelemetry trace
// data (pdata, OTLP protobuf and OTLP JSON, and the files the OpenTelemetry
// Collector's file exporter writes, in every format and compression it
// writes them) into compact graph.Span records, applying
// every span convention of docs/SPEC.md §2 exactly once, so that nothing downstream
// ever looks at an attribute map.
//
// A Decoder is the unit of work: it carries the configuration (the claim
// header name, where sampling probabilities are read from and what is
// assumed when none is: SamplingConfig), a string intern table and
// scratch buffers. It is not safe for
// concurrent use; give each goroutine its own.
//
// OTLP protobuf and OTLP/JSON are decoded straight from their bytes, in
// one pass, into graph.Span records: no pdata object is built, the strings
// kept are interned, and a warm Decoder allocates nothing per span. Each
// decoder accepts and rejects exactly what pdata does (for JSON, pdata's
// JSONUnmarshaler, jsoniter's leniencies and all: see jsondec.go) and
// gives the spans pdata's path would; differential tests and fuzz targets
// hold them to that. The one difference is on purpose: a JSON object
// with a field named "", which pdata's decoders take for the end of the
// object before they read the rest of the request out of step, is
// rejected. Trace and span ids in base64 (protobuf's generic JSON
// mapping) are accepted in JSON as well as hex, as they were before.
//
// Names are bounded here, once, for every path: a service, version, span,
// operation or peer name longer than graph.MaxNameLen bytes is cut on a
// character boundary and marked (graph.CapName; the span's Truncated flag
// says so), and a name beginning with '⟨' — the first rune of the
// analysis's reserved names, graph.OtherAPI and its kin — gets '<'
// instead.
//
// Input is untrusted. Nothing panics on any input; a protobuf request whose
// attribute values nest deeper than MaxProtoDepth is rejected, and OTLP/JSON
// is checked by a scanner before it is decoded, so that no request can nest
// deeper than MaxJSONDepth or hold more than MaxJSONElements elements (the
// bounds are those pdata's path had). Errors
// name the file and the line or message, and wrap a kind that callers can
// test with errors.Is: a partial file (ErrTruncated, ErrTrailingData,
// ErrCorrupt), what is not OTLP traces at all (ErrFormat, ErrNotTraces), a
// request over a limit (ErrLimit).
package ingest
