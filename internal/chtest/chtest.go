// Package chtest gives integration tests a database of their own on the
// ClickHouse server STORMRADIUS_CLICKHOUSE names, and skips them with a
// clear message without one; and likewise on the ClickHouse cluster
// STORMRADIUS_TEST_CLICKHOUSE_CLUSTER names (scripts/chcluster.sh).
package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Server returns the server's URL from STORMRADIUS_CLICKHOUSE
// (clickhouse://127.0.0.1:9000/default), skipping the test without one.
func Server(t testing.TB) *url.URL {
	t.Helper()
	dsn := os.Getenv("STORMRADIUS_CLICKHOUSE")
	if dsn == "" {
		t.Skip("set STORMRADIUS_CLICKHOUSE=clickhouse://127.0.0.1:9000/default to run the ClickHouse integration tests")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("STORMRADIUS_CLICKHOUSE: %v", err)
	}
	return u
}

// FreshDSN returns the DSN of a new database on the test server, dropped
// when the test ends; it skips the test when STORMRADIUS_CLICKHOUSE is
// unset.
func FreshDSN(t testing.TB) string {
	t.Helper()
	return FreshDatabase(t, Server(t))
}

// FreshDatabase returns the DSN of a new database name on the server u,
// dropped when the test ends.
func FreshDatabase(t testing.TB, u *url.URL) string {
	t.Helper()
	name, dsn := NewDatabase(u)
	t.Cleanup(func() { DropDatabase(t, u, name) })
	return dsn
}

// NewDatabase returns a new database name on the server u and its DSN;
// the caller drops it (Drop).
func NewDatabase(u *url.URL) (name, dsn string) {
	var b [6]byte
	rand.Read(b[:])
	name = "stormradius_test_" + hex.EncodeToString(b[:])
	d := *u
	d.Path = "/" + name
	return name, d.String()
}

// DropDatabase drops database name on the server u.
func DropDatabase(t testing.TB, u *url.URL, name string) {
	if err := Drop(u, name); err != nil {
		t.Error(err)
	}
}

// Drop drops database name on the server u.
func Drop(u *url.URL, name string) error {
	d := *u
	d.Path = "/default"
	o, err := ch.ParseDSN(d.String())
	if err != nil {
		return err
	}
	conn, err := ch.Open(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	return nil
}

// ClusterEnv names the ClickHouse cluster of the cluster tests: a server
// of it, a database and the cluster's name, as the store's DSN says them
// (clickhouse://127.0.0.1:29001/default?cluster=stormradius_test, what
// scripts/chcluster.sh start prints). It is not STORMRADIUS_CLICKHOUSE_CLUSTER:
// that is --clickhouse-cluster's environment fallback, a cluster name.
const ClusterEnv = "STORMRADIUS_TEST_CLICKHOUSE_CLUSTER"

// Cluster returns the cluster's URL from ClusterEnv, skipping the test
// without one, and the cluster's name.
func Cluster(t testing.TB) (*url.URL, string) {
	t.Helper()
	dsn := os.Getenv(ClusterEnv)
	if dsn == "" {
		t.Skip("set " + ClusterEnv + "=clickhouse://127.0.0.1:29001/default?cluster=stormradius_test " +
			"(scripts/chcluster.sh start runs that cluster) to run the ClickHouse cluster tests")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s: %v", ClusterEnv, err)
	}
	name := u.Query().Get("cluster")
	if name == "" || strings.ContainsAny(name, `'\`) {
		t.Fatalf("%s=%s: want cluster=NAME (no quotes)", ClusterEnv, dsn)
	}
	return u, name
}

// FreshClusterDatabase returns the DSN (with its cluster=NAME) of a new
// database name on the cluster u names, dropped on every server of the
// cluster when the test ends.
func FreshClusterDatabase(t testing.TB, u *url.URL) string {
	t.Helper()
	name, dsn := NewDatabase(u)
	t.Cleanup(func() {
		if err := DropOnCluster(u, name); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// DropOnCluster drops database name on every server of the cluster u
// names (its cluster=NAME).
func DropOnCluster(u *url.URL, name string) error {
	d := *u
	d.Path = "/default"
	q := d.Query()
	cluster := q.Get("cluster")
	q.Del("cluster")
	d.RawQuery = q.Encode()
	o, err := ch.ParseDSN(d.String())
	if err != nil {
		return err
	}
	conn, err := ch.Open(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" ON CLUSTER '"+cluster+"'"); err != nil {
		return fmt.Errorf("drop %s on cluster %s: %w", name, cluster, err)
	}
	return nil
}
