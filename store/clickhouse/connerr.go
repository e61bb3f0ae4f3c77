package clickhouse

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/stormradius/stormradius/internal/secret"
	"github.com/stormradius/stormradius/store"
)

// ConnError is a connection to the server that failed for a reason one of the store's settings (or the
// server's) fixes: the user's credentials, the TLS settings on either side, the address. Its message says
// what is wrong and what to set, naming the server's address, never the password. It wraps
// store.ErrUnavailable: writes refused for it are retried (receivers answer 503) until it is fixed.
type ConnError struct {
	// Peer is the server's host:port (the DSN's addresses, comma-separated, when it names several).
	Peer string
	// Reason is a short label for metrics: auth, tls_ca, tls_hostname, tls_server_cert, tls_client_cert,
	// tls (another TLS failure), not_tls (TLS to a plaintext port), tls_required (plaintext to a TLS port)
	// or unreachable.
	Reason string
	// Msg says what is wrong and which setting fixes it.
	Msg string
	// Op is what the store was doing ("" for connecting, at Open).
	Op string
	// Err is the driver's error.
	Err error
}

func (e *ConnError) Error() string {
	if e.Op != "" {
		return "clickhouse: " + e.Op + ": " + e.Problem()
	}
	return "clickhouse: " + e.Problem()
}

// Problem is the message without the store's context: the server's address, what is wrong and what to set.
func (e *ConnError) Problem() string { return e.Peer + ": " + e.Msg }

func (e *ConnError) Unwrap() []error { return []error{store.ErrUnavailable, e.Err} }

// connInfo is what a diagnosis of a failed connection needs to know of the store's settings.
type connInfo struct {
	peer, user string
	scheme     string // clickhouse, http or https
	http       bool
	tls        *tls.Config // nil: plaintext
	tp         tlsParams
	// password names where the password came from: "password_file=PATH", the DSN's, the Options' (its
	// passwordSetting), or "" for none.
	password        string
	passwordSetting string // the Options' password's source (Options.PasswordSetting)
	secrets         []string
	dialTimeout     time.Duration
}

// newConnInfo reads o (the driver's options, after the store's parameters are applied) for diagnoses.
func newConnInfo(o *ch.Options, tp tlsParams, dsnPassword bool, opts Options) connInfo {
	c := connInfo{peer: strings.Join(o.Addr, ", "), user: o.Auth.Username, scheme: "clickhouse", http: o.Protocol == ch.HTTP, tls: o.TLS,
		tp: tp, passwordSetting: opts.PasswordSetting, dialTimeout: o.DialTimeout, secrets: []string{opts.DSN}}
	if c.http {
		c.scheme = "http"
		if c.tls != nil {
			c.scheme = "https"
		}
	}
	if c.user == "" {
		c.user = "default"
	}
	if c.passwordSetting == "" {
		c.passwordSetting = "the password option"
	}
	switch {
	case opts.Password != "":
		c.password = c.passwordSetting
	case tp["password_file"] != "":
		c.password = "password_file=" + tp["password_file"]
	case dsnPassword:
		c.password = "the DSN's user:password"
	}
	if o.Auth.Password != "" {
		c.secrets = append(c.secrets, "clickhouse://u:"+o.Auth.Password+"@h")
	}
	return c
}

// scrub hides the password in msg.
func (c *connInfo) scrub(msg string) string {
	for _, s := range c.secrets {
		msg = secret.Scrub(msg, s)
	}
	return msg
}

// diagnose returns err as a *ConnError when it is a connection failure a setting fixes, nil otherwise.
func (c *connInfo) diagnose(ctx context.Context, err error) *ConnError {
	if err == nil || c.peer == "" {
		return nil
	}
	var ce *ConnError
	if errors.As(err, &ce) {
		return ce
	}
	reason, msg := c.auth(err)
	if reason == "" {
		reason, msg = c.tlsFailure(ctx, err)
	}
	if reason == "" {
		reason, msg = c.unreachable(err)
	}
	if reason == "" {
		return nil
	}
	return &ConnError{Peer: c.peer, Reason: reason, Msg: c.scrub(msg), Err: err}
}

