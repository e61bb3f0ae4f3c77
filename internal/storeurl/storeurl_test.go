package storeurl_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/internal/certs/certstest"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/store"
)

// ReadOnly reaches every store a URL names: nothing is created for it, and
// the store it opens over existing data refuses writes.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string]func(t *testing.T) storeurl.Options{
		"data": func(t *testing.T) storeurl.Options { return storeurl.Options{Data: filepath.Join(t.TempDir(), "data")} },
		"sqlite": func(t *testing.T) storeurl.Options {
			return storeurl.Options{URL: "sqlite://" + filepath.Join(t.TempDir(), "data")}
		},
		"clickhouse": func(t *testing.T) storeurl.Options { return storeurl.Options{URL: chtest.FreshDSN(t)} },
	} {
		t.Run(name, func(t *testing.T) {
			o := opts(t)
			ro := o
			ro.ReadOnly = true
			if _, err := storeurl.Open(ctx, ro); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("nothing there: %v, want ErrNotFound", err)
			}
			st, err := storeurl.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			if st, err = storeurl.Open(ctx, ro); err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Apply(ctx, store.Batch{Watermark: 1}); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("Apply: %v, want ErrReadOnly", err)
			}
		})
	}
}

// A cluster is for ClickHouse: the embedded store refuses one. Given in
// the options, it reaches the ClickHouse store (the dry run of a new
// database is rewritten for it), and must agree with the URL's.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	for _, o := range []storeurl.Options{{Data: t.TempDir(), Cluster: "c1"}, {URL: "sqlite://" + t.TempDir(), Cluster: "c1"}} {
		if _, err := storeurl.Open(ctx, o); err == nil || !strings.Contains(err.Error(), "the store is not ClickHouse") {
			t.Errorf("%+v: %v, want refused", o, err)
		}
		if _, err := storeurl.Migrations(ctx, o); err == nil || !strings.Contains(err.Error(), "the store is not ClickHouse") {
			t.Errorf("%+v: dry run: %v, want refused", o, err)
		}
	}
	u, name := chtest.Cluster(t)
	dsn := chtest.FreshDatabase(t, &url.URL{Scheme: "clickhouse", Host: u.Host})
	ms, err := storeurl.Migrations(ctx, storeurl.Options{URL: dsn, Cluster: name})
	if err != nil || len(ms) == 0 || !strings.Contains(ms[0].SQL, "ON CLUSTER '"+name+"'") {
		t.Fatalf("dry run on cluster %s: %v, %+v", name, err, ms)
	}
	if _, err := storeurl.Open(ctx, storeurl.Options{URL: dsn + "?cluster=" + name, Cluster: "other"}); err == nil ||
		!strings.Contains(err.Error(), "the DSN says cluster=") {
		t.Fatalf("two clusters: %v", err)
	}
}

// http:// and https:// name ClickHouse over its HTTP interface: they reach
// the ClickHouse store (here a server that is not there), where another
// scheme is refused naming them.
func TestClickHouseOverHTTP(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:1/db?dial_timeout=200ms", "https://127.0.0.1:1/db?dial_timeout=200ms"} {
		_, err := storeurl.Open(ctx, storeurl.Options{URL: u})
		if err == nil || !strings.HasPrefix(err.Error(), "clickhouse: ") || !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: %v, want the ClickHouse store's unavailable server", u, err)
		}
	}
	if _, err := storeurl.Open(ctx, storeurl.Options{URL: "ftp://127.0.0.1/db"}); err == nil || !strings.Contains(err.Error(), "https://host:8443/db") {
		t.Errorf("ftp: %v, want refused naming https", err)
	}
}

// A store URL's password never reaches an error: not in a misspelt
// scheme's, not in an unescaped password's parse error, not in a
// refused connection's (issue 29's two cases, as a user wrote them).
func TestErrorsHideThePassword(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, secret string }{
		{"clickhous://user:Secret123@127.0.0.1:9000/db", "Secret123"},
		{"clickhouse://user:p@ss:w/rd#1@127.0.0.1:9000/db", "p@ss:w/rd#1"},
		{"clickhouse://user:Secret456@127.0.0.1:1/db?dial_timeout=200ms", "Secret456"},
		{"sqlite://user:Secret789@/", "Secret789"},
	} {
		_, err := storeurl.Open(ctx, storeurl.Options{URL: c.url, Existing: true})
		if err == nil {
			t.Errorf("%s: opened", c.url)
			continue
		}
		for _, leak := range []string{c.secret, url.QueryEscape(c.secret), "rd#1", "ss:w"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("the error holds the password (%q): %v", leak, err)
			}
		}
		if strings.HasPrefix(c.url, "clickhouse") && !strings.Contains(err.Error(), "xxxxx") && !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%s: the error names no URL: %v", c.url, err)
		}
	}
}

