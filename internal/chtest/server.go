package chtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Env names the ClickHouse server of the integration tests, as the
// store's DSN says it. Unset (or empty), the tests use DefaultServer when
// it answers and skip otherwise; Off turns them off.
const Env = "STORMRADIUS_CLICKHOUSE"

// ClusterEnv names the ClickHouse cluster of the cluster tests: a server
// of it, a database and the cluster's name, as the store's DSN says them
// (clickhouse://127.0.0.1:29001/default?cluster=stormradius_test, what
// scripts/chcluster.sh start prints). It is not STORMRADIUS_CLICKHOUSE_CLUSTER:
// that is --clickhouse-cluster's environment fallback, a cluster name.
// Unset, the cluster tests use DefaultCluster when it answers.
const ClusterEnv = "STORMRADIUS_TEST_CLICKHOUSE_CLUSTER"

// Off, as the value of Env or ClusterEnv, skips those tests without
// looking for a server.
const Off = "off"

// DefaultServer is the server the integration tests use without Env when
// it answers: the local one README's "Test" names.
const DefaultServer = "clickhouse://127.0.0.1:9000/default"

// DefaultCluster is the cluster the cluster tests use without ClusterEnv
// when it answers: the one scripts/chcluster.sh start runs.
const DefaultCluster = "clickhouse://127.0.0.1:29001/default?cluster=stormradius_test"

// Without the variable, a server that does not answer within
// defaultTimeout is taken for absent; a server the variable names is
// given namedTimeout before the tests fail.
const (
	defaultTimeout = 2 * time.Second
	namedTimeout   = 10 * time.Second
)

// A suite is one kind of ClickHouse test: the variable naming its server,
// the server it uses without one, and what it found, looked up once per
// test process.
type suite struct {
	what     string // "ClickHouse integration tests"
	env      string // the variable naming the server
	fallback string // the server used without env when it answers
	start    string // how to start the fallback
	ping     func(dsn string, timeout time.Duration) error
	// uncached keeps a skip out of the go command's test cache
	// (doNotCache), so that the next go test looks for the server again.
	uncached bool

	once  sync.Once
	found server
	noted sync.Once // this process's note (announce)
}

// A server is what a suite's tests do: run against dsn, skip saying why
// (skip; off when they were turned off, which needs no note), or fail
// saying why (err).
type server struct {
	dsn  string
	skip string
	off  bool
	err  error
}

// The package's suites, each looked up at most once per test process so
// that every test of one binary agrees and a server that does not answer
// costs one timeout.
var (
	single = &suite{
		what:     "ClickHouse integration tests",
		env:      Env,
		fallback: DefaultServer,
		start:    "start one (README, \"Test\")",
		ping:     ping,
		uncached: true,
	}
	cluster = &suite{
		what:     "ClickHouse cluster tests",
		env:      ClusterEnv,
		fallback: DefaultCluster,
		start:    "scripts/chcluster.sh start runs one",
		ping:     ping,
		// Cached: the cluster tests run in a step of their own, with
		// -count=1 (README), and a cluster's absence, the usual case,
		// would otherwise run the packages with cluster tests
		// (store/clickhouse's whole suite) again at every go test.
	}
)

// DSN returns the URL of the ClickHouse server the integration tests use:
// the one Env names, else DefaultServer when it answers. Otherwise skip
// says why the tests do not run (Env is Off, or no server answered at
// DefaultServer), or err why they cannot (the server Env names is not a
// URL or does not answer: a server that was asked for and is down is a
// failure, not a reason to skip).
func DSN() (dsn, skip string, err error) {
	s := single.server()
	return s.dsn, s.skip, s.err
}

// server looks the suite's server up on its first call and returns what
// it found then on every call.
func (s *suite) server() server {
	s.once.Do(func() { s.found = s.decide(os.Getenv(s.env)) })
	return s.found
}

// decide says what the suite's tests do when its variable is value.
func (s *suite) decide(value string) server {
	switch value {
	case Off:
		return server{skip: fmt.Sprintf("%s skipped: %s=%s", s.what, s.env, Off), off: true}
	case "":
		if err := s.ping(s.fallback, defaultTimeout); err != nil {
			return server{skip: fmt.Sprintf("%s skipped: no server answered at %s (%v); %s or set %s to one (%s skips them quietly)",
				s.what, s.fallback, err, s.start, s.env, Off)}
		}
		return server{dsn: s.fallback}
	}
	if _, err := url.Parse(value); err != nil {
		return server{err: fmt.Errorf("%s=%s: %w", s.env, value, err)}
	}
	if err := s.ping(value, namedTimeout); err != nil {
		return server{err: fmt.Errorf("%s=%s does not answer: %w (start it, or unset %s to use %s when it answers, or set it to %s to skip the %s)",
			s.env, value, err, s.env, s.fallback, Off, s.what)}
	}
	return server{dsn: value}
}

// ping connects to the server dsn names and pings it, within timeout. It
// asks for the default database, whatever dsn's is (a test's database
// need not exist yet), and drops the store's own parameters (cluster).
func ping(dsn string, timeout time.Duration) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return err
	}
	d := *u
	d.Path = "/default"
	q := d.Query()
	q.Del("cluster")
	d.RawQuery = q.Encode()
	o, err := ch.ParseDSN(d.String())
	if err != nil {
		return err
	}
	o.DialTimeout = timeout
	conn, err := ch.Open(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %v", timeout)
		}
		return err
	}
	return nil
}
