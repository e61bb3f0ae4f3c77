package app_test

import (
	"flag"
	"testing"

	"github.com/stormradius/stormradius/internal/app"
)

// --clickhouse-cluster reaches the store's options, from the flag or
// STORMRADIUS_CLICKHOUSE_CLUSTER, for serve and ingest alike.
func TestClickHouseClusterFlag(t *testing.T) {
	parse := func(role app.Role, args ...string) string {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		build := app.Flags(fs, role)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := app.ApplyEnv(fs); err != nil {
			t.Fatal(err)
		}
		c, err := build()
		if err != nil {
			t.Fatal(err)
		}
		return c.Store.Cluster
	}
	if got := parse(app.Serve); got != "" {
		t.Errorf("default: %q, want none", got)
	}
	if got := parse(app.Ingest, "--clickhouse-cluster", "events"); got != "events" {
		t.Errorf("flag: %q", got)
	}
	t.Setenv("STORMRADIUS_CLICKHOUSE_CLUSTER", "from_env")
	if got := parse(app.Serve); got != "from_env" {
		t.Errorf("environment: %q", got)
	}
	if got := parse(app.Ingest, "--clickhouse-cluster", "events"); got != "events" {
		t.Errorf("flag over the environment: %q", got)
	}
}
