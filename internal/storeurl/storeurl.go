// Package storeurl opens the store a command names: the embedded store in
// a data directory by default, or the one a URL names
// (clickhouse://host:9000/db, http(s)://host:8123/db for ClickHouse over
// HTTP, sqlite:///path/to/dir).
package storeurl

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/stormradius/stormradius/internal/secret"
	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
)

// Options says which store to open.
type Options struct {
	// Data is the embedded store's directory, used when URL is empty.
	Data string
	// URL names another store: clickhouse://… (ClickHouse's native
	// protocol), http://… or https://… (ClickHouse's HTTP interface) or
	// sqlite:///dir.
	URL string
	// Window is the analysis window length (0: the stored one, or the
	// default for new data).
	Window time.Duration
	// Existing refuses to create a new store (for readers).
	Existing bool
	// ReadOnly opens an existing, migrated store for reading only: nothing
	// is created or migrated (an older schema fails with
	// store.ErrNotMigrated) and every write fails with store.ErrReadOnly
	// (cmd/api).
	ReadOnly bool
	// Cluster shards a ClickHouse store over the servers of the named
	// cluster (--clickhouse-cluster; the URL's cluster=NAME says it too);
	// other stores refuse it.
	Cluster string
	Logger  *slog.Logger
	// ConnProblem, when set, hears of a ClickHouse store's connection while it is open (the embedded
	// store has none): reason (a short label: auth, tls_ca, tls_hostname, tls_server_cert,
	// tls_client_cert, tls, not_tls, tls_required, unreachable) and a one-line message naming the server
	// and the setting that fixes it, as queries fail for it; reason "" once a query works again.
	ConnProblem func(reason, msg string)
}

// Open opens the store.
func Open(ctx context.Context, o Options) (store.Store, error) {
	dir, q, ch, err := target(o)
	switch {
	case err != nil:
		return nil, err
	case ch != nil:
		return openClickHouse(ctx, o, ch)
	case o.Cluster != "":
		return nil, errNotClickHouse(o)
	}
	return sqlite.Open(ctx, sqlite.Options{Dir: dir, Window: o.Window, Logger: o.Logger, Existing: o.Existing,
		ReadOnly: o.ReadOnly, Synchronous: q.Get("synchronous")})
}

// target reads which store o names: an embedded one (its directory, and
// the options in its URL's query) or a ClickHouse server (its URL).
func target(o Options) (dir string, q url.Values, ch *url.URL, err error) {
	if o.URL == "" {
		return o.Data, nil, nil, nil
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		if secret.URLPassword(o.URL) != "" {
			// Its reason may quote part of the password.
			return "", nil, nil, fmt.Errorf("--store %q: not a URL: write a password's special characters URL-encoded "+
				"(@ as %%40, : as %%3A, / as %%2F, # as %%23, %% as %%25)", secret.URL(o.URL))
		}
		return "", nil, nil, fmt.Errorf("--store: %w", err)
	}
	switch u.Scheme {
	case "sqlite", "file":
		dir := u.Path
		if u.Host != "" && u.Host != "localhost" {
			dir = u.Host + u.Path // sqlite://relative/dir
		}
		if dir == "" {
			return "", nil, nil, fmt.Errorf("--store %q: no directory", secret.URL(o.URL))
		}
		return dir, u.Query(), nil, nil
	case "clickhouse", "http", "https":
		return "", nil, u, nil
	}
	return "", nil, nil, fmt.Errorf("--store %q: unknown store (want clickhouse://host:9000/db, https://host:8443/db or sqlite:///dir)", secret.URL(o.URL))
}

// openClickHouse is replaced when the ClickHouse store is built in.
var openClickHouse = func(ctx context.Context, o Options, u *url.URL) (store.Store, error) {
	return nil, fmt.Errorf("--store %q: ClickHouse support is not built in yet", secret.URL(o.URL))
}

// Migrations returns the schema migrations opening the store would apply,
// without applying them.
func Migrations(ctx context.Context, o Options) ([]schema.Migration, error) {
	dir, _, ch, err := target(o)
	switch {
	case err != nil:
		return nil, err
	case ch != nil:
		return clickHouseMigrations(ctx, o, ch)
	case o.Cluster != "":
		return nil, errNotClickHouse(o)
	}
	return sqlite.Migrations(ctx, dir)
}

// errNotClickHouse refuses a cluster for another store than ClickHouse.
func errNotClickHouse(o Options) error {
	return fmt.Errorf("--clickhouse-cluster %q: the store is not ClickHouse (want --store clickhouse://host:9000/db)", o.Cluster)
}

// clickHouseMigrations is replaced when the ClickHouse store is built in.
var clickHouseMigrations = func(ctx context.Context, o Options, u *url.URL) ([]schema.Migration, error) {
	return nil, fmt.Errorf("--store %q: ClickHouse support is not built in yet", secret.URL(o.URL))
}
