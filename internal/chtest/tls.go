package chtest

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test server's TLS port and users, as .ci/run configures them
// (scripts/chtls makes the CA and the certificates; docs in .ci/run).
const (
	// TLSEnv is the DSN of the server's TLS port (tcp_port_secure) with
	// the test CA (tls_ca) and a client certificate it signed (tls_cert,
	// tls_key): the server verifies clients' certificates (strict). Beside
	// tls_cert, client-expired.pem and client-expired-key.pem are one the
	// same CA signed that expired.
	TLSEnv = "STORMRADIUS_TEST_CLICKHOUSE_TLS"
	// WriterEnv is "user:password" of a user with a password and the
	// default profile: the ingester's.
	WriterEnv = "STORMRADIUS_TEST_CLICKHOUSE_WRITER"
	// ReaderEnv is "user:password" of a user in the readonly profile:
	// cmd/api's.
	ReaderEnv = "STORMRADIUS_TEST_CLICKHOUSE_READER"
)

// TLSServer is the test server's TLS port.
type TLSServer struct {
	// Host is the TLS port's host:port; Plain the server's plaintext
	// native port's (the test server's, Server).
	Host, Plain string
	// CA is the CA certificate that signed the server's; Cert and Key a
	// client certificate it signed; ExpiredCert and ExpiredKey one that
	// expired.
	CA, Cert, Key, ExpiredCert, ExpiredKey string
}

// TLS returns the test server's TLS port, skipping the test when TLSEnv
// is unset (or the test server is not there).
func TLS(t testing.TB) *TLSServer {
	t.Helper()
	raw := os.Getenv(TLSEnv)
	if raw == "" {
		t.Skip(TLSEnv + " is unset: no ClickHouse TLS port to test with (.ci/run configures one: " +
			"clickhouse://127.0.0.1:9440/?tls_ca=…&tls_cert=…&tls_key=…)")
	}
	plain := Server(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", TLSEnv, err)
	}
	q := u.Query()
	s := &TLSServer{Host: u.Host, Plain: plain.Host, CA: q.Get("tls_ca"), Cert: q.Get("tls_cert"), Key: q.Get("tls_key")}
	if s.CA == "" || s.Cert == "" || s.Key == "" {
		t.Fatalf("%s=%s: want tls_ca, tls_cert and tls_key", TLSEnv, raw)
	}
	dir := filepath.Dir(s.Cert)
	s.ExpiredCert, s.ExpiredKey = filepath.Join(dir, "client-expired.pem"), filepath.Join(dir, "client-expired-key.pem")
	for _, f := range []string{s.CA, s.Cert, s.Key, s.ExpiredCert, s.ExpiredKey} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s: %v (scripts/chtls makes it)", TLSEnv, err)
		}
	}
	return s
}

// DSN returns the DSN of database db on the TLS port as user (no
// password in it), with the CA and the client certificate, and the
// parameters kv (name, value, ...; an empty value removes one).
func (s *TLSServer) DSN(db, user string, kv ...string) string {
	u := &url.URL{Scheme: "clickhouse", Host: s.Host, Path: "/" + db}
	if user != "" {
		u.User = url.User(user)
	}
	q := url.Values{"tls_ca": {s.CA}, "tls_cert": {s.Cert}, "tls_key": {s.Key}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			q.Del(kv[i])
		} else {
			q.Set(kv[i], kv[i+1])
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// User returns the user and password env names ("user:password"),
// skipping the test when it is unset.
func User(t testing.TB, env string) (user, password string) {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skip(env + " is unset: no such ClickHouse user to test with (.ci/run makes one)")
	}
	user, password, ok := strings.Cut(v, ":")
	if !ok || user == "" {
		t.Fatalf("%s: want user:password", env)
	}
	return user, password
}

// DatabaseOf returns the database a DSN names.
func DatabaseOf(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}
