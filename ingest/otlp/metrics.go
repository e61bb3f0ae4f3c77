package otlp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

// protocol is a receiver: a label value of every metric.
type protocol uint8

const (
	protoGRPC protocol = iota
	protoHTTP
	nProtocols
)

var protocolNames = [nProtocols]string{"grpc", "http"}

// reason is why spans were not accepted: a label value of
// stormradius_otlp_spans_rejected_total.
type reason uint8

const (
	reasonTraceID      reason = iota // all-zero trace id: rejected for good
	reasonSpanID                     // all-zero span id: rejected for good
	reasonStartTime                  // start time 0: rejected for good
	reasonBackpressure               // Consume: ErrBackpressure (client retries)
	reasonUnavailable                // Consume: ErrUnavailable or ErrClosed (client retries)
	reasonBusy                       // MaxInflightRequests reached (client retries)
	reasonCanceled                   // the client gave up while Consume ran
	reasonInternal                   // Consume failed otherwise (client drops them)
	nReasons
)

var reasonNames = [nReasons]string{
	"invalid_trace_id", "invalid_span_id", "missing_start_time",
	"backpressure", "unavailable", "busy", "canceled", "internal",
}

// httpStatuses are the statuses the HTTP receiver answers, with their
// counters bound up front so that counting a request allocates nothing.
var httpStatuses = [...]int{
	http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized,
	http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestTimeout,
	http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
	http.StatusInternalServerError, http.StatusServiceUnavailable,
}

// nGRPCCodes is the number of gRPC status codes (OK..UNAUTHENTICATED).
const nGRPCCodes = 17

// metrics are the receivers' Prometheus metrics, with every label
// combination bound once.
type metrics struct {
	received [nProtocols]prometheus.Counter
	accepted [nProtocols]prometheus.Counter
	rejected [nProtocols][nReasons]prometheus.Counter
	duration [nProtocols]prometheus.Observer

	refused    [nProtocols][nRefusals]prometheus.Counter
	tlsRefused [nProtocols][nTLSRefusals]prometheus.Counter

	requests   *prometheus.CounterVec
	httpStatus [len(httpStatuses)]prometheus.Counter
	grpcCode   [nGRPCCodes]prometheus.Counter
}

// newMetrics creates the metrics and registers them on reg (when not nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	received := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stormradius_otlp_spans_received_total",
		Help: "Spans decoded from OTLP requests, by protocol.",
	}, []string{"protocol"})
	accepted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stormradius_otlp_spans_accepted_total",
		Help: "Spans durably stored and acknowledged, by protocol.",
	}, []string{"protocol"})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stormradius_otlp_spans_rejected_total",
		Help: "Spans not accepted, by protocol and reason: invalid_trace_id, invalid_span_id and missing_start_time are " +
			"rejected for good (partial success); backpressure, unavailable and busy were refused with a retryable status; " +
			"canceled when the client gave up; internal when storing failed otherwise.",
	}, []string{"protocol", "reason"})
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stormradius_otlp_requests_total",
		Help: "OTLP export requests answered, by protocol and status (HTTP status code, or gRPC status code name).",
	}, []string{"protocol", "status"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stormradius_otlp_requests_refused_total",
		Help: "OTLP export requests answered with an error, by protocol and reason: unauthenticated, not_found, " +
			"method_not_allowed, unsupported_media_type, unsupported_encoding, too_large, malformed (the sender drops these); " +
			"slow_body; busy, backpressure, unavailable (the sender retries); canceled; internal.",
	}, []string{"protocol", "reason"})
	tlsRefused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stormradius_otlp_tls_refused_total",
		Help: "TLS handshakes refused for the client's certificate (mutual TLS, --otlp-tls-client-ca), by protocol and reason: " +
			"no_client_cert, client_cert_expired, client_cert_unknown_ca (signed by no CA of the file), client_cert_invalid.",
	}, []string{"protocol", "reason"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "stormradius_otlp_request_duration_seconds",
		Help: "Time to decode an OTLP request and store its spans (until Consume returned), by protocol.",
		// From a decode of a small request to a slow store's commit.
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"protocol"})

	if reg != nil {
		var errs []error
		received = register(reg, received, &errs)
		accepted = register(reg, accepted, &errs)
		rejected = register(reg, rejected, &errs)
		requests = register(reg, requests, &errs)
		refused = register(reg, refused, &errs)
		tlsRefused = register(reg, tlsRefused, &errs)
		duration = register(reg, duration, &errs)
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("otlp: register metrics: %w", err)
		}
	}

	m := &metrics{requests: requests}
	for p := range nProtocols {
		name := protocolNames[p]
		m.received[p] = received.WithLabelValues(name)
		m.accepted[p] = accepted.WithLabelValues(name)
		for r := range nReasons {
			m.rejected[p][r] = rejected.WithLabelValues(name, reasonNames[r])
		}
		m.duration[p] = duration.WithLabelValues(name)
		for r := range nRefusals {
			m.refused[p][r] = refused.WithLabelValues(name, refusalNames[r])
		}
		for r := range nTLSRefusals {
			m.tlsRefused[p][r] = tlsRefused.WithLabelValues(name, tlsRefusalNames[r])
		}
	}
	for i, s := range httpStatuses {
		m.httpStatus[i] = requests.WithLabelValues("http", strconv.Itoa(s))
	}
	for c := range codes.Code(nGRPCCodes) {
		m.grpcCode[c] = requests.WithLabelValues("grpc", c.String())
	}
	return m, nil
}

// register registers c on reg, or returns the equal collector reg already
// holds, so that two Servers can share one registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errs *[]error) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(C); ok {
			return old
		}
	}
	*errs = append(*errs, err)
	return c
}

// httpRequest counts an HTTP request answered with status.
func (m *metrics) httpRequest(status int) {
	for i, s := range httpStatuses {
		if s == status {
			m.httpStatus[i].Inc()
			return
		}
	}
	m.requests.WithLabelValues("http", strconv.Itoa(status)).Inc()
}

// grpcRequest counts a gRPC request answered with code.
func (m *metrics) grpcRequest(c codes.Code) {
	if c < nGRPCCodes {
		m.grpcCode[c].Inc()
		return
	}
	m.requests.WithLabelValues("grpc", c.String()).Inc()
}
