package storeurl

import (
	"context"
	"net/url"

	"github.com/stormradius/stormradius/schema"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/clickhouse"
)

// The ClickHouse store: clickhouse://[user[:password]@]host:9000/db, with
// clickhouse-go's parameters (dial_timeout=5s, ...) and ttl=168h.
func init() {
	openClickHouse = func(ctx context.Context, o Options, u *url.URL) (store.Store, error) {
		return clickhouse.Open(ctx, clickhouse.Options{DSN: u.String(), Window: o.Window, Existing: o.Existing,
			ReadOnly: o.ReadOnly, Logger: o.Logger})
	}
	clickHouseMigrations = func(ctx context.Context, o Options, u *url.URL) ([]schema.Migration, error) {
		return clickhouse.Migrations(ctx, u.String())
	}
}
