package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Reasons a broker refuses the connection (the reason label of
// stormradius_kafka_connection_errors_total).
const (
	// connAuth: SASL refused (credentials, mechanism), or the broker
	// wants SASL and we speak none.
	connAuth = "auth"
	// connTLSUnknownCA: the broker's certificate is not signed by a CA we
	// trust (--kafka-tls-ca).
	connTLSUnknownCA = "tls_unknown_ca"
	// connTLSExpired: the broker's certificate, or ours, expired (or is
	// not valid yet).
	connTLSExpired = "tls_expired"
	// connTLSName: the broker's certificate does not hold the name we
	// connect to (--kafka-tls-server-name).
	connTLSName = "tls_name"
	// connTLSClientCert: the broker refused our client certificate, or
	// wants one and we have none.
	connTLSClientCert = "tls_client_cert"
	// connTLSMismatch: TLS on one side only.
	connTLSMismatch = "tls_mismatch"
	// connTLS: any other TLS failure.
	connTLS = "tls"
	// connUnreachable: no TCP connection (refused, no route, timeout,
	// unknown host).
	connUnreachable = "unreachable"
	// connClosed: the broker closed the connection or did not answer
	// without saying why.
	connClosed = "connect"
)

var connReasons = []string{connAuth, connTLSUnknownCA, connTLSExpired, connTLSName, connTLSClientCert,
	connTLSMismatch, connTLS, connUnreachable, connClosed}

// connFailure is why a broker refuses our connection, and what fixes it.
type connFailure struct {
	reason string
	broker string
	// msg names the broker, what is wrong and the setting that fixes it;
	// it holds nothing that changes from one attempt to the next, so that
	// the same failure is recognised (and logged once).
	msg string
	err error // the underlying error, for the log
}

// probeTimeout bounds the probes that tell which side speaks TLS (the
// dial timeout when shorter).
const probeTimeout = 3 * time.Second

// checker connects to a broker the way the client does, one step at a
// time (TCP, TLS, Kafka, SASL, a metadata request), to say which step fails
// and why.
type checker struct {
	dialer *kafkago.Dialer // the client's: timeout, TLS, SASL, client id
	sec    Security        // names the settings in messages
}

func newChecker(d *kafkago.Dialer, sec Security) checker {
	if d == nil {
		d = &kafkago.Dialer{}
	}
	return checker{dialer: d, sec: sec}
}

func (c checker) timeout() time.Duration {
	if c.dialer.Timeout > 0 {
		return c.dialer.Timeout
	}
	return 10 * time.Second
}

// check connects to broker, authenticates and asks for metadata; it
// returns nil when all of it works, else why not.
func (c checker) check(parent context.Context, broker string) *connFailure {
	ctx, cancel := context.WithTimeout(parent, c.timeout())
	defer cancel()
	raw, err := c.dialTCP(ctx, broker)
	if err != nil {
		return &connFailure{reason: connUnreachable, broker: broker, err: err,
			msg: fmt.Sprintf("cannot reach broker %s (%s): check --kafka-brokers, and that the broker is up and reachable from here", broker, netCause(err))}
	}
	conn := raw
	if c.dialer.TLS != nil {
		tc := tls.Client(raw, c.tlsConfig(broker))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return c.tlsFailure(parent, broker, err)
		}
		conn = tc
	}
	deadline, _ := ctx.Deadline()
	if err := c.kafka(ctx, bounded(conn, deadline), broker); err != nil {
		return c.kafkaFailure(parent, broker, err)
	}
	return nil
}

// deadlineConn is a connection whose deadline cannot be set later than
// its own: kafka-go sets the deadlines of its requests, none by default.
type deadlineConn struct {
	net.Conn
	deadline time.Time
}

func bounded(c net.Conn, deadline time.Time) net.Conn {
	_ = c.SetDeadline(deadline)
	return deadlineConn{c, deadline}
}

func (c deadlineConn) bound(t time.Time) time.Time {
	if t.IsZero() || t.After(c.deadline) {
		return c.deadline
	}
	return t
}

