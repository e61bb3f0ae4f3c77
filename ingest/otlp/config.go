package otlp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	// up to a second, then is refused with 503 / UNAVAILABLE. Default
	// DefaultMaxInflightRequests.
	MaxInflightRequests int
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

	// ClaimHeader is the error-claim header name the decoders look for
	// (ingest.DecoderConfig.ClaimHeader). Default ingest.DefaultClaimHeader.
	ClaimHeader string

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
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("TLSCertFile and TLSKeyFile go together: set both or neither"))
	}
	for i, t := range c.BearerTokens {
		if t == "" {
			errs = append(errs, fmt.Errorf("BearerTokens[%d] is empty", i))
		}
	}
	if c.DisableGRPC && c.DisableHTTP {
		errs = append(errs, errors.New("both receivers are disabled"))
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
	cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("otlp: load TLS certificate %s and key %s: %w", c.TLSCertFile, c.TLSKeyFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}, nil
}