// authCodes are the server's exception codes for credentials it refuses.
var authCodes = map[int32]string{
	192: "UNKNOWN_USER", 193: "WRONG_PASSWORD", 194: "REQUIRED_PASSWORD", 195: "IP_ADDRESS_NOT_ALLOWED",
	516: "AUTHENTICATION_FAILED",
}

// httpCode reads the exception code of an HTTP error body as servers before 22 write it ("Code: 193, ...").
var httpCode = regexp.MustCompile(`Code: (\d+)[,.]`)

// auth diagnoses the server refusing the user's credentials.
func (c *connInfo) auth(err error) (reason, msg string) {
	var code int32
	var text string
	var ex *ch.Exception
	var he *ch.HTTPError
	switch {
	case errors.As(err, &ex):
		code, text = ex.Code, ex.Message
	case errors.As(err, &he):
		if m := httpCode.FindStringSubmatch(he.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			code = int32(n)
		} else if he.StatusCode == 401 {
			code = 516
		}
		text = fmt.Sprintf("HTTP %d", he.StatusCode)
		if _, m, ok := strings.Cut(he.Error(), "Exception: "); ok {
			text = m
		}
	}
	if _, ok := authCodes[code]; !ok {
		return "", ""
	}
	pw := "no password was given: set password_file=PATH in the DSN or " + c.passwordSetting
	if c.password != "" {
		pw = "check the password (from " + c.password + ")"
	}
	what := fmt.Sprintf("the server refused user %s (code %d %s: %s)", c.user, code, authCodes[code], firstLine(text))
	switch code {
	case 192:
		return "auth", what + ": no such user: check the user in the DSN (" + c.scheme + "://USER@host:port/db)"
	case 194:
		return "auth", what + ": the user needs a password: " + pw
	case 195:
		return "auth", what + ": the user may not connect from this host: add it to the user's <networks> on the server"
	}
	return "auth", what + ": check the user in the DSN (" + c.scheme + "://USER@host:port/db) and " + strings.TrimPrefix(pw, "check ")
}

// tlsFailure diagnoses TLS failing: the server's certificate, ours, or TLS on one side only.
func (c *connInfo) tlsFailure(ctx context.Context, err error) (reason, msg string) {
	port, scheme := "the TLS port (9440)", "drop secure=true and the tls_* parameters"
	if c.http {
		port, scheme = "the HTTPS port (8443)", "use http:// instead of https://"
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return "not_tls", "the server is not speaking TLS on this port: " + scheme + ", or use " + port
	}
	if c.tls == nil {
		if c.speaksTLS(ctx, err) {
			add := "add secure=true (and tls_ca=PATH for a private CA)"
			if c.http {
				add = "use https:// (and tls_ca=PATH for a private CA)"
			}
			return "tls_required", "the server expects TLS on this port: " + add
		}
		return "", ""
	}
	if reason, msg := c.serverCert(err); reason != "" {
		return reason, msg
	}
	return c.clientCert(ctx, err)
}

