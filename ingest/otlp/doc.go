// Package otlp is the OTLP trace receivers: the gRPC TraceService (default
// :4317) and OTLP/HTTP POST /v1/traces (default :4318), as an OpenTelemetry
// Collector's otlp and otlphttp exporters (and the SDKs' exporters) expect
// them. They decode requests into graph.Span records with an ingest.Decoder
// and hand them to a pipeline.Consumer; a request is acknowledged only once
// Consume returned nil, that is once its spans are durably stored (docs/SPEC.md §6).
//
// Protobuf requests, over HTTP and over gRPC, reach the ingest.Decoder as
// their bytes and are decoded straight into spans, without pdata's object
// model: the gRPC server's codec hands the Export request over undecoded
// (decompressed by grpc first). pdata decodes OTLP/JSON and builds the
// answers.
//
// # Compression
//
// Every compression the Collector's exporters send is read, under the
// names and in the formats they use (confighttp, configgrpc):
//
//	HTTP Content-Encoding           format
//	gzip, x-gzip                    gzip (members may be concatenated)
//	zstd                            zstd frames (windows up to 32 MiB)
//	snappy                          snappy's block format, or its framing format
//	                                (older collectors framed it; told apart by the
//	                                framing format's stream identifier)
//	x-snappy-framed                 snappy's framing format (or a block)
//	deflate, zlib                   zlib (RFC 1950), as the Collector sends "deflate";
//	                                a raw deflate stream too
//	lz4                             LZ4 frames
//	identity, none                  as is
//
//	gRPC grpc-encoding              gzip, zstd, snappy (framing format)
//
// A body is bounded by MaxBodyBytes both as sent and decompressed: a
// decompression bomb is cut off at the limit and answered 413 /
// RESOURCE_EXHAUSTED, its memory that of the limit.
//
// # Slow clients
//
// An HTTP request's body is read before the request takes one of the
// MaxInflightRequests slots, so a client that sends slowly, or not at all,
// holds none: each body must arrive at MinBodyRate over every
// BodyRateWindow (1 KiB/s over 5 s by default) and whole within BodyTimeout
// (1 min), else it is answered 408 and its connection closed; the bodies
// being received hold at most BodyBufferBytes (8 × MaxBodyBytes) of memory,
// grown with what arrives, never with what Content-Length announces, and a
// request that would pass it is answered 503 (retried). Headers are bounded
// by the server's ReadHeaderTimeout (10 s). grpc receives a gRPC message
// before Export runs, so a slow gRPC sender holds no slot either (HTTP/2
// flow control bounds what each stream buffers).
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
// INVALID_ARGUMENT, see below), as it is for pdata and the Collector.
// Self-parents, missing parents and end times before start times are kept:
// trace assembly handles them (docs/SPEC.md §3).
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
//	undecodable or undecompressable      400                            INVALID_ARGUMENT
//	body or message too large            413                            RESOURCE_EXHAUSTED (grpc's own)
//	body slower than MinBodyRate or      408 + Connection: close        -
//	  BodyTimeout
//	body budget full (BodyBufferBytes)   503 + Retry-After              -
//	missing or wrong bearer token        401 + WWW-Authenticate         UNAUTHENTICATED
//	Content-Type not protobuf or JSON    415 + Accept-Post              -
//	Content-Encoding not read            415 + Accept-Encoding          UNIMPLEMENTED (grpc's own)
//	method not POST                      405 + Allow: POST              -
//	path not /v1/traces                  404                            UNIMPLEMENTED (grpc's own)
//
// The Collector retries 503 and UNAVAILABLE (honouring Retry-After and
// RetryInfo) and drops what is answered otherwise, so only what cannot
// succeed on a retry is answered with a permanent status. HTTP error bodies
// are a google.rpc.Status in the request's content type (JSON when the
// content type is not one of the two), as OTLP/HTTP specifies.
//
// A gRPC request is decoded before admission control, as grpc-go receives
// messages before any handler runs, and one that does not decode or
// decompress is answered INVALID_ARGUMENT, OTLP's answer to a malformed
// request (grpc's own answer would be INTERNAL, a server fault to every
// dashboard); the Collector's exporter does not retry it, which is what
// malformed data needs.
//
// Every refused request (every answer but 200 / OK) is counted by reason
// and logged, at most once a second per protocol and reason, with what the
// client sent (remote address, user agent, content type and encoding, never
// a token) and how many like refusals the log left out; so are the spans
// of a partial success: what a sender drops for good is never silent here.
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
//	stormradius_otlp_requests_refused_total{reason}   requests answered with an error:
//	                                                  unauthenticated, not_found,
//	                                                  method_not_allowed,
//	                                                  unsupported_media_type,
//	                                                  unsupported_encoding, too_large,
//	                                                  malformed, slow_body, busy,
//	                                                  backpressure, unavailable,
//	                                                  canceled, internal
//	stormradius_otlp_request_duration_seconds         histogram: decode + Consume
//
// Spans of a request refused before its body was read or decoded (HTTP:
// busy, too large, unauthenticated; both: undecodable) cannot be counted;
// the request is, by its status.
//
// # Memory
//
// At most MaxInflightRequests requests are decompressed, decoded and stored
// at once, each holding one body of at most MaxBodyBytes (after
// decompression) and its decoded spans; HTTP bodies being received hold at
// most BodyBufferBytes more; gRPC requests are decoded just before the
// bound (grpc holds at most MaxInflightRequests streams per connection).
// Decoders, span slices, body buffers and decompressors are pooled, and
// protobuf is decoded without pdata: a steady stream of requests allocates
// next to nothing per span.
package otlp
