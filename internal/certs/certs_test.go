package certs_test

import (
	"crypto/tls"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/certs"
	"github.com/stormradius/stormradius/internal/certs/certstest"
)

// serve accepts TLS connections with cfg until the test ends, completing
// each handshake.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// servedName dials addr and returns the common name of the certificate
// the server presents.
func servedName(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// A certificate rotated on disk is served from the next handshake after
// CheckEvery, without a restart; a half-written one keeps the old.
func TestRotation(t *testing.T) {
	ca := certstest.NewCA(t)
	first, second := ca.Issue(t, "first"), ca.Issue(t, "second")
	cfg, err := certs.ServerConfig(first.CertFile, first.KeyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	client := &tls.Config{RootCAs: ca.Pool}
	if n, err := servedName(t, addr, client); err != nil || n != "first" {
		t.Fatalf("served %q, %v; want first", n, err)
	}
	replace := func(dst, src string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Minute) // a new mtime whatever the file system's resolution
		if err := os.Chtimes(dst, later, later); err != nil {
			t.Fatal(err)
		}
	}
	// Half-written: a certificate that does not load keeps the first.
	if err := os.WriteFile(first.CertFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(certs.CheckEvery + 100*time.Millisecond)
	if n, err := servedName(t, addr, client); err != nil || n != "first" {
		t.Fatalf("after a broken write: served %q, %v; want first", n, err)
	}
	replace(first.CertFile, second.CertFile)
	replace(first.KeyFile, second.KeyFile)
	time.Sleep(certs.CheckEvery + 100*time.Millisecond)
	if n, err := servedName(t, addr, client); err != nil || n != "second" {
		t.Fatalf("after rotation: served %q, %v; want second", n, err)
	}
}

// With a client CA, a client without a certificate, or with one another
// CA signed, is refused; one the CA signed is served.
func TestClientCA(t *testing.T) {
	ca, other := certstest.NewCA(t), certstest.NewCA(t)
	srv := ca.Issue(t, "server")
	cfg, err := certs.ServerConfig(srv.CertFile, srv.KeyFile, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	good, stranger := ca.Issue(t, "client"), other.Issue(t, "stranger")
	if _, err := servedName(t, addr, &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{good.TLS}}); err != nil {
		t.Fatalf("a client the CA signed: %v", err)
	}
	for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's": {stranger.TLS}} {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, Certificates: certs})
		if err == nil {
			// TLS 1.3: the server's refusal arrives with the first read.
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a refused certificate", name, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ca := certstest.NewCA(t)
	srv := ca.Issue(t, "server")
	for _, c := range []struct{ cert, key, ca, want string }{
		{srv.CertFile, "", "", "both"},
		{srv.CertFile, srv.CertFile, "", "key"},
		{srv.CertFile, srv.KeyFile, srv.KeyFile, "no PEM certificate"},
		{srv.CertFile, srv.KeyFile, ca.File + ".missing", "client CA"},
	} {
		if _, err := certs.ServerConfig(c.cert, c.key, c.ca); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		}
	}
}

// VerifyClients refuses what crypto/tls refuses — no certificate, another
// CA's, an expired one — telling each refusal with the client's address
// and the reason; a good certificate passes, and is told of nothing.
func TestVerifyClients(t *testing.T) {
	ca, other := certstest.NewCA(t), certstest.NewCA(t)
	srv := ca.Issue(t, "server")
	cfg, err := certs.ServerConfig(srv.CertFile, srv.KeyFile, ca.File)
	if err != nil {
		t.Fatal(err)
	}
	refusals := make(chan certs.Refusal, 10)
	certs.VerifyClients(cfg, func(r certs.Refusal) { refusals <- r })
	addr := serve(t, cfg)
	expired := ca.IssueValid(t, "old", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	for _, c := range []struct {
		name   string
		certs  []tls.Certificate
		reason string
		msg    string
	}{
		{"good", []tls.Certificate{ca.Issue(t, "client").TLS}, "", ""},
		{"none", nil, "no_client_cert", "presented no certificate"},
		{"another CA's", []tls.Certificate{other.Issue(t, "stranger").TLS}, "client_cert_unknown_ca", `(subject "CN=stranger", issued by "CN=test CA") is signed by no CA`},
		{"expired", []tls.Certificate{expired.TLS}, "client_cert_expired", `(subject "CN=old") expired at ` + expired.TLS.Leaf.NotAfter.UTC().Format(time.RFC3339)},
	} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, Certificates: c.certs})
		local := ""
		if err == nil {
			local = conn.LocalAddr().String()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1)) // TLS 1.3: the refusal arrives here; a good one reads EOF
			conn.Close()
		}
		if c.reason == "" {
			if err != nil && !strings.Contains(err.Error(), "EOF") {
				t.Errorf("%s: %v", c.name, err)
			}
			select {
			case r := <-refusals:
				t.Errorf("%s: refused %+v", c.name, r)
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: %v, want a refused certificate", c.name, err)
		}
		select {
		case r := <-refusals:
			if r.Reason != c.reason || !strings.Contains(r.Msg, c.msg) || r.Peer != local {
				t.Errorf("%s: refusal %+v, want %s from %s with %q", c.name, r, c.reason, local, c.msg)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: no refusal told", c.name)
		}
	}
}
