// Package ingest is OTLP decoding at the edge: it turns OpenTelemetry trace
// data (pdata, OTLP protobuf and OTLP JSON, and the files the OpenTelemetry
// Collector's file exporter writes, in every format and compression it
// writes them) into compact graph.Span records, applying
// every span convention of docs/SPEC.md §2 exactly once, so that nothing downstream
// ever looks at an attribute map.
//
// A Decoder is the unit of work: it carries the configuration (the claim
// header name), a string intern table and scratch buffers. It is not safe for
// concurrent use; give each goroutine its own.
//
// OTLP protobuf is decoded straight from its bytes, in one pass, into
// graph.Span records: no pdata object is built, the strings kept are
// interned, and a warm Decoder allocates nothing per span. It accepts and
// rejects exactly what pdata does and gives the spans pdata's path would
// (differential tests and a fuzz target hold it to that). OTLP/JSON goes
// through pdata.
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
// is checked before pdata decodes it, so that no request can nest deeper than
// MaxJSONDepth or make pdata allocate without bound (MaxJSONElements). Errors
// name the file and the line or message, and wrap a kind that callers can
// test with errors.Is: a partial file (ErrTruncated, ErrTrailingData,
// ErrCorrupt), what is not OTLP traces at all (ErrFormat, ErrNotTraces), a
// request over a limit (ErrLimit).
package ingest
