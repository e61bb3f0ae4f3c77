package chtest

import (
	"net/url"
	"os"
	"testing"
)

// CurrentEnv names a current ClickHouse engine served over ClickHouse's
// HTTP interface (http://127.0.0.1:PORT/): chdb, embedded in
// scripts/chdbhttp, which scripts/chdb-serve.sh start runs and prints this
// variable for. The store's tests that run there run on it over
// clickhouse-go's HTTP protocol; STORMRADIUS_CLICKHOUSE's 18.16 server is
// not used by them.
const CurrentEnv = "STORMRADIUS_TEST_CLICKHOUSE_CURRENT"

// Current returns the current engine's URL from CurrentEnv, skipping the
// test without one. FreshDatabase gives a test a database of its own on
// it.
func Current(t testing.TB) *url.URL {
	t.Helper()
	dsn := os.Getenv(CurrentEnv)
	if dsn == "" {
		t.Skip("set " + CurrentEnv + "=http://127.0.0.1:PORT/ (scripts/chdb-serve.sh start serves chdb, " +
			"a current ClickHouse engine, there) to run the ClickHouse store's tests on a current engine")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s: %v", CurrentEnv, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		t.Fatalf("%s=%s: want http://host:port/ (ClickHouse's HTTP interface)", CurrentEnv, dsn)
	}
	return u
}
