// Package chtest gives integration tests a database of their own on the
// ClickHouse server STORMRADIUS_CLICKHOUSE names, and skips them with a
// clear message without one.
package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

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
