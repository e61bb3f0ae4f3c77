package clickhouse

import (
	"net/url"
	"testing"
)

// For the external tests (the service end to end over ClickHouse).

// TestProxy is proxy, exported to the service tests.
type TestProxy = proxy

// NewTestProxy returns a proxy to target.
func NewTestProxy(t *testing.T, target string) *TestProxy { return newProxy(t, target) }

// Cut closes every connection and refuses new ones.
func (p *proxy) Cut() { p.cut() }

// Resume accepts connections again.
func (p *proxy) Resume() { p.resume() }

// Addr is where the proxy listens.
func (p *proxy) Addr() string { return p.addr }

// FreshDatabase returns the DSN of a new database on the test server,
// dropped at the end of the test (skipping without STORMRADIUS_CLICKHOUSE).
func FreshDatabase(t *testing.T) *url.URL {
	u, _ := url.Parse(freshDatabase(t, server(t)))
	return u
}