func (c deadlineConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.bound(t)) }
func (c deadlineConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.bound(t)) }
func (c deadlineConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.bound(t)) }

func (c checker) dialTCP(ctx context.Context, broker string) (net.Conn, error) {
	if c.dialer.DialFunc != nil {
		return c.dialer.DialFunc(ctx, "tcp", broker)
	}
	return (&net.Dialer{}).DialContext(ctx, "tcp", broker)
}

// tlsConfig is the client's TLS configuration with the server name kafka-go
// gives it: the broker's host unless one is set.
func (c checker) tlsConfig(broker string) *tls.Config {
	cfg := c.dialer.TLS
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		host, _, err := net.SplitHostPort(broker)
		if err != nil {
			host = broker
		}
		cfg.ServerName = host
	}
	return cfg
}

// step is the Kafka step that failed.
type step struct {
	what string // "api versions", "sasl", "metadata"
	err  error
}

func (s *step) Error() string { return s.what + ": " + s.err.Error() }
func (s *step) Unwrap() error { return s.err }

// kafka speaks Kafka over conn: ApiVersions, SASL when configured, then a
// metadata request (which a broker that wants SASL refuses before it). It
// closes conn.
func (c checker) kafka(ctx context.Context, conn net.Conn, broker string) error {
	kc := kafkago.NewConnWith(conn, kafkago.ConnConfig{ClientID: c.dialer.ClientID})
	if _, err := kc.ApiVersions(); err != nil {
		kc.Close()
		return &step{"api versions", err}
	}
	if c.dialer.SASLMechanism != nil {
		// kafka-go's dialer authenticates a connection it dials: give it
		// this one.
		d := &kafkago.Dialer{ClientID: c.dialer.ClientID, SASLMechanism: c.dialer.SASLMechanism,
			DialFunc: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}
		var err error
		if kc, err = d.DialContext(ctx, "tcp", broker); err != nil {
			conn.Close()
			return &step{"sasl", err}
		}
	}
	defer kc.Close()
	if _, err := kc.Brokers(); err != nil {
		return &step{"metadata", err}
	}
	return nil
}

// tlsFailure says why the TLS handshake with broker failed.
func (c checker) tlsFailure(ctx context.Context, broker string, err error) *connFailure {
	f := &connFailure{reason: connTLS, broker: broker, err: err}
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
	)
	switch {
	case errors.As(err, &unknown):
		f.reason = connTLSUnknownCA
		f.msg = fmt.Sprintf("broker %s presents a certificate (%s) that no CA we trust signed: %s", broker, describeCert(unknown.Cert), c.caHint())
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		f.reason = connTLSExpired
		f.msg = fmt.Sprintf("broker %s presents a certificate (%s) that %s: renew the broker's certificate (or correct this host's clock)",
			broker, describeCert(invalid.Cert), validity(invalid.Cert))
	case errors.As(err, &hostname):
		f.reason = connTLSName
		f.msg = fmt.Sprintf("broker %s presents a certificate not valid for the name we connect with (%v): set --kafka-tls-server-name to a name it holds, "+
			"or list the broker in --kafka-brokers under such a name", broker, hostname)
	case remoteAlert(err) != "":
		return c.alertFailure(broker, err)
	case closedEarly(err):
		return c.notTLS(ctx, broker, err)
	default:
		f.msg = fmt.Sprintf("TLS handshake with broker %s failed (%v): check the --kafka-tls-* settings against the broker's TLS listener", broker, err)
	}
	return f
}

