// Package certstest makes throwaway certificate authorities and the
// certificates they sign, as PEM files, for tests of TLS servers and
// clients.
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate's PEM file; Pool holds it.
	File string
	Pool *x509.CertPool
	dir  string
}

var serial atomic.Int64

// NewCA makes a CA whose files live in a test's temporary directory.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{key: key, dir: t.TempDir(), Pool: x509.NewCertPool()}
	ca.Cert, _ = x509.ParseCertificate(der)
	ca.Pool.AddCert(ca.Cert)
	ca.File = filepath.Join(ca.dir, "ca.pem")
	write(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issued is a certificate a CA signed: its files and its tls form.
type Issued struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
}

// Issue signs a certificate named cn, for 127.0.0.1 and the DNS names,
// usable by servers and clients, and writes it to files named after cn.
// It is valid from an hour ago to an hour from now.
func (ca *CA) Issue(t testing.TB, cn string, dns ...string) Issued {
	t.Helper()
	return ca.IssueValid(t, cn, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), dns...)
}

// IssueValid is Issue with the certificate valid from notBefore to
// notAfter: an expired certificate, or one not yet valid.
func (ca *CA) IssueValid(t testing.TB, cn string, notBefore, notAfter time.Time, dns ...string) Issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	out := Issued{CertFile: filepath.Join(ca.dir, cn+".pem"), KeyFile: filepath.Join(ca.dir, cn+"-key.pem"),
		TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}
	write(t, out.CertFile, "CERTIFICATE", der)
	write(t, out.KeyFile, "EC PRIVATE KEY", kder)
	return out
}

func write(t testing.TB, name, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