// tlsProxy serves TLS with cert on a local port and forwards each
// connection, decrypted, to target (ClickHouse's plaintext native port):
// the server's TLS port as a client sees it. clientCAs, when set, makes it
// require a client certificate they sign.
func tlsProxy(t *testing.T, target string, cert tls.Certificate, clientCAs *x509.CertPool) string {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
	}
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
				defer c.Close()
				b, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer b.Close()
				go io.Copy(b, c)
				io.Copy(c, b)
			}()
		}
	}()
	return ln.Addr().String()
}

// ClickHouse over TLS with a private CA (tls_ca), a client certificate
// (tls_cert, tls_key) and the server's name (tls_server_name), and the
// password from a file (password_file) or STORMRADIUS_CLICKHOUSE_PASSWORD:
// the store opens and works through the TLS port; without the CA, or
// without the client certificate the port requires, it is refused; a
// wrong password from either source reaches the server (which refuses
// it), and no error holds it.
func TestClickHouseTLS(t *testing.T) {
	u, err := url.Parse(chtest.FreshDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ca := certstest.NewCA(t)
	srv, client := ca.Issue(t, "clickhouse", "clickhouse.test"), ca.Issue(t, "stormradius")
	u.Host = tlsProxy(t, u.Host, srv.TLS, ca.Pool)
	q := u.Query()
	q.Set("dial_timeout", "2s")
	u.RawQuery = q.Encode()
	with := func(kv ...string) string {
		v := *u
		q := v.Query()
		for i := 0; i < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		v.RawQuery = q.Encode()
		return v.String()
	}
	ctx := context.Background()
	good := with("tls_ca", ca.File, "tls_cert", client.CertFile, "tls_key", client.KeyFile, "tls_server_name", "clickhouse.test")
	st, err := storeurl.Open(ctx, storeurl.Options{URL: good})
	if err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	if _, err := st.Report(ctx, store.Query{}); err != nil {
		t.Fatalf("a report over TLS: %v", err)
	}
	st.Close()

	for name, c := range map[string]struct{ dsn, want string }{
		"no CA (system roots)":      {with("secure", "true", "tls_cert", client.CertFile, "tls_key", client.KeyFile), "x509"},
		"no client certificate":     {with("tls_ca", ca.File), "certificate required"},
		"plaintext on the TLS port": {u.String(), ""},
	} {
		st, err := storeurl.Open(ctx, storeurl.Options{URL: c.dsn, Existing: true})
		if err == nil {
			st.Close()
			t.Errorf("%s: opened", name)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}

	const secret = "Wr0ngSecret"
	passFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passFile, []byte(secret+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	check := func(name string, err error) {
		t.Helper()
		if e := strings.ToLower(fmt.Sprint(err)); !strings.Contains(e, "authentication failed") && !strings.Contains(e, "wrong password") {
			t.Errorf("%s: %v, want the server's authentication failure", name, err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error holds the password: %v", name, err)
		}
	}
	_, err = storeurl.Open(ctx, storeurl.Options{URL: with("tls_ca", ca.File, "tls_cert", client.CertFile, "tls_key", client.KeyFile,
		"tls_server_name", "clickhouse.test", "password_file", passFile)})
	check("password_file", err)
	t.Setenv(storeurl.PasswordEnv, secret)
	_, err = storeurl.Open(ctx, storeurl.Options{URL: good})
	check(storeurl.PasswordEnv, err)
}

// ReaderEnv names a ClickHouse user in the server's readonly profile, as
// "user:password" (.ci/run makes one): cmd/api's read side works as it.
const ReaderEnv = "STORMRADIUS_TEST_CLICKHOUSE_READER"

// The read side (cmd/api: a read-only store) works as a user of
// ClickHouse's readonly profile, the user production gives it: it never
// needs to write, and reads what a writer stored; the password from
// STORMRADIUS_CLICKHOUSE_PASSWORD. The same user cannot open the store
// for writing.
func TestReadOnlyUser(t *testing.T) {
	reader := os.Getenv(ReaderEnv)
	if reader == "" {
		t.Skip(ReaderEnv + " is unset: no readonly-profile user to test with (.ci/run makes one)")
	}
	user, pass, _ := strings.Cut(reader, ":")
	ctx := context.Background()
	dsn := chtest.FreshDSN(t)
	w, err := storeurl.Open(ctx, storeurl.Options{URL: dsn})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	u, _ := url.Parse(dsn)
	u.User = url.User(user)
	t.Setenv(storeurl.PasswordEnv, pass)
	r, err := storeurl.Open(ctx, storeurl.Options{URL: u.String(), ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only, as %s: %v", user, err)
	}
	if _, err := r.Report(ctx, store.Query{}); err != nil {
		t.Errorf("a report as %s: %v", user, err)
	}
	r.Close()
	if st, err := storeurl.Open(ctx, storeurl.Options{URL: u.String()}); err == nil {
		st.Close()
		t.Errorf("opened for writing as the readonly user %s", user)
	}
}
