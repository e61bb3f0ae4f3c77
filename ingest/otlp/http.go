package otlp

import (
	"encoding/json"
	"errors"
	"fmt"
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

// httpRequest is what the headers of an OTLP/HTTP request say.
type httpRequest struct {
	r       *http.Request
	isJSON  bool   // the body is OTLP JSON (else protobuf)
	errJSON bool   // errors are answered in JSON
	coding  coding // the body's Content-Encoding
}

// ServeHTTP answers POST /v1/traces; see the package documentation for
// every answer. The body is read before the request takes an admission
// slot (readRaw), decompressed and decoded once it has one.
func (h httpHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	s := h.s
	req, ok := s.checkHTTP(rw, r)
	if !ok {
		return
	}
	if s.saturated() {
		// Refused before the body is read: a client retrying into an
		// overloaded server costs it little. Its spans are unknown; the
		// request is counted, as a 503.
		s.unavailable(rw, req, refBackpressure, failBackpressure.clientMessage())
		return
	}
	w := s.getWork()
	defer s.putWork(w)

	raw, err := s.readRaw(w, rw, r)
	if err != nil {
		s.bodyRefused(rw, req, err)
		return
	}
	ctx := r.Context()
	if !s.acquire(ctx) {
		s.unavailable(rw, req, refBusy, busyMessage)
		return
	}
	defer s.release()

	body, err := w.decompress(req.coding, raw, s.cfg.MaxBodyBytes)
	if err != nil {
		s.bodyRefused(rw, req, err)
		return
	}
	start := time.Now()
	spans, err := w.dec.AppendRequest(w.spans[:0], body, req.isJSON)
	if err != nil {
		what := "protobuf"
		if req.isJSON {
			what = "JSON"
		}
		s.refuseHTTP(rw, req, http.StatusBadRequest, codes.InvalidArgument, refMalformed,
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
		s.unavailable(rw, req, o.fail.refusal(), o.fail.clientMessage(), "spans", o.offered(), "err", o.err)
		return
	default:
		s.refuseHTTP(rw, req, http.StatusInternalServerError, codes.Internal, refInternal, o.fail.clientMessage(),
			"spans", o.offered(), "err", o.err)
		return
	}
	s.answerHTTP(rw, req, &o)
}

// checkHTTP checks what a request's headers say, before its body is read,
// and answers the request when they make it one the receiver refuses.
func (s *Server) checkHTTP(rw http.ResponseWriter, r *http.Request) (httpRequest, bool) {
	req := httpRequest{r: r}
	// Errors are answered in the request's content type when it is one of
	// ours, else in JSON, the readable one.
	isJSON, known := mediaType(r.Header.Get("Content-Type"))
	req.isJSON, req.errJSON = isJSON, isJSON || !known

	if r.URL.Path != TracesPath {
		s.refuseHTTP(rw, req, http.StatusNotFound, codes.NotFound, refNotFound,
			"no such path: OTLP traces are POSTed to "+TracesPath, "path", clip(r.URL.Path))
		return req, false
	}
	if !s.auth.Allow(r.Header.Get("Authorization")) {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="stormradius"`)
		s.refuseHTTP(rw, req, http.StatusUnauthorized, codes.Unauthenticated, refUnauthenticated, "missing or invalid bearer token")
		return req, false
	}
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		s.refuseHTTP(rw, req, http.StatusMethodNotAllowed, codes.Unimplemented, refMethod, "method "+clip(r.Method)+" not allowed: use POST")
		return req, false
	}
	if !known {
		// Accept-Post (W3C LDP, IANA-registered) names what a POST takes.
		rw.Header().Set("Accept-Post", contentTypeProto+", "+contentTypeJSON)
		s.refuseHTTP(rw, req, http.StatusUnsupportedMediaType, codes.InvalidArgument, refMediaType,
			"unsupported Content-Type "+strconv.Quote(clip(r.Header.Get("Content-Type")))+": send "+contentTypeProto+" or "+contentTypeJSON)
		return req, false
	}
	c, ok := parseCoding(r.Header.Get("Content-Encoding"))
	if !ok {
		rw.Header().Set("Accept-Encoding", acceptEncoding) // RFC 9110 §12.5.3
		s.refuseHTTP(rw, req, http.StatusUnsupportedMediaType, codes.InvalidArgument, refEncoding,
			"unsupported Content-Encoding "+strconv.Quote(clip(r.Header.Get("Content-Encoding")))+": send one of "+acceptEncoding)
		return req, false
	}
	req.coding = c
	if r.ContentLength > s.cfg.MaxBodyBytes {
		s.tooLarge(rw, req)
		return req, false
	}
	return req, true
}

// bodyRefused answers a request whose body could not be read or
// decompressed.
func (s *Server) bodyRefused(rw http.ResponseWriter, req httpRequest, err error) {
	switch {
	case errors.Is(err, errTooLarge):
		s.tooLarge(rw, req)
	case errors.Is(err, errSlowBody):
		// The Collector drops what is answered 408, but a client this slow
		// could not have sent it anyway; the connection is not worth
		// keeping.
		rw.Header().Set("Connection", "close")
		s.refuseHTTP(rw, req, http.StatusRequestTimeout, codes.DeadlineExceeded, refSlowBody, fmt.Sprintf(
			"request body arrived slower than %d bytes/s over %v, or took over %v", s.cfg.MinBodyRate, s.cfg.BodyRateWindow, s.cfg.BodyTimeout))
	case errors.Is(err, errNoBudget):
		rw.Header().Set("Connection", "close") // the rest of the body is not read
		s.unavailable(rw, req, refBusy, "stormradius is busy: too many request bodies being received, retry later")
	default:
		var be *bodyError
		if !errors.As(err, &be) {
			s.refuseHTTP(rw, req, http.StatusInternalServerError, codes.Internal, refInternal, "internal error: cannot read the body", "err", err)
			return
		}
		s.refuseHTTP(rw, req, http.StatusBadRequest, codes.InvalidArgument, refMalformed, err.Error())
	}
}

// answerHTTP answers a request whose spans were stored: an empty
// ExportTraceServiceResponse, or a partial success naming the rejected
// spans.
func (s *Server) answerHTTP(rw http.ResponseWriter, req httpRequest, o *outcome) {
	out := emptyProto
	if req.isJSON {
		out = emptyJSON
	}
	if n := o.permanentRejects(); n > 0 {
		resp := ptraceotlp.NewExportResponse()
		ps := resp.PartialSuccess()
		ps.SetRejectedSpans(int64(n))
		ps.SetErrorMessage(o.rejectMessage())
		var err error
		if req.isJSON {
			out, err = resp.MarshalJSON()
		} else {
			out, err = resp.MarshalProto()
		}
		if err != nil {
			// The spans are stored: say so even if the details are lost.
			s.log.Error("otlp: encode partial success", "err", err)
			out = emptyProto
			if req.isJSON {
				out = emptyJSON
			}
		}
	}
	ct := contentTypeProto
	if req.isJSON {
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

func (s *Server) tooLarge(rw http.ResponseWriter, req httpRequest) {
	s.refuseHTTP(rw, req, http.StatusRequestEntityTooLarge, codes.ResourceExhausted, refTooLarge,
		"request body larger than "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes (as sent or decompressed): send smaller batches")
}

// unavailable answers 503 with Retry-After.
func (s *Server) unavailable(rw http.ResponseWriter, req httpRequest, why refusal, msg string, attrs ...any) {
	rw.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(s.cfg.RetryAfter)))
	s.refuseHTTP(rw, req, http.StatusServiceUnavailable, codes.Unavailable, why, msg, attrs...)
}

// refuseHTTP answers a request with an error (httpError), and counts and
// logs it as refused for why. attrs are logged with what the client sent.
func (s *Server) refuseHTTP(rw http.ResponseWriter, req httpRequest, status int, code codes.Code, why refusal, msg string, attrs ...any) {
	r := req.r
	s.refused(protoHTTP, why, strconv.Itoa(status), msg, func() []any {
		return append(attrs, "remote", r.RemoteAddr, "user_agent", clip(r.UserAgent()),
			"content_type", clip(r.Header.Get("Content-Type")),
			"content_encoding", clip(r.Header.Get("Content-Encoding")),
			"content_length", r.ContentLength)
	})
	s.httpError(rw, req.errJSON, status, code, msg)
}

// clip shortens what a client sent to a length fit for a log line or an
// answer.
func clip(v string) string {
	const n = 128
	if len(v) <= n {
		return v
	}
	return strings.ToValidUTF8(v[:n], "") + "…"
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
