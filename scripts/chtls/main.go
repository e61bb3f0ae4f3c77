// Command chtls makes the test certificate authority of ClickHouse's TLS
// port (.ci/run): a CA, the server's certificate and key (for 127.0.0.1,
// localhost and clickhouse.test), a client certificate the server accepts
// and one that expired, as PEM files in a directory:
//
//	go run ./scripts/chtls DIR
//
// ca.pem, server.pem, server-key.pem, client.pem, client-key.pem,
// client-expired.pem and client-expired-key.pem. The CA's key is not
// kept. Files already there, with a server certificate valid for another
// week, are left as they are; it prints "made" when it wrote new ones
// (the server must then restart to read them) and "kept" otherwise.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/chtls DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	if current(dir) {
		fmt.Println("kept")
		return
	}
	if err := makeAll(dir, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "chtls:", err)
		os.Exit(1)
	}
	fmt.Println("made")
}

// current reports whether dir holds every file, with a server certificate
// valid for another week.
func current(dir string) bool {
	for _, f := range []string{"ca.pem", "server-key.pem", "client.pem", "client-key.pem", "client-expired.pem", "client-expired-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "server.pem"))
	if err != nil {
		return false
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return false
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	return err == nil && time.Until(c.NotAfter) > 7*24*time.Hour
}

// makeAll writes the CA and the certificates it signs into dir.
func makeAll(dir string, now time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "stormradius test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0)}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if ca, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	if err := write(filepath.Join(dir, "ca.pem"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	for _, c := range []struct {
		name      string
		server    bool
		from, end time.Time
	}{
		{"server", true, now.Add(-time.Hour), now.AddDate(1, 0, 0)},
		{"client", false, now.Add(-time.Hour), now.AddDate(1, 0, 0)},
		{"client-expired", false, now.AddDate(0, 0, -30), now.AddDate(0, 0, -1)},
	} {
		if err := issue(dir, c.name, c.server, c.from, c.end, ca, caKey); err != nil {
			return err
		}
	}
	return nil
}

// issue signs a server's or a client's certificate, valid from from to end.
func issue(dir, name string, server bool, from, end time.Time, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "stormradius " + name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: from, NotAfter: end}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost", "clickhouse.test"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return errors.Join(write(filepath.Join(dir, name+".pem"), "CERTIFICATE", der, 0o644),
		write(filepath.Join(dir, name+"-key.pem"), "PRIVATE KEY", kder, 0o600))
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func write(name, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
