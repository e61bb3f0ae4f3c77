package otlp

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

const (
	contentTypeProto = "application/x-protobuf"
	contentTypeJSON  = "application/json"
)

// Precomputed successful answers: an ExportTraceServiceResponse without
// partial_success is no bytes in protobuf and {} in JSON.
var (
	emptyProto = []byte{}
	emptyJSON  = []byte("{}")
)

// httpHandler is the OTLP/HTTP receiver.
type httpHandler struct{ s *Server }

// ServeHTTP answers POST /v1/traces; see the package documentation for
// every answer.
func (h httpHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	s := h.s
	// Errors are answered in the request's content type when it is one of
	// ours, else in JSON, the readable one.
	isJSON, known := mediaType(r.Header.Get("Content-Type"))
	errJSON := isJSON || !known

	if r.URL.Path != TracesPath {
		s.httpError(rw, errJSON, http.StatusNotFound, codes.NotFound, "no such path: OTLP traces are POSTed to "+TracesPath)
		return
	}
	if !s.auth.allow(r.Header.Get("Authorization")) {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="stormradius"`)
		s.httpError(rw, errJSON, http.StatusUnauthorized, codes.Unauthenticated, "missing or invalid bearer token")
		return
	}
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		s.httpError(rw, errJSON, http.StatusMethodNotAllowed, codes.Unimplemented, "method "+r.Method+" not allowed: use POST")
		return
	}
	if !known {
		// Accept-Post (W3C LDP, IANA-registered) names what a POST takes.
		rw.Header().Set("Accept-Post", contentTypeProto+", "+contentTypeJSON)
		s.httpError(rw, errJSON, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			"unsupported Content-Type "+strconv.Quote(r.Header.Get("Content-Type"))+": send "+contentTypeProto+" or "+contentTypeJSON)
		return
	}
	gz, ok := contentEncoding(r.Header.Get("Content-Encoding"))
	if !ok {
		rw.Header().Set("Accept-Encoding", "gzip, identity") // RFC 9110 §12.5.3
		s.httpError(rw, errJSON, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			"unsupported Content-Encoding "+strconv.Quote(r.Header.Get("Content-Encoding"))+": send gzip or identity")
		return
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		s.tooLarge(rw, errJSON)
		return
	}

	ctx := r.Context()
	if s.saturated() {
		// Refused before the body is read, as below.
		s.unavailable(rw, errJSON, failBackpressure.clientMessage())
		return
	}
	if !s.acquire(ctx) {
		// The body is not read, so its spans are not counted: the
		// request is, as a 503.
		s.unavailable(rw, errJSON, busyMessage)
		return
	}
	defer s.release()
	w := s.getWork()
	defer s.putWork(w)

	body, err := w.readBody(rw, r, gz, s.cfg.MaxBodyBytes)
	if errors.Is(err, errTooLarge) {
		s.tooLarge(rw, errJSON)
		return
	}
	if err != nil {
		s.httpError(rw, errJSON, http.StatusBadRequest, codes.InvalidArgument, err.Error())
		return
	}

	start := time.Now()
	spans, err := w.dec.AppendRequest(w.spans[:0], body, isJSON)
	if err != nil {
		what := "protobuf"
		if isJSON {
			what = "JSON"
		}
		s.httpError(rw, errJSON, http.StatusBadRequest, codes.InvalidArgument,
			"cannot decode the body as an OTLP "+what+" ExportTraceServiceRequest: "+err.Error())
		return
	}
	w.spans = spans
	o := s.consume(ctx, protoHTTP, w, start)

	switch o.fail {
	case failNone:
	case failBackpressure, failUnavailable, failCanceled:
		// A canceled request has no one to read the answer, but a 503
		// is what it would have needed: retry.
		s.unavailable(rw, errJSON, o.fail.clientMessage())
		return
	default:
		s.httpError(rw, errJSON, http.StatusInternalServerError, codes.Internal, o.fail.clientMessage())
		return
	}

	out := emptyProto
	if isJSON {
		out = emptyJSON
	}
	if n := o.permanentRejects(); n > 0 {
		resp := ptraceotlp.NewExportResponse()
		ps := resp.PartialSuccess()
		ps.SetRejectedSpans(int64(n))
		ps.SetErrorMessage(o.rejectMessage())
		if isJSON {
			out, err = resp.MarshalJSON()
		} else {
			out, err = resp.MarshalProto()
		}
		if err != nil {
			// The spans are stored: say so even if the details are lost.
			s.log.Error("otlp: encode partial success", "err", err)
			out = emptyProto
			if isJSON {
				out = emptyJSON
			}
		}
	}
	ct := contentTypeProto
	if isJSON {
		ct = contentTypeJSON
	}
	s.writeHTTP(rw, ct, http.StatusOK, out)
}

// mediaType reports whether a Content-Type is OTLP JSON or protobuf, and
// whether it is either (parameters such as charset are ignored).
func mediaType(ct string) (isJSON, ok bool) {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	switch {
	case strings.EqualFold(ct, contentTypeProto):
		return false, true
	case strings.EqualFold(ct, contentTypeJSON):
		return true, true
	}
	return false, false
}

// contentEncoding reports whether a Content-Encoding is gzip, and whether
// it is one the receiver reads (gzip, identity or none).
func contentEncoding(ce string) (gz, ok bool) {
	ce = strings.TrimSpace(ce)
	switch {
	case ce == "", strings.EqualFold(ce, "identity"):
		return false, true
	case strings.EqualFold(ce, "gzip"), strings.EqualFold(ce, "x-gzip"):
		return true, true
	}
	return false, false
}

func (s *Server) tooLarge(rw http.ResponseWriter, isJSON bool) {
	s.httpError(rw, isJSON, http.StatusRequestEntityTooLarge, codes.ResourceExhausted,
		"request body larger than "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes (as sent or decompressed): send smaller batches")
}

// unavailable answers 503 with Retry-After.
func (s *Server) unavailable(rw http.ResponseWriter, isJSON bool, msg string) {
	rw.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(s.cfg.RetryAfter)))
	s.httpError(rw, isJSON, http.StatusServiceUnavailable, codes.Unavailable, msg)
}

// retryAfterSeconds rounds d up to whole seconds, at least one: Retry-After
// has no finer unit, and 0 would invite an immediate retry.
func retryAfterSeconds(d time.Duration) int {
	return int(max(1, min(math.Ceil(d.Seconds()), math.MaxInt32)))
}

// httpError answers status with a google.rpc.Status body, as OTLP/HTTP
// specifies for failures.
func (s *Server) httpError(rw http.ResponseWriter, isJSON bool, status int, code codes.Code, msg string) {
	var body []byte
	var err error
	ct := contentTypeProto
	if isJSON {
		// protojson's output of a Status without details, without its
		// deliberately unstable whitespace.
		ct = contentTypeJSON
		body, err = json.Marshal(struct {
			Code    int32  `json:"code"`
			Message string `json:"message"`
		}{int32(code), msg})
	} else {
		body, err = proto.Marshal(&spb.Status{Code: int32(code), Message: msg})
	}
	if err != nil { // not with these types; still, say something
		ct, body = "text/plain; charset=utf-8", []byte(msg)
	}
	if status == http.StatusRequestEntityTooLarge {
		// The rest of an oversized body is not worth reading.
		rw.Header().Set("Connection", "close")
	}
	s.writeHTTP(rw, ct, status, body)
}

// writeHTTP writes an answer and counts it.
func (s *Server) writeHTTP(rw http.ResponseWriter, contentType string, status int, body []byte) {
	h := rw.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rw.WriteHeader(status)
	_, _ = rw.Write(body) // a client that went away is not an error of ours
	s.metrics.httpRequest(status)
}
