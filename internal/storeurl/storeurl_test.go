package storeurl_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/certs/certstest"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/clickhouse"
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

// ClickHouse 18.16's TLS port (tcp_port_secure, verifying client
// certificates: .ci/run) as a user with a password: the store opens and
// works with the test CA (tls_ca), a client certificate (tls_cert,
// tls_key) and the server's name (tls_server_name), the password from a
// file (password_file) or STORMRADIUS_CLICKHOUSE_PASSWORD. Every way of
// getting it wrong fails Open with a *clickhouse.ConnError naming the
// server's address and the setting to fix, never the password, as
// store.ErrUnavailable.
func TestClickHouseTLS(t *testing.T) {
	srv := chtest.TLS(t)
	user, pass := chtest.User(t, chtest.WriterEnv)
	db := chtest.DatabaseOf(chtest.FreshDSN(t))
	t.Setenv(storeurl.PasswordEnv, "")
	dir := t.TempDir()
	passFile, wrongFile := filepath.Join(dir, "password"), filepath.Join(dir, "wrong")
	const wrong = "Wr0ngSecret"
	for f, p := range map[string]string{passFile: pass + "\n", wrongFile: wrong + "\n"} {
		if err := os.WriteFile(f, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := storeurl.Open(ctx, storeurl.Options{URL: srv.DSN(db, user, "password_file", passFile, "tls_server_name", "clickhouse.test")})
	if err != nil {
		t.Fatalf("over TLS as %s: %v", user, err)
	}
	if _, err := st.Report(ctx, store.Query{}); err != nil {
		t.Fatalf("a report over TLS: %v", err)
	}
	st.Close()
	t.Setenv(storeurl.PasswordEnv, pass)
	if st, err = storeurl.Open(ctx, storeurl.Options{URL: srv.DSN(db, user), Existing: true}); err != nil {
		t.Fatalf("over TLS, the password from %s: %v", storeurl.PasswordEnv, err)
	}
	st.Close()

	other := certstest.NewCA(t)
	otherClient := other.Issue(t, "stormradius")
	expiry := notAfter(t, srv.ExpiredCert)
	plain := (&url.URL{Scheme: "clickhouse", Host: srv.Host, Path: "/" + db, User: url.User(user)}).String()
	for _, c := range []struct {
		name, dsn, env, peer, reason string
		want                         []string
	}{
		{"wrong password in password_file", srv.DSN(db, user, "password_file", wrongFile), "", srv.Host, "auth",
			[]string{"user " + user, "code 193", "password_file=" + wrongFile}},
		{"wrong password in " + storeurl.PasswordEnv, srv.DSN(db, user), wrong, srv.Host, "auth",
			[]string{"user " + user, "code 193", storeurl.PasswordEnv}},
		{"no password", srv.DSN(db, user), "", srv.Host, "auth", []string{"no password was given", "password_file", storeurl.PasswordEnv}},
		{"unknown user", srv.DSN(db, "nobody_here"), pass, srv.Host, "auth", []string{"user nobody_here", "no such user"}},
		{"a CA that did not sign the server's certificate", srv.DSN(db, user, "tls_ca", other.File), pass, srv.Host, "tls_ca",
			[]string{"not signed by the CA of tls_ca=" + other.File}},
		{"the system's CAs", srv.DSN(db, user, "tls_ca", "", "secure", "true"), pass, srv.Host, "tls_ca",
			[]string{"set tls_ca=PATH"}},
		{"another server name", srv.DSN(db, user, "tls_server_name", "other.test"), pass, srv.Host, "tls_hostname",
			[]string{"not other.test", "tls_server_name"}},
		{"no client certificate", srv.DSN(db, user, "tls_cert", "", "tls_key", ""), pass, srv.Host, "tls_client_cert",
			[]string{"requires a client certificate", "set tls_cert and tls_key"}},
		{"an expired client certificate", srv.DSN(db, user, "tls_cert", srv.ExpiredCert, "tls_key", srv.ExpiredKey), pass, srv.Host,
			"tls_client_cert", []string{"tls_cert=" + srv.ExpiredCert + " expired at " + expiry}},
		{"a client certificate of another CA", srv.DSN(db, user, "tls_cert", otherClient.CertFile, "tls_key", otherClient.KeyFile), pass,
			srv.Host, "tls_client_cert", []string{"refused our client certificate tls_cert=" + otherClient.CertFile}},
		{"TLS to the plaintext port", strings.Replace(srv.DSN(db, user), srv.Host, srv.Plain, 1), pass, srv.Plain, "not_tls",
			[]string{"not speaking TLS on this port", "drop secure=true", "9440"}},
		{"plaintext to the TLS port", plain, pass, srv.Host, "tls_required", []string{"expects TLS on this port", "add secure=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(storeurl.PasswordEnv, c.env)
			st, err := storeurl.Open(ctx, storeurl.Options{URL: c.dsn, Existing: true})
			if err == nil {
				st.Close()
				t.Fatal("opened")
			}
			var ce *clickhouse.ConnError
			if !errors.As(err, &ce) || ce.Reason != c.reason || !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("%v: want a ConnError for %s, as store.ErrUnavailable", err, c.reason)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "clickhouse: "+c.peer+": ") || strings.Contains(msg, "\n") {
				t.Errorf("%q: want one line naming the server %s first", msg, c.peer)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q: want %q", msg, w)
				}
			}
			for _, p := range []string{pass, wrong} {
				if strings.Contains(msg, p) {
					t.Errorf("the message holds a password: %s", msg)
				}
			}
		})
	}
}

// notAfter returns the expiry of the certificate in file, as the messages
// write it.
func notAfter(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.NotAfter.UTC().Format(time.RFC3339)
}

// The read side (cmd/api: a read-only store) works as a user of
// ClickHouse's readonly profile, the user production gives it: it never
// needs to write, and reads what a writer stored; the password from
// STORMRADIUS_CLICKHOUSE_PASSWORD. The same user cannot open the store
// for writing.
func TestReadOnlyUser(t *testing.T) {
	user, pass := chtest.User(t, chtest.ReaderEnv)
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
