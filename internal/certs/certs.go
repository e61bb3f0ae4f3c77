// Package certs serves TLS certificates that rotate without a restart (as
// Prometheus and Grafana do): a server's certificate and key files are
// read again when they change, and a client CA file makes a server ask
// for and verify client certificates (mutual TLS).
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// CheckEvery is how often, at most, the files are looked at again (on a
// handshake).
const CheckEvery = time.Second

// Reloading is a certificate and key read from files, read again when
// either file changes. A change that does not load (a half-written file)
// keeps the certificate before it, and is tried again.
type Reloading struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamps  [2]stamp
	checked time.Time
}

type stamp struct {
	mod  time.Time
	size int64
}

// Load reads certFile and keyFile (PEM), or says why it cannot.
func Load(certFile, keyFile string) (*Reloading, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a TLS certificate needs both its certificate and its key file")
	}
	r := &Reloading{certFile: certFile, keyFile: keyFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	r.checked = time.Now()
	return r, nil
}

func (r *Reloading) reload() error {
	stamps, err := r.stat()
	if err != nil {
		return err
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.stamps = &c, stamps
	return nil
}

func (r *Reloading) stat() (out [2]stamp, err error) {
	for i, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return out, fmt.Errorf("TLS certificate: %w", err)
		}
		out[i] = stamp{fi.ModTime(), fi.Size()}
	}
	return out, nil
}

// GetCertificate is tls.Config's GetCertificate: the current certificate,
// read again first when a file changed since it was read.
func (r *Reloading) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= CheckEvery {
		r.checked = time.Now()
		if s, err := r.stat(); err == nil && s != r.stamps {
			_ = r.reload() // one that does not load keeps the last, and is tried again
		}
	}
	return r.cert, nil
}

// ServerConfig returns a server's TLS config (TLS 1.2 or later) serving
// the reloading certificate of certFile and keyFile; with clientCAFile,
// every client must present a certificate that CA signs.
func ServerConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	r, err := Load(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if clientCAFile != "" {
		if cfg.ClientCAs, err = pool(clientCAFile); err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// pool reads a PEM file of CA certificates.
func pool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return p, nil
}

// Client sets a client's TLS config (TLS 1.2 or later): the CAs of
// caFile instead of the system's (when set), the client certificate of
// certFile and keyFile (both or neither), the server name to verify.
func Client(cfg *tls.Config, caFile, certFile, keyFile, serverName string) error {
	cfg.MinVersion, cfg.ServerName = tls.VersionTLS12, serverName
	if caFile != "" {
		p, err := pool(caFile)
		if err != nil {
			return fmt.Errorf("TLS CA: %w", err)
		}
		cfg.RootCAs = p
	}
	if (certFile == "") != (keyFile == "") {
		return errors.New("a TLS client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return fmt.Errorf("TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return nil
}

// Refusal is a client certificate a server refused: the peer's address,
// why (Reason: no_client_cert, client_cert_expired, client_cert_unknown_ca,
// client_cert_invalid) and a message saying what the client must present.
type Refusal struct {
	Peer, Reason, Msg string
}

// VerifyClients makes cfg, a ServerConfig with a client CA, verify client
// certificates itself, as crypto/tls would (the chain to cfg.ClientCAs, for
// client authentication, at the time of the handshake), so that it can
// tell refused of every certificate it refuses, with the peer. Handshakes
// that pass are as before.
func VerifyClients(cfg *tls.Config, refused func(Refusal)) {
	roots := cfg.ClientCAs
	if roots == nil || refused == nil {
		return
	}
	cfg.ClientAuth = tls.RequestClientCert // verified below, rawCerts empty when none
	base := cfg.Clone()
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		peer := "unknown"
		if hello.Conn != nil {
			peer = hello.Conn.RemoteAddr().String()
		}
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			r, err := verifyClient(raw, roots, time.Now())
			if err != nil {
				r.Peer = peer
				refused(r)
			}
			return err
		}
		return c, nil
	}
}

// verifyClient verifies a client's certificate chain (leaf first) against
// roots at now: the refusal and its error, or a nil error.
func verifyClient(raw [][]byte, roots *x509.CertPool, now time.Time) (Refusal, error) {
	if len(raw) == 0 {
		return Refusal{Reason: "no_client_cert", Msg: "the client presented no certificate: it must present one a CA of the client CA file signs"},
			errors.New("tls: client didn't provide a certificate")
	}
	chain := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return Refusal{Reason: "client_cert_invalid", Msg: "the client's certificate does not parse: " + err.Error()}, err
		}
		chain[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err == nil {
		return Refusal{}, nil
	}
	var inv x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &inv) && inv.Reason == x509.Expired && now.After(leaf.NotAfter):
		return Refusal{Reason: "client_cert_expired", Msg: fmt.Sprintf("the client's certificate (subject %q) expired at %s: it must present a current one",
			leaf.Subject.String(), leaf.NotAfter.UTC().Format(time.RFC3339))}, err
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		return Refusal{Reason: "client_cert_expired", Msg: fmt.Sprintf("the client's certificate (subject %q) is not valid at this time (%s): "+
			"it, or a certificate of its chain, is expired or not yet valid", leaf.Subject.String(), now.UTC().Format(time.RFC3339))}, err
	case errors.As(err, &unknown):
		return Refusal{Reason: "client_cert_unknown_ca", Msg: fmt.Sprintf("the client's certificate (subject %q, issued by %q) is signed by no CA of the client CA file",
			leaf.Subject.String(), leaf.Issuer.String())}, err
	default:
		return Refusal{Reason: "client_cert_invalid", Msg: fmt.Sprintf("the client's certificate (subject %q) is refused: %v", leaf.Subject.String(), err)}, err
	}
}
