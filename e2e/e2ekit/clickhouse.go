package e2ekit

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
)

// ClickHouseEnv names the ClickHouse server of the ClickHouse variants.
const ClickHouseEnv = "STORMRADIUS_CLICKHOUSE"

// FreshDatabase returns the DSN of a new database, prefix and random hex
// digits, on the server ClickHouseEnv names (the store creates it); when
// the test ends drop(server, name) drops it (each suite brings its
// ClickHouse client, which this module does without). It skips the test
// without a server. Call it before starting the processes that use the
// database, so that the drop runs after they stopped.
func FreshDatabase(t testing.TB, prefix string, drop func(server, name string) error) string {
	t.Helper()
	server := os.Getenv(ClickHouseEnv)
	if server == "" {
		t.Skip("set STORMRADIUS_CLICKHOUSE=clickhouse://127.0.0.1:9000/default to run the ClickHouse variants")
	}
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("%s: %v", ClickHouseEnv, err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	d := *u
	d.Path = "/" + name
	t.Cleanup(func() {
		if err := drop(server, name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return d.String()
}
