// Package ownership is HTTP middleware that speaks the error-ownership
// claim protocol, which keeps retries of one error to one level of a call
// graph instead of every level (a retry storm).
//
// # The protocol
//
// Retrying at every hop multiplies load: with one retry per hop, a failure
// three levels down is tried 2·2·2 = 8 times. Error ownership lets exactly
// one level retry. Every error response (status ≥ 500) carries a claim
// header, x-error-claim by default:
//
//   - claimed: the error is the responder's own (none of its fail-close
//     dependencies failed), or it is propagated but nobody below retried
//     it, so the caller should retry it — at least once, somewhere;
//   - unclaimed: the error is propagated from a dependency and was already
//     retried below (or met a retry rule there and was denied by its limit,
//     budget or deadline), so the caller must not retry it again.
//
// A caller retries a failure that is claimed, carries no claim (the callee
// does not speak the protocol) or an invalid one, and never one that is
// unclaimed. A dependency whose failure the service absorbs (fail-open: a
// cache, an optional widget) never makes the service's error propagated.
// Decide is the decision matrix as a pure function.
//
// # Use
//
// Wrap the server's handler with Handler, send outbound requests through
// a client whose transport is Transport, with the serving request's context:
//
//	client := &http.Client{Transport: ownership.Transport(nil)}
//	mux.HandleFunc("GET /checkout", func(w http.ResponseWriter, r *http.Request) {
//		req, _ := http.NewRequestWithContext(r.Context(), "GET", inventoryURL, nil)
//		resp, err := client.Do(req)
//		...
//	})
//	http.ListenAndServe(":8080", ownership.Handler(mux))
//
// Handler tracks the calls the request makes (through its context) and sets
// the claim on its error responses; Transport retries by the claim, with
// exponential backoff and full jitter, a token-bucket budget, Retry-After,
// the context's deadline, and idempotency in mind. Calls that do not go
// over HTTP are recorded with Observe; FailOpen and WithFailOpen declare
// fail-open dependencies. UnaryServerInterceptor and UnaryClientInterceptor
// do the same for gRPC unary calls, with the claim in the response trailer.
//
// # Telemetry
//
// Both sides emit OpenTelemetry spans with the attributes the stormradius
// analysis reads (its docs/SPEC.md §2): a SERVER span per request with
// http.request.method, http.route, http.response.status_code, error.claim
// and the captured claim header http.response.header.x-error-claim; a
// CLIENT span per attempt with http.request.resend_count,
// retry.criteria_satisfied (the failure met the retry rule),
// retry.suppressed (only its unclaimed claim stopped a retry),
// dependency.fail_open and service.peer.name where they apply. Trace
// context is propagated with the configured propagator, so that spans of
// all services join one trace. With the OTel defaults (no provider or
// propagator set) nothing is recorded, and the middleware costs well under
// a microsecond per request (docs/PERFORMANCE.md).
package ownership
