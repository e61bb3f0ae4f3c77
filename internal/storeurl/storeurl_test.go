package storeurl_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

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