// serverCert diagnoses the server's certificate failing verification.
func (c *connInfo) serverCert(err error) (reason, msg string) {
	var cv *tls.CertificateVerificationError
	var leaf *x509.Certificate
	if errors.As(err, &cv) && len(cv.UnverifiedCertificates) > 0 {
		leaf = cv.UnverifiedCertificates[0]
	}
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &ua):
		issuer := ""
		if leaf != nil {
			issuer = fmt.Sprintf(" (issued by %q)", leaf.Issuer.String())
		}
		if f := c.tp["tls_ca"]; f != "" {
			return "tls_ca", "TLS: the server's certificate" + issuer + " is not signed by the CA of tls_ca=" + f +
				": set tls_ca to the certificate of the CA that signed the server's"
		}
		return "tls_ca", "TLS: the server's certificate" + issuer + " is signed by an authority this system does not trust: " +
			"set tls_ca=PATH to the certificate of the CA that signed it"
	case errors.As(err, &hn):
		return "tls_hostname", "TLS: " + strings.TrimPrefix(hn.Error(), "x509: ") +
			": connect to one of the names it is valid for, or set tls_server_name to one"
	case errors.As(err, &ci) && ci.Reason == x509.Expired && leaf != nil:
		when := "expired at " + leaf.NotAfter.UTC().Format(time.RFC3339)
		if time.Now().Before(leaf.NotBefore) {
			when = "is not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339)
		}
		return "tls_server_cert", fmt.Sprintf("TLS: the server's certificate (%s) %s (this host's clock: %s): "+
			"renew the server's certificate (its openSSL certificateFile)", leaf.Subject, when, time.Now().UTC().Format(time.RFC3339))
	case errors.As(err, &ci) || errors.As(err, &cv):
		return "tls_server_cert", "TLS: the server's certificate does not verify (" + lastCause(err) + "): check tls_ca and the server's certificate"
	}
	return "", ""
}

// clientCert diagnoses the server refusing our client certificate, or asking for one. A TLS 1.3 server
// judges the client's certificate after the handshake, and tells with an alert or (18.16) only by
// closing the connection: then a second connection waits for its word.
func (c *connInfo) clientCert(ctx context.Context, err error) (reason, msg string) {
	a, closed := remoteAlert(err)
	if a == "" && !(closed && c.atHandshake(err)) {
		return "", ""
	}
	certFile := c.tp["tls_cert"]
	var leaf *x509.Certificate
	if len(c.tls.Certificates) > 0 {
		leaf = c.tls.Certificates[0].Leaf
	}
	if now := time.Now(); leaf != nil && (now.After(leaf.NotAfter) || now.Before(leaf.NotBefore)) {
		when := "expired at " + leaf.NotAfter.UTC().Format(time.RFC3339)
		if now.Before(leaf.NotBefore) {
			when = "is not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339)
		}
		return "tls_client_cert", "TLS: our client certificate tls_cert=" + certFile + " " + when + " (this host's clock: " +
			now.UTC().Format(time.RFC3339) + "): renew it (and tls_key)"
	}
	if a == "" {
		if a, closed = c.tlsVerdict(ctx); a == "" && !closed {
			return "", "" // the server takes our TLS: something else closed the connection
		}
	}
	why := "it closed the connection after the TLS handshake"
	if a != "" {
		why = "remote error: " + a
	}
	switch {
	case !clientCertAlert(a):
		return "tls", "TLS: the server ended the handshake (" + why + "): check the TLS settings (tls_ca, tls_cert, tls_key, " +
			"tls_server_name) against the server's (its openSSL section)"
	case leaf == nil:
		return "tls_client_cert", "TLS: the server requires a client certificate (" + why + "): set tls_cert and tls_key " +
			"to a certificate signed by a CA the server trusts (its openSSL caConfig)"
	}
	return "tls_client_cert", "TLS: the server refused our client certificate tls_cert=" + certFile + " (" + why +
		"): use one signed by a CA the server trusts (its openSSL caConfig), valid now"
}

// clientCertAlert reports whether a (a TLS alert's text, "" for none) may be about the client's certificate.
func clientCertAlert(a string) bool {
	switch strings.TrimPrefix(a, "tls: ") {
	case "", "handshake failure", "bad certificate", "unsupported certificate", "revoked certificate", "expired certificate",
		"unknown certificate", "unknown certificate authority", "access denied", "certificate required":
		return true
	}
	return false
}

// remoteAlert returns the text of the TLS alert the server sent ("" for none), and whether it closed the
// connection.
func remoteAlert(err error) (alert string, closed bool) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		return op.Err.Error(), true
	}
	return "", connCut(err)
}

