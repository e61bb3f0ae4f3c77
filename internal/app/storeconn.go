package app

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/internal/health"
)

// storeConn reports the store's connection problems while the service
// runs (a ClickHouse server refusing the credentials or the TLS, or not
// answering): /readyz not ready with the store's one-line message under
// "clickhouse" until a query works again, a log line when the problem
// starts or changes and when it ends, and
// stormradius_store_connection_errors_total by reason. At start the same
// problems fail the store's Open: the command exits non-zero with the
// message.
type storeConn struct {
	log    *slog.Logger
	errors *prometheus.CounterVec

	mu          sync.Mutex
	status      *health.Status // nil until attached
	reason, msg string         // the problem now ("" for none)
}

// healthKey is the key of the store's connection problems in /readyz.
const healthKey = "clickhouse"

func newStoreConn(reg prometheus.Registerer, log *slog.Logger) *storeConn {
	c := &storeConn{log: log, errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stormradius_store_connection_errors_total",
		Help: "Store queries that failed on the connection for a reason a setting fixes, by reason: auth, tls_ca, tls_hostname, " +
			"tls_server_cert, tls_client_cert, tls, not_tls (TLS to a plaintext port), tls_required (plaintext to a TLS port), " +
			"unreachable. /readyz says what to fix while they last."}, []string{"reason"})}
	reg.MustRegister(c.errors)
	return c
}

// report is the store's ConnProblem: reason "" when a query worked.
func (c *storeConn) report(reason, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason != "" {
		c.errors.WithLabelValues(reason).Inc()
	}
	if reason == c.reason && msg == c.msg {
		return
	}
	switch {
	case reason == "":
		c.log.Info("store connection works again", "was", c.msg)
	default:
		c.log.Error("store connection failing: writes are retried, /readyz is not ready until it works", "reason", reason, "err", msg)
	}
	c.reason, c.msg = reason, msg
	c.apply()
}

// attach makes status (the service's /readyz) show the problems, the
// present one at once.
func (c *storeConn) attach(status *health.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = status
	c.apply()
}

func (c *storeConn) apply() {
	switch {
	case c.status == nil:
	case c.reason == "":
		c.status.Clear(healthKey)
	default:
		c.status.Fail(healthKey, c.msg)
	}
}
