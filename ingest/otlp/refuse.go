package otlp

import (
	"context"
	"crypto/tls"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/stormradius/stormradius/internal/certs"
)

// refusal is why a request was answered with an error: a label value of
// stormradius_otlp_requests_refused_total. A sender drops what is refused
// for good (every reason but busy, backpressure, unavailable and slow_body
// — and the Collector drops a 408 too), so each refusal is counted and
// logged here: a sender's permanent error is never silent on our side.
type refusal uint8

const (
	refUnauthenticated refusal = iota // no or wrong bearer token
	refNotFound                       // HTTP path not /v1/traces; gRPC method unknown
	refMethod                         // HTTP method not POST
	refMediaType                      // HTTP Content-Type not protobuf or JSON
	refEncoding                       // Content-Encoding / grpc-encoding not read
	refTooLarge                       // over MaxBodyBytes, as sent or decompressed
	refMalformed                      // cannot be read, decompressed or decoded
	refSlowBody                       // HTTP body under MinBodyRate or over BodyTimeout
	refBusy                           // no admission slot, or the body budget is full
	refBackpressure                   // the pipeline refused (ErrBackpressure)
	refUnavailable                    // the store is down or closing
	refCanceled                       // the client gave up
	refInternal                       // storing failed otherwise
	nRefusals
)

var refusalNames = [nRefusals]string{
	"unauthenticated", "not_found", "method_not_allowed", "unsupported_media_type",
	"unsupported_encoding", "too_large", "malformed", "slow_body", "busy",
	"backpressure", "unavailable", "canceled", "internal",
}

// refusalOf returns the refusal of a failure to store.
func (f failure) refusal() refusal {
	switch f {
	case failBackpressure:
		return refBackpressure
	case failUnavailable:
		return refUnavailable
	case failCanceled:
		return refCanceled
	}
	return refInternal
}

// refused counts a refused request and logs it, at most once per second
// per protocol and reason, with the number of like refusals the log left
// out since. attrs, called only when the refusal is logged, say what the
// client sent (never a token).
func (s *Server) refused(p protocol, why refusal, answer string, msg string, attrs func() []any) {
	s.metrics.refused[p][why].Inc()
	level := slog.LevelWarn
	switch why {
	case refInternal:
		level = slog.LevelError
	case refCanceled:
		level = slog.LevelInfo
	}
	s.logLimited(&s.refuseLog[p][why], level, "otlp: request refused", "like_refusals_not_logged", func() []any {
		args := []any{"protocol", protocolNames[p], "reason", refusalNames[why], "answer", answer, "message", msg}
		if attrs != nil {
			args = append(args, attrs()...)
		}
		return args
	})
}

// logLimited logs msg with args() when lim lets it through, adding, under
// skippedKey, how many like events it held back since the last line.
func (s *Server) logLimited(lim *rateLimit, level slog.Level, msg, skippedKey string, args func() []any) {
	skipped, ok := lim.allow(time.Now())
	if !ok {
		return
	}
	a := args()
	if skipped > 0 {
		a = append(a, skippedKey, skipped)
	}
	s.log.Log(context.Background(), level, msg, a...)
}

// rateLimit lets one event through per second, and counts the others.
type rateLimit struct {
	next    atomic.Int64
	skipped atomic.Int64
}

// allow reports whether an event at now is let through, and how many were
// not since the last one that was.
func (r *rateLimit) allow(now time.Time) (skipped int64, ok bool) {
	n := now.UnixNano()
	next := r.next.Load()
	if n >= next && r.next.CompareAndSwap(next, n+int64(time.Second)) {
		return r.skipped.Swap(0), true
	}
	r.skipped.Add(1)
	return 0, false
}

// tlsRefusalNames are the reasons of stormradius_otlp_tls_refused_total
// (certs.Refusal.Reason).
var tlsRefusalNames = [...]string{"no_client_cert", "client_cert_expired", "client_cert_unknown_ca", "client_cert_invalid"}

const nTLSRefusals = len(tlsRefusalNames)

// verifyingClients returns a copy of cfg for protocol p's listener that,
// with mutual TLS, counts and logs the client certificates it refuses.
func (s *Server) verifyingClients(cfg *tls.Config, p protocol) *tls.Config {
	c := cfg.Clone()
	// The handshake's config is made per client (certs.VerifyClients):
	// it must offer the listener's protocols itself (gRPC requires h2).
	c.NextProtos = []string{"h2"}
	if p == protoHTTP {
		c.NextProtos = append(c.NextProtos, "http/1.1")
	}
	certs.VerifyClients(c, func(r certs.Refusal) {
		i := slices.Index(tlsRefusalNames[:], r.Reason)
		if i < 0 {
			i = nTLSRefusals - 1
		}
		s.metrics.tlsRefused[p][i].Inc()
		s.logLimited(&s.tlsLog[p][i], slog.LevelWarn, "otlp: TLS handshake refused: "+r.Msg+
			" (--otlp-tls-client-ca lists the CAs that sign them; the collector's exporter sets tls.cert_file and tls.key_file)",
			"like_refusals_not_logged", func() []any {
				return []any{"protocol", protocolNames[p], "reason", r.Reason, "peer", r.Peer}
			})
	})
	return c
}
