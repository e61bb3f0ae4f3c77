package otlp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/internal/certs"
)

// Defaults of Config.
const (
	// DefaultGRPCAddr is the OTLP/gRPC port the OpenTelemetry exporters use.
	DefaultGRPCAddr = ":4317"
	// DefaultHTTPAddr is the OTLP/HTTP port the OpenTelemetry exporters use.
	DefaultHTTPAddr = ":4318"
	// DefaultMaxBodyBytes is the Collector's own receiver limit: 20 MiB.
	DefaultMaxBodyBytes = 20 << 20
	// DefaultMaxInflightRequests bounds the requests decoded and stored at
	// once. Most of a request's time is spent waiting for the store's
	// group commit, so it is well above the core count.
	DefaultMaxInflightRequests = 32
	// DefaultRetryAfter is the delay suggested to clients refused under
	// backpressure. The Collector waits for the longer of it and its own
	// backoff (5 s at first), so a short value never makes it retry sooner
	// than it would anyway.
	DefaultRetryAfter = 2 * time.Second
	// DefaultShutdownTimeout is how long Serve lets in-flight requests
	// finish once its context is done.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultMinBodyRate is the slowest an HTTP body may arrive, in bytes a
	// second over each DefaultBodyRateWindow: 1 KiB/s, far below any link
	// an exporter runs on (a 20 MiB body at that rate would take hours),
	// and far above a client holding a connection open byte by byte.
	DefaultMinBodyRate = 1 << 10
	// DefaultBodyRateWindow is the window MinBodyRate is measured over, and
	// so the longest a body may stall.
	DefaultBodyRateWindow = 5 * time.Second
	// DefaultBodyTimeout bounds the time to receive a whole HTTP body. The
	// Collector's otlp_http exporter gives a whole request 30 s by default.
	DefaultBodyTimeout = time.Minute
	// defaultBodyBufferFactor sets BodyBufferBytes' default: 8 ×
	// MaxBodyBytes (160 MiB by default).
	defaultBodyBufferFactor = 8
)

// TracesPath is the OTLP/HTTP path of trace requests.
const TracesPath = "/v1/traces"

// admissionWait is how long a request waits for one of the
// MaxInflightRequests slots before it is refused (503 / UNAVAILABLE): long
// enough to ride out a burst, short enough that the client's own timeout
// (the Collector's default is 5 s) does not expire first.
const admissionWait = time.Second

// Config configures a Server. The zero Config is valid: every field has a
// documented default.
type Config struct {
	// GRPCAddr is the OTLP/gRPC listen address. Default DefaultGRPCAddr.
	GRPCAddr string
	// DisableGRPC turns the gRPC receiver off.
	DisableGRPC bool
	// HTTPAddr is the OTLP/HTTP listen address. Default DefaultHTTPAddr.
	HTTPAddr string
	// DisableHTTP turns the HTTP receiver off.
	DisableHTTP bool

	// MaxBodyBytes bounds an HTTP body, both as sent and once
	// decompressed, and a gRPC message (grpc's MaxRecvMsgSize, which also
	// applies after decompression). Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxInflightRequests bounds the requests being decoded and stored at
	// once, across both protocols; a request that finds them all busy waits
	// up to a second, then is refused with 503 / UNAVAILABLE. An HTTP
	// request takes its slot only once its body has arrived, so that
	// clients that send slowly hold none. Default DefaultMaxInflightRequests.
	MaxInflightRequests int
	// MinBodyRate is the slowest an HTTP body may arrive, in bytes a second
	// over each BodyRateWindow; BodyTimeout bounds the whole body. A body
	// slower than either is answered 408 and its connection closed. Default
	// DefaultMinBodyRate; negative turns the rate check off.
	MinBodyRate int64
	// BodyRateWindow is the window MinBodyRate is measured over. Default
	// DefaultBodyRateWindow.
	BodyRateWindow time.Duration
	// BodyTimeout bounds the time to receive a whole HTTP body. Default
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// BodyBufferBytes bounds the bytes of HTTP bodies received and not yet
	// answered, across requests; a request whose body would take them past
	// it is answered 503 (retry). Default 8 × MaxBodyBytes.
	BodyBufferBytes int64
	// RetryAfter is the delay suggested to refused clients (HTTP
	// Retry-After, rounded up to whole seconds; gRPC RetryInfo). Default
	// DefaultRetryAfter.
	RetryAfter time.Duration
	// ShutdownTimeout is how long Serve waits for in-flight requests once
	// its context is done. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// BearerTokens, when not empty, are the accepted tokens: every request
	// must carry one as "Authorization: Bearer <token>" (HTTP header, gRPC
	// metadata "authorization"). Empty means no authentication.
	BearerTokens []string
	// TLSCertFile and TLSKeyFile, when both set, make both receivers serve
	// TLS (1.2 or later) with that PEM certificate chain and key. Setting
	// only one is an error.
	TLSCertFile string
	TLSKeyFile  string
	// TLSClientCAFile, with TLS, makes both receivers require a client
	// certificate that a CA of this PEM file signs (mutual TLS). The
	// certificate and key files are read again when they change.
	TLSClientCAFile string

	// ClaimHeader is the error-claim header name the decoders look for
	// (ingest.DecoderConfig.ClaimHeader). Default ingest.DefaultClaimHeader.
	ClaimHeader string
	// Sampling says where the decoders read each span's sampling
	// probability, and what they assume for spans that record none
	// (ingest.SamplingConfig; docs/SPEC.md §2, "sampling").
	Sampling ingest.SamplingConfig

	// Logger receives start, stop and error messages. Default: discard.
	Logger *slog.Logger
	// Registerer, when not nil, gets the receivers' metrics (their names
	// are in the package documentation). A Registerer that already holds
	// them (a second Server in one process) is shared, not an error.
	Registerer prometheus.Registerer
}

