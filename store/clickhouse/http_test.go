package clickhouse

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// A DSN names the native protocol or ClickHouse's HTTP interface, https
// with TLS without saying secure=true again; the database and the store's
// own parameters are read the same on all.
func TestParseDSNProtocols(t *testing.T) {
	for _, tc := range []struct {
		dsn      string
		protocol ch.Protocol
		tls      bool
		db       string
		ttl      time.Duration
	}{
		{"clickhouse://127.0.0.1:9000/stormradius?ttl=168h", ch.Native, false, "stormradius", 168 * time.Hour},
		{"clickhouse://127.0.0.1:9440/stormradius?secure=true", ch.Native, true, "stormradius", 0},
		{"http://127.0.0.1:8123/stormradius?ttl=168h", ch.HTTP, false, "stormradius", 168 * time.Hour},
		{"https://user:pw@example.clickhouse.cloud:8443/stormradius?ttl=24h", ch.HTTP, true, "stormradius", 24 * time.Hour},
		{"https://example.clickhouse.cloud:8443/?secure=true", ch.HTTP, true, "default", 0},
	} {
		o, p, err := parseDSN(tc.dsn)
		if err != nil {
			t.Errorf("%s: %v", tc.dsn, err)
			continue
		}
		if o.Protocol != tc.protocol || (o.TLS != nil) != tc.tls || o.Auth.Database != tc.db {
			t.Errorf("%s: protocol %s, TLS %v, database %q; want %s, %v, %q", tc.dsn, o.Protocol, o.TLS != nil, o.Auth.Database,
				tc.protocol, tc.tls, tc.db)
		}
		if _, ok := o.Settings["ttl"]; ok || p.ttl != tc.ttl {
			t.Errorf("%s: ttl %v (settings %v), want %v", tc.dsn, p.ttl, o.Settings, tc.ttl)
		}
	}
	if _, _, err := parseDSN("http://127.0.0.1:8123/db?secure=true"); err == nil {
		t.Error("http with secure=true: no error")
	}
}

// Over HTTP, a proxy's 429, 502, 503 and 504 and a connection that failed
// are worth retrying; a ClickHouse exception is judged by its code, a
// certificate refused is not.
func TestTransientOverHTTP(t *testing.T) {
	refused := &url.Error{Op: "Post", URL: "http://127.0.0.1:8123/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"503 from a proxy", &ch.HTTPError{StatusCode: 503, Err: errors.New(`response body: "no healthy upstream"`)}, true},
		{"502 from a proxy", &ch.HTTPError{StatusCode: 502, Err: errors.New("bad gateway")}, true},
		{"429 from a proxy", &ch.HTTPError{StatusCode: 429, Err: errors.New("slow down")}, true},
		{"too many parts", &ch.HTTPError{StatusCode: 500, Err: &ch.Exception{Code: 252}}, true},
		{"syntax error", &ch.HTTPError{StatusCode: 400, Err: &ch.Exception{Code: 62}}, false},
		{"unknown table", &ch.HTTPError{StatusCode: 404, Err: &ch.Exception{Code: 60}}, false},
		{"401", &ch.HTTPError{StatusCode: 401, Err: errors.New("unauthorized")}, false},
		{"connection refused", refused, true},
		{"connection cut", &url.Error{Op: "Post", URL: "http://127.0.0.1:8123/", Err: io.ErrUnexpectedEOF}, true},
		{"idle connection closed", &url.Error{Op: "Post", URL: "http://127.0.0.1:8123/", Err: errors.New("http: server closed idle connection")}, true},
		{"certificate refused", &url.Error{Op: "Post", URL: "https://127.0.0.1:8443/", Err: x509.UnknownAuthorityError{}}, false},
		{"no TLS at https", &url.Error{Op: "Post", URL: "https://127.0.0.1:8123/", Err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s (%v): transient %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
