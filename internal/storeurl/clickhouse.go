package storeurl

import (
	"context"
	"net/url"

	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/clickhouse"
)

// The ClickHouse store: clickhouse://[user[:password]@]host:9000/db (or
// http://…:8123/db, https://…:8443/db: over HTTP), with clickhouse-go's
// parameters (dial_timeout=5s, ...), ttl=168h and cluster=NAME (or
// Options.Cluster: sharded over a cluster).
func init() {
	openClickHouse = func(ctx context.Context, o Options, u *url.URL) (store.Store, error) {
		return clickhouse.Open(ctx, clickhouse.Options{DSN: u.String(), Window: o.Window, Existing: o.Existing,
			ReadOnly: o.ReadOnly, Logger: o.Logger, Cluster: o.Cluster})
	}
	clickHouseMigrations = func(ctx context.Context, o Options, u *url.URL) ([]schema.Migration, error) {
		return clickhouse.Migrations(ctx, clickhouse.Options{DSN: u.String(), Cluster: o.Cluster, Logger: o.Logger})
	}
}
