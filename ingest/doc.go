// Package ingest is OTLP decoding at the edge: it turns OpenTelemetry trace
// data (pdata, OTLP protobuf and OTLP JSON, and the files the OpenTelemetry
// Collector's file exporter writes) into compact graph.Span records, applying
// every span convention of SPEC §2 exactly once, so that nothing downstream
// ever looks at an attribute map.
//
// A Decoder is the unit of work: it carries the configuration (the claim
// header name), a string intern table and scratch buffers. It is not safe for
// concurrent use; give each goroutine its own.
package ingest
