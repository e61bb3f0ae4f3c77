// Package kafka reads the traces that the OpenTelemetry Collector's kafka
// exporter writes to a Kafka topic and hands their spans to a
// pipeline.Consumer, with at-least-once delivery.
//
// # What the exporter writes
//
// The collector-contrib kafkaexporter writes, for traces, one Kafka record
// per export: its value is one OTLP ExportTraceServiceRequest (the same
// message as TracesData), encoded as protobuf (encoding otlp_proto, the
// default) or OTLP JSON (otlp_json). With partition_traces_by_id the export
// is first split per trace and each record's key is the trace id in hex, so
// a trace stays on one partition; its spans may still arrive over many
// records (each batch the collector exports holds what it had of the trace
// at the time), so nothing here assumes a trace is whole in one record.
// Oversized exports are split at resource, scope and span level, each part a
// complete request. The exporter sets no header that describes the payload
// (only the user's record_headers and include_metadata_keys), so the
// encoding comes from Config.Encoding, and a record whose value starts with
// '{' is read as JSON whatever it says: no protobuf request starts with that
// byte (0x7B would be field 15 as a group, which the message does not have).
// Kafka-level compression (the exporter's producer::compression: gzip,
// snappy, lz4, zstd, at any compression_params::level; the exporter
// produces with franz-go) is undone by the client, which has every codec,
// before a record reaches us.
// The jaeger_* and zipkin_* encodings are not OTLP: such records are counted
// as bad, or as empty when they happen to parse (a Jaeger JSON span is a
// JSON object with no OTLP field).
//
// # Delivery
//
// A Receiver is one member of a consumer group. It fetches records into a
// batch (up to MaxBatchMessages, MaxBatchBytes or MaxBatchSpans, or
// MaxBatchWait after the batch's first record), decodes them all, calls
// Consume once with all their spans, and commits the batch's offsets only
// after Consume returned nil: only then are the spans durable. When the store refuses (backpressure,
// outage) the same batch is offered again with capped exponential backoff,
// and nothing more is fetched meanwhile: consumption pauses and resumes by
// itself. A record that does not decode is counted, logged and committed
// with its batch (it will never decode); nothing else in the batch is lost.
// A batch that was not committed when the Receiver stopped (or crashed) is
// read again by whichever member owns its partitions next; the span store
// keeps each (trace id, span id) once, so a re-read costs work, never
// correctness.
//
// # Brokers that refuse the connection
//
// Before its client starts, and whenever the client reports an error, a
// Receiver connects to each bootstrap broker itself, one step at a time —
// TCP, the TLS handshake, Kafka's ApiVersions, SASL, a metadata request —
// so that it can say which step failed and which setting fixes it: a
// password or user the broker refuses (--kafka-sasl-username, the
// password), a broker certificate no CA of --kafka-tls-ca signed, a
// certificate expired (the broker's, or ours, --kafka-tls-cert, with its
// NotAfter), a certificate without the name we connect with
// (--kafka-tls-server-name), a client certificate refused or missing, TLS
// on one side only (a probe confirms which side speaks TLS), SASL on one
// side only, or no broker reachable (--kafka-brokers). kafka-go's own
// errors do not carry this (a TLS error loses the broker's address, a
// broker closing the connection reads as EOF). One log line per failure,
// when it starts or changes; each failed check counted by reason; the
// failure reported to Config.Health (/readyz) until a check passes. While
// failing, the checks repeat with capped exponential backoff, and before
// the first passing one the client is not started: nothing is fetched or
// committed. A broker that cannot be reached while another one can is not
// a failure (the cluster moves its partitions).
package kafka