// alertFailure says why the broker refused us with a TLS alert: in TLS 1.3
// the broker's verdict on our certificate arrives after the handshake, on
// the first read.
func (c checker) alertFailure(broker string, err error) *connFailure {
	alert := remoteAlert(err)
	f := &connFailure{reason: connTLSClientCert, broker: broker, err: err}
	leaf := c.clientLeaf()
	switch {
	case leaf != nil && (time.Now().After(leaf.NotAfter) || time.Now().Before(leaf.NotBefore)):
		f.reason = connTLSExpired
		f.msg = fmt.Sprintf("broker %s refused our client certificate (%s): %s %s: renew it (or correct this host's clock)",
			broker, alert, c.clientCert(), validity(leaf))
	case leaf != nil:
		f.msg = fmt.Sprintf("broker %s refused our client certificate (%s): %s (%s): the broker must trust the CA that signed it",
			broker, alert, c.clientCert(), describeCert(leaf))
	case strings.Contains(alert, "certificate"):
		f.msg = fmt.Sprintf("broker %s wants a client certificate (%s): set --kafka-tls-cert and --kafka-tls-key", broker, alert)
	default:
		f.reason = connTLS
		f.msg = fmt.Sprintf("broker %s ended the TLS handshake (%s): check the --kafka-tls-* settings against the broker's TLS listener", broker, alert)
	}
	return f
}

// notTLS says why a TLS handshake got no answer: when the broker answers
// Kafka in plaintext, it does not speak TLS on this port.
func (c checker) notTLS(ctx context.Context, broker string, err error) *connFailure {
	f := &connFailure{reason: connTLSMismatch, broker: broker, err: err}
	if c.speaksPlaintext(ctx, broker) {
		f.msg = fmt.Sprintf("broker %s speaks plaintext Kafka on this port, not TLS: drop --kafka-tls and the other --kafka-tls-* settings, "+
			"or connect to the broker's TLS listener", broker)
		return f
	}
	f.reason = connTLS
	f.msg = fmt.Sprintf("broker %s did not complete the TLS handshake (%s): it may not speak TLS on this port; "+
		"check the broker's listener and the --kafka-tls-* settings", broker, netCause(err))
	return f
}

// kafkaFailure says why the broker refused us once connected (and, with
// TLS, past the handshake).
func (c checker) kafkaFailure(ctx context.Context, broker string, err error) *connFailure {
	if remoteAlert(err) != "" {
		return c.alertFailure(broker, err)
	}
	f := &connFailure{reason: connAuth, broker: broker, err: err}
	var st *step
	errors.As(err, &st)
	switch {
	case errors.Is(err, kafkago.SASLAuthenticationFailed):
		f.msg = fmt.Sprintf("broker %s refused SASL %s authentication%s: check --kafka-sasl-username, the password "+
			"(--kafka-sasl-password-file or STORMRADIUS_KAFKA_SASL_PASSWORD) and --kafka-sasl-mechanism", broker, c.mechanism(), c.user())
	case errors.Is(err, kafkago.UnsupportedSASLMechanism):
		f.msg = fmt.Sprintf("broker %s does not enable SASL mechanism %s: set --kafka-sasl-mechanism to one its listener enables", broker, c.mechanism())
	case errors.Is(err, kafkago.IllegalSASLState):
		f.msg = fmt.Sprintf("broker %s does not expect SASL on this port: drop --kafka-sasl-mechanism, or connect to the broker's SASL listener", broker)
	case !closedEarly(err):
		f.reason = connClosed
		f.msg = fmt.Sprintf("broker %s refused the connection (%v): check that it is a Kafka listener and that its security protocol "+
			"matches --kafka-tls and --kafka-sasl-mechanism", broker, err)
	case c.dialer.TLS == nil && st != nil && st.what != "metadata" && c.speaksTLS(ctx, broker):
		f.reason = connTLSMismatch
		f.msg = fmt.Sprintf("broker %s speaks TLS on this port and we connect in plaintext: set --kafka-tls "+
			"(and --kafka-tls-ca, unless the system's CAs sign the brokers' certificates)", broker)
	case c.dialer.SASLMechanism == nil && st != nil && st.what == "metadata":
		f.msg = fmt.Sprintf("broker %s closed the connection when asked for metadata without SASL: it wants SASL: "+
			"set --kafka-sasl-mechanism, --kafka-sasl-username and the password", broker)
	default:
		f.reason = connClosed
		f.msg = fmt.Sprintf("broker %s did not answer our Kafka requests (%s): check that it is a Kafka listener and that its security protocol "+
			"(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) matches --kafka-tls and --kafka-sasl-mechanism", broker, netCause(err))
	}
	return f
}