// connCut reports whether err is the server closing the connection: what a plaintext client sees of a TLS
// port, and a TLS client of 18.16 refusing its certificate.
func connCut(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "unexpected packet [21]") // a TLS alert record read as a packet
}

// atHandshake reports whether err ended the connection's opening (the native protocol's hello; over
// HTTP every request may open one): a cut there may be TLS, elsewhere it is the network or the server.
func (c *connInfo) atHandshake(err error) bool {
	return c.http || strings.Contains(err.Error(), "handshake: ")
}

// probeTimeout bounds a diagnosis's own connection.
func (c *connInfo) probeTimeout() time.Duration {
	return min(max(c.dialTimeout, time.Second), 3*time.Second)
}

// addr is the first server's host:port.
func (c *connInfo) addr() string {
	a, _, _ := strings.Cut(c.peer, ", ")
	return a
}

// tlsVerdict connects with the store's TLS settings and waits a second for the server's word on our
// certificate: an alert, or the connection closed; a server that accepts it waits for the client's hello.
func (c *connInfo) tlsVerdict(ctx context.Context) (alert string, closed bool) {
	ctx, cancel := context.WithTimeout(ctx, c.probeTimeout())
	defer cancel()
	conn, err := (&tls.Dialer{Config: c.tls}).DialContext(ctx, "tcp", c.addr())
	if err != nil {
		return remoteAlert(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err = conn.Read(make([]byte, 1)); err == nil {
		return "", false
	}
	return remoteAlert(err)
}

// speaksTLS reports whether the server, which closed a plaintext connection as it opened, answers a
// TLS handshake.
func (c *connInfo) speaksTLS(ctx context.Context, err error) bool {
	if !connCut(err) || !c.atHandshake(err) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, c.probeTimeout())
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} // only asks whether TLS answers; nothing is sent
	conn, herr := d.DialContext(ctx, "tcp", c.addr())
	if herr == nil {
		conn.Close()
		return true
	}
	a, _ := remoteAlert(herr)
	return a != ""
}

// unreachable diagnoses a connection that could not be made.
func (c *connInfo) unreachable(err error) (reason, msg string) {
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		return "unreachable", "cannot resolve " + dns.Name + " (" + lastCause(err) + "): check the DSN's host"
	case !errors.As(err, &op) || op.Op != "dial":
		return "", ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return "unreachable", "connection refused: nothing listens there; check the DSN's host and port, and that the server runs"
	case op.Timeout():
		return "unreachable", fmt.Sprintf("no answer within dial_timeout=%v: check the DSN's host and port, and the network between", c.dialTimeout)
	}
	return "unreachable", "cannot connect (" + lastCause(err) + "): check the DSN's host and port"
}

// lastCause is the innermost error's message: the cause without the layers' context.
func lastCause(err error) string {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				next = es[len(es)-1]
			}
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// firstLine is the first line of a server's message, without what servers before 22 add to it over HTTP.
func firstLine(s string) string {
	for _, end := range []string{"\n", `\n`, ", e.what() = ", `"`} {
		s, _, _ = strings.Cut(s, end)
	}
	return strings.TrimSpace(s)
}

// diagnoseConn returns err, failing what, as a *ConnError when a setting fixes it, and reports it to
// Options.ConnProblem.
func (s *Store) diagnoseConn(ctx context.Context, what string, err error) *ConnError {
	if s.core == nil {
		return nil
	}
	ce := s.connCfg.diagnose(ctx, err)
	if ce != nil {
		c := *ce
		c.Op, ce = what, &c
		s.connBad.Store(true)
		if s.connProblem != nil {
			s.connProblem(ce)
		}
	}
	return ce
}

// connOK says a query worked: a connection problem reported is gone.
func (s *Store) connOK() {
	if s.core != nil && s.connBad.Load() && s.connBad.CompareAndSwap(true, false) && s.connProblem != nil {
		s.connProblem(nil)
	}
}