// withDefaults returns c with its zero fields set to their defaults, after
// checking the fields that have no default.
func (c Config) withDefaults() (Config, error) {
	if c.GRPCAddr == "" {
		c.GRPCAddr = DefaultGRPCAddr
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxInflightRequests == 0 {
		c.MaxInflightRequests = DefaultMaxInflightRequests
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.MinBodyRate == 0 {
		c.MinBodyRate = DefaultMinBodyRate
	}
	if c.BodyRateWindow == 0 {
		c.BodyRateWindow = DefaultBodyRateWindow
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.BodyBufferBytes == 0 {
		c.BodyBufferBytes = defaultBodyBufferFactor * c.MaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if c.MaxBodyBytes < 0 || c.MaxBodyBytes > 1<<31-1 {
		// grpc takes an int32-sized limit; nothing sane needs more.
		errs = append(errs, fmt.Errorf("MaxBodyBytes %d out of range (1..%d)", c.MaxBodyBytes, 1<<31-1))
	}
	if c.MaxInflightRequests < 0 {
		errs = append(errs, fmt.Errorf("MaxInflightRequests %d is negative", c.MaxInflightRequests))
	}
	if c.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("RetryAfter %v is negative", c.RetryAfter))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("ShutdownTimeout %v is negative", c.ShutdownTimeout))
	}
	if c.BodyRateWindow < 0 {
		errs = append(errs, fmt.Errorf("BodyRateWindow %v is negative", c.BodyRateWindow))
	}
	if c.BodyTimeout < 0 {
		errs = append(errs, fmt.Errorf("BodyTimeout %v is negative", c.BodyTimeout))
	}
	if c.BodyBufferBytes < c.MaxBodyBytes+1 && c.MaxBodyBytes > 0 {
		// A body of MaxBodyBytes (and the byte that tells its end) must fit.
		errs = append(errs, fmt.Errorf("BodyBufferBytes %d is less than MaxBodyBytes+1 (%d)", c.BodyBufferBytes, c.MaxBodyBytes+1))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("TLSCertFile and TLSKeyFile go together: set both or neither"))
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		errs = append(errs, errors.New("TLSClientCAFile needs TLSCertFile and TLSKeyFile"))
	}
	for i, t := range c.BearerTokens {
		if t == "" {
			errs = append(errs, fmt.Errorf("BearerTokens[%d] is empty", i))
		}
	}
	if c.DisableGRPC && c.DisableHTTP {
		errs = append(errs, errors.New("both receivers are disabled"))
	}
	if err := c.Sampling.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("otlp: config: %w", err)
	}
	return c, nil
}

// tlsConfig loads the certificate and key, or returns nil without them.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.TLSCertFile == "" {
		return nil, nil
	}
	cfg, err := certs.ServerConfig(c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	return cfg, nil
}
