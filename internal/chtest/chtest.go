// Package chtest gives integration tests a database of their own on the
// ClickHouse server STORMRADIUS_CLICKHOUSE names, or without it on the
// local server README names when it answers, and likewise on the
// ClickHouse cluster STORMRADIUS_TEST_CLICKHOUSE_CLUSTER names or the
// local one scripts/chcluster.sh runs.
//
// When there is no server the tests skip, saying why in t.Skip and, once
// per go test run, in a line the person running it sees without -v (the
// go command's standard error, or the terminal). A server the variable
// names that does not answer fails them; the value off skips them without
// the note.
package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Server returns the test server's URL (DSN), skipping the test without
// one and failing it when the server Env names does not answer.
func Server(t testing.TB) *url.URL {
	t.Helper()
	return single.url(t)
}

// url returns the suite's server's URL, skipping or failing t as the
// suite's server says.
func (s *suite) url(t testing.TB) *url.URL {
	t.Helper()
	found := s.server()
	if found.err != nil {
		t.Fatal(found.err)
	}
	if found.skip != "" {
		if !found.off {
			s.announce(found.skip)
		}
		t.Skip(found.skip)
	}
	u, err := url.Parse(found.dsn)
	if err != nil {
		t.Fatalf("%s: %v", s.env, err)
	}
	return u
}

// FreshDSN returns the DSN of a new database on the test server, dropped
// when the test ends; it skips or fails the test as Server does.
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

// Cluster returns the cluster's URL, from ClusterEnv or else
// DefaultCluster when it answers, and the cluster's name; it skips the
// test without a cluster and fails it when the one ClusterEnv names does
// not answer, as Server does.
func Cluster(t testing.TB) (*url.URL, string) {
	t.Helper()
	u := cluster.url(t)
	name := u.Query().Get("cluster")
	if name == "" || strings.ContainsAny(name, `'\`) {
		t.Fatalf("%s=%s: want cluster=NAME (no quotes)", ClusterEnv, u)
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