// speaksTLS reports whether broker completes a TLS handshake (whoever
// signed its certificate).
func (c checker) speaksTLS(ctx context.Context, broker string) bool {
	ctx, cancel := context.WithTimeout(ctx, min(probeTimeout, c.timeout()))
	defer cancel()
	raw, err := c.dialTCP(ctx, broker)
	if err != nil {
		return false
	}
	defer raw.Close()
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe: nothing is sent over it
	return tc.HandshakeContext(ctx) == nil
}

// speaksPlaintext reports whether broker answers a Kafka ApiVersions
// request in plaintext.
func (c checker) speaksPlaintext(ctx context.Context, broker string) bool {
	ctx, cancel := context.WithTimeout(ctx, min(probeTimeout, c.timeout()))
	defer cancel()
	raw, err := c.dialTCP(ctx, broker)
	if err != nil {
		return false
	}
	deadline, _ := ctx.Deadline()
	kc := kafkago.NewConn(bounded(raw, deadline), "", 0)
	defer kc.Close()
	_, err = kc.ApiVersions()
	return err == nil
}

func (c checker) caHint() string {
	if c.sec.TLSCA != "" {
		return fmt.Sprintf("--kafka-tls-ca %s does not hold its CA; set --kafka-tls-ca to the PEM file of the CA that signs the brokers' certificates", c.sec.TLSCA)
	}
	return "set --kafka-tls-ca to the PEM file of the CA that signs the brokers' certificates (without it we trust the system's CAs)"
}

// clientCert names our client certificate's setting.
func (c checker) clientCert() string {
	if c.sec.TLSCert != "" {
		return "--kafka-tls-cert " + c.sec.TLSCert
	}
	return "our client certificate"
}

func (c checker) mechanism() string {
	if m := c.dialer.SASLMechanism; m != nil {
		return m.Name()
	}
	return strings.ToUpper(c.sec.SASLMechanism)
}

func (c checker) user() string {
	if c.sec.SASLUsername == "" {
		return ""
	}
	return fmt.Sprintf(" for user %q", c.sec.SASLUsername)
}

// clientLeaf is our client certificate, if any.
func (c checker) clientLeaf() *x509.Certificate {
	if c.dialer.TLS == nil || len(c.dialer.TLS.Certificates) == 0 {
		return nil
	}
	cert := c.dialer.TLS.Certificates[0]
	if cert.Leaf != nil {
		return cert.Leaf
	}
	if len(cert.Certificate) == 0 {
		return nil
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// describeCert names a certificate for a message: its subject and issuer.
func describeCert(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	return fmt.Sprintf("subject %q, issued by %q", c.Subject.String(), c.Issuer.String())
}

// validity says how a certificate is out of its validity period.
func validity(c *x509.Certificate) string {
	if c == nil {
		return "is not valid now"
	}
	if time.Now().Before(c.NotBefore) {
		return "is not valid before " + c.NotBefore.UTC().Format(time.RFC3339)
	}
	return "expired at " + c.NotAfter.UTC().Format(time.RFC3339)
}

// remoteAlert returns the TLS alert the peer sent ("tls: bad
// certificate"), or "".
func remoteAlert(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		return op.Err.Error()
	}
	var a tls.AlertError
	if errors.As(err, &a) {
		return a.Error()
	}
	return ""
}

// closedEarly reports whether err is the peer closing or not answering:
// what a listener of another protocol (TLS or not) does.
func closedEarly(err error) bool {
	var rh tls.RecordHeaderError
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &rh) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// netCause is the end of a network error's chain: "connection refused",
// "EOF", "i/o timeout", without the addresses and ports that change at
// each attempt.
func netCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		return sys.Err.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the broker closed the connection"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "no answer in time"
	}
	return err.Error()
}
