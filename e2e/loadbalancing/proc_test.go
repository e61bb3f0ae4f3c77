// The processes' log on failure and ClickHouse databases of their own;
// the rest of the helpers are e2e/e2ekit's.

package loadbalancing

import (
	"context"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/stormradius/stormradius/e2e/e2ekit"
)

// logLines is how many of a process's last lines a failed test logs.
const logLines = 60

// freshClickHouse returns the DSN of a new database on the server
// STORMRADIUS_CLICKHOUSE names (the store creates it), dropped when the
// test ends; it skips the test without a server.
func freshClickHouse(t *testing.T) string {
	t.Helper()
	return e2ekit.FreshDatabase(t, "stormradius_e2e_lb_", dropDatabase)
}

// dropDatabase drops the database name on the ClickHouse server.
func dropDatabase(server, name string) error {
	o, err := ch.ParseDSN(server)
	if err != nil {
		return err
	}
	conn, err := ch.Open(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name)
}
