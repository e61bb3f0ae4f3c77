package clickhouse

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/stormradius/stormradius/store"
)

// A server whose certificate expired (here a TLS listener that presents
// one and never gets to speak ClickHouse): Open fails naming the server,
// its certificate's expiry, and the server's certificate as what to
// renew; not our CA or our certificate.
func TestServerCertificateExpired(t *testing.T) {
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "expiry test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(48 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	expired := now.Add(-time.Hour).Truncate(time.Second)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "old server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: expired}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	addr := ln.Addr().String()
	_, err = Open(context.Background(), Options{DSN: "clickhouse://" + addr + "/db?dial_timeout=2s&tls_ca=" + caFile})
	var ce *ConnError
	if !errors.As(err, &ce) || ce.Reason != "tls_server_cert" || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("%v: want a ConnError tls_server_cert", err)
	}
	want := "clickhouse: " + addr + ": TLS: the server's certificate (CN=old server) expired at " + expired.UTC().Format(time.RFC3339)
	if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "renew the server's certificate") {
		t.Errorf("%s\nwant it to start %q and say to renew the server's certificate", msg, want)
	}
}

// The server refusing the credentials names where the password came from
// — the variable the caller names, password_file, the DSN — or that none
// was given; over HTTP too, where 18.16 answers 401 with its exception as
// text and current servers 516 (AUTHENTICATION_FAILED). A password never
// reaches the message.
func TestAuthMessages(t *testing.T) {
	passFile := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(passFile, []byte("FilePass1\n"), 0o600)
	wrong18 := &ch.HTTPError{StatusCode: 401, Err: errors.New(`response body: "Code: 193, e.displayText() = DB::Exception: Wrong password for user w, e.what() = DB::Exception\n"`)}
	failed := &ch.Exception{Code: 516, Message: "w: Authentication failed: password is incorrect, or there is no user with such name."}
	for _, c := range []struct {
		name, dsn, password string
		err                 error
		want                []string
	}{
		{"variable", "clickhouse://w@127.0.0.1:9440/db?secure=true", "EnvPass1", failed,
			[]string{"clickhouse: 127.0.0.1:9440: the server refused user w (code 516 AUTHENTICATION_FAILED: w: Authentication failed", "(from THE_VARIABLE)"}},
		{"password_file", "clickhouse://w@127.0.0.1:9000/db?password_file=" + passFile, "", failed,
			[]string{"(from password_file=" + passFile + ")"}},
		{"DSN", "clickhouse://w:DsnPass1@127.0.0.1:9000/db", "", failed, []string{"(from the DSN's user:password)"}},
		{"none", "clickhouse://w@127.0.0.1:9000/db", "", failed, []string{"no password was given: set password_file=PATH in the DSN or THE_VARIABLE"}},
		{"18.16 over HTTP", "http://w@127.0.0.1:8123/db", "EnvPass1", wrong18,
			[]string{"clickhouse: 127.0.0.1:8123: the server refused user w (code 193 WRONG_PASSWORD: Wrong password for user w): check the user in the DSN (http://USER@host:port/db)"}},
		{"no such user", "clickhouse://nobody@127.0.0.1:9000/db", "EnvPass1", &ch.Exception{Code: 192, Message: "Unknown user nobody"},
			[]string{"no such user: check the user in the DSN (clickhouse://USER@host:port/db)"}},
	} {
		o, p, err := parseDSN(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		o.Auth.Password = cmp.Or(c.password, o.Auth.Password)
		ci := newConnInfo(o, p.tls, p.dsnPassword, Options{DSN: c.dsn, Password: c.password, PasswordSetting: "THE_VARIABLE"})
		ce := ci.diagnose(context.Background(), c.err)
		if ce == nil || ce.Reason != "auth" {
			t.Errorf("%s: %v, want an auth ConnError", c.name, ce)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(ce.Error(), w) {
				t.Errorf("%s: %s\nwant %q", c.name, ce, w)
			}
		}
		for _, secret := range []string{"EnvPass1", "FilePass1", "DsnPass1"} {
			if strings.Contains(ce.Error(), secret) {
				t.Errorf("%s: the message holds a password: %s", c.name, ce)
			}
		}
	}
}
