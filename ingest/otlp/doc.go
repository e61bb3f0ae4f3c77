// Package otlp is the OTLP trace receivers: the gRPC TraceService (default
// :4317) and OTLP/HTTP POST /v1/traces (default :4318), as an OpenTelemetry
// Collector's otlp and otlphttp exporters (and the SDKs' exporters) expect
// them. They decode requests into graph.Span records with an ingest.Decoder
// and hand them to a store.Consumer; a request is acknowledged only once
// Consume returned nil, that is once its spans are durably stored (SPEC §6).
//
// Protobuf requests, over HTTP and over gRPC, reach the ingest.Decoder as
// their bytes and are decoded straight into spans, without pdata's object
// model: the gRPC server's codec hands the Export request over undecoded
// (gzip, which the Collector sends by default, is undone by grpc first).
// pdata decodes OTLP/JSON and builds the answers.
//
// # Rejected spans
//
// A span the store could not key, or that would corrupt its trace's
// analysis, is rejected on its own; the rest of its request is stored and
// the answer is a partial success (rejected_spans and an error message that
// counts each reason). A request is never refused for one bad span.
//
//   - invalid_trace_id: the trace id is all zeros (OTLP: invalid).
//   - invalid_span_id: the span id is all zeros (OTLP: invalid).
//   - missing_start_time: the start time is 0. OTLP requires it; a trace's
//     window is that of its earliest span, so one such span would move its
//     whole trace to January 1970.
//
// A span with a wrong-length id makes the whole request undecodable (400 /
// INTERNAL, see below), as it is for pdata and the Collector. Self-parents, missing parents and end times before start times
// are kept: trace assembly handles them (SPEC §3).
//
// # Answers
//
//	outcome                              HTTP                           gRPC
//	stored (maybe some spans rejected)   200 ExportTraceServiceResponse OK, ExportTraceServiceResponse
//	                                     (partial_success if rejected)  (partial_success if rejected)
//	Consume: ErrBackpressure,            503 + Retry-After              UNAVAILABLE + RetryInfo
//	  ErrUnavailable, ErrClosed
//	receiver busy (MaxInflightRequests)  503 + Retry-After              UNAVAILABLE + RetryInfo
//	Consume: the caller gave up          503                            CANCELLED / DEADLINE_EXCEEDED
//	Consume: any other error             500                            INTERNAL
//	undecodable body                     400                            INTERNAL (as grpc's own answer)
//	body or message too large            413                            RESOURCE_EXHAUSTED (grpc's own)
//	missing or wrong bearer token        401 + WWW-Authenticate         UNAUTHENTICATED
//	Content-Type not protobuf or JSON,   415                            -
//	  Content-Encoding not gzip/identity
//	method not POST                      405 + Allow: POST              -
//	path not /v1/traces                  404                            UNIMPLEMENTED (grpc's own)
//
// The Collector retries 503 and UNAVAILABLE (honouring Retry-After and
// RetryInfo) and drops what is answered otherwise, so only what cannot
// succeed on a retry is answered with a permanent status. HTTP error bodies
// are a google.rpc.Status in the request's content type (JSON when the
// content type is not one of the two), as OTLP/HTTP specifies.
//
// A gRPC request is decoded before admission control, as grpc-go decodes
// messages before any handler runs, and one that does not decode is
// answered INTERNAL ("grpc: failed to unmarshal the received message: ..."),
// grpc's own answer to a message it cannot decode; the Collector's own
// receiver answers the same way, and its exporter does not retry INTERNAL,
// which is what malformed data needs.
//
// # Metrics
//
// Registered on Config.Registerer, every one labelled protocol="grpc" or
// "http":
//
//	stormradius_otlp_spans_received_total             spans decoded from requests
//	stormradius_otlp_spans_accepted_total             spans stored and acknowledged
//	stormradius_otlp_spans_rejected_total{reason}     invalid_trace_id, invalid_span_id,
//	                                                  missing_start_time (for good);
//	                                                  backpressure, unavailable, busy
//	                                                  (retryable); canceled; internal
//	stormradius_otlp_requests_total{status}           answers: HTTP status code, or gRPC
//	                                                  code name (OK, Unavailable, ...)
//	stormradius_otlp_request_duration_seconds         histogram: decode + Consume
//
// Spans of a request refused before its body was read or decoded (HTTP:
// busy, too large, unauthenticated; both: undecodable) cannot be counted;
// the request is, by its status.
//
// # Memory
//
// At most MaxInflightRequests requests are stored at once, each holding one
// body of at most MaxBodyBytes (after decompression: a gzip bomb is cut off
// at the limit and answered 413, RESOURCE_EXHAUSTED over gRPC) and its
// decoded spans; HTTP requests are read and decoded under that bound too,
// gRPC ones just before it (grpc holds at most MaxInflightRequests streams
// per connection). Decoders, span slices, body buffers and gzip readers are
// pooled, and protobuf is decoded without pdata: a steady stream of requests
// allocates next to nothing per span.
package otlp
