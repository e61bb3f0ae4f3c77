package storeurl

import (
	"context"
	"net/url"
	"os"

	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/clickhouse"
)

// The ClickHouse store: clickhouse://[user[:password]@]host:9000/db (or
// http://…:8123/db, https://…:8443/db: over HTTP), with clickhouse-go's
// parameters (dial_timeout=5s, ...), ttl=168h and cluster=NAME (or
// Options.Cluster: sharded over a cluster), tls_ca, tls_cert, tls_key,
// tls_server_name and password_file; the password may also come from
// PasswordEnv. A connection the server refuses for a setting (the user's
// credentials, TLS on either side, the address) fails Open with a
// *clickhouse.ConnError: one line naming the server and what to set.
func init() {
	openClickHouse = func(ctx context.Context, o Options, u *url.URL) (store.Store, error) {
		return clickhouse.Open(ctx, clickhouse.Options{DSN: u.String(), Password: os.Getenv(PasswordEnv), PasswordSetting: PasswordEnv,
			Window: o.Window, Existing: o.Existing, ReadOnly: o.ReadOnly, Logger: o.Logger, Cluster: o.Cluster,
			ConnProblem: connProblem(o.ConnProblem)})
	}
	clickHouseMigrations = func(ctx context.Context, o Options, u *url.URL) ([]schema.Migration, error) {
		return clickhouse.Migrations(ctx, clickhouse.Options{DSN: u.String(), Password: os.Getenv(PasswordEnv),
			PasswordSetting: PasswordEnv, Cluster: o.Cluster, Logger: o.Logger})
	}
}

// connProblem passes the ClickHouse store's connection problems to fn.
func connProblem(fn func(reason, msg string)) func(*clickhouse.ConnError) {
	if fn == nil {
		return nil
	}
	return func(e *clickhouse.ConnError) {
		if e == nil {
			fn("", "")
			return
		}
		fn(e.Reason, e.Problem())
	}
}

// PasswordEnv is the environment variable of the ClickHouse user's
// password, when the store URL holds none (it then needs no URL-encoding).
const PasswordEnv = "STORMRADIUS_CLICKHOUSE_PASSWORD"
