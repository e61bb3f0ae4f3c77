package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/stormradius/stormradius/internal/certs/certstest"
)

// fakeHealth records what a Receiver reports, as health.Status would
// serve it.
type fakeHealth struct {
	mu      sync.Mutex
	problem map[string]string
	fails   int
	clears  int
}

func (h *fakeHealth) Fail(key, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.problem == nil {
		h.problem = map[string]string{}
	}
	h.problem[key] = msg
	h.fails++
}

func (h *fakeHealth) Clear(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.problem, key)
	h.clears++
}

func (h *fakeHealth) get(key string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg, ok := h.problem[key]
	return msg, ok
}

func (h *fakeHealth) failCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fails
}

// testParts analyses every partition into one recorder.
type testParts struct{ rec *recorder }

func (p testParts) Open(context.Context, string, int) (Partition, error) {
	return partRecorder{p.rec}, nil
}

type partRecorder struct{ *recorder }

func (partRecorder) Close(bool) error { return nil }

// watched is a receiver under test with what it logs, counts and reports.
type watched struct {
	r      *Receiver
	rec    *recorder
	logs   *logBuffer
	health *fakeHealth
	stop   func() error
}

// startWatched runs a receiver (partitioned or not) with short connection
// backoffs, its logs, metrics and health at hand.
func startWatched(t *testing.T, cfg Config, partitioned bool) *watched {
	t.Helper()
	w := &watched{rec: &recorder{}, logs: &logBuffer{}, health: &fakeHealth{}}
	cfg.Logger = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Health = w.health
	cfg.ConnMinBackoff, cfg.ConnMaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("receiver logs:\n%s", w.logs)
		}
	})
	var err error
	if partitioned {
		w.r, err = NewPartitionedReceiver(cfg, testParts{w.rec})
	} else {
		w.r, err = NewReceiver(cfg, w.rec)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.r.Run(ctx) }()
	var once sync.Once
	var runErr error
	w.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(15 * time.Second):
				t.Error("Run did not return within 15 s of its context ending")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = w.stop() })
	return w
}

func (w *watched) connErrors(reason string) float64 {
	return testutil.ToFloat64(w.r.m.connErrors.WithLabelValues(reason))
}

// warnLines returns the receiver's warning lines that match re.
func (w *watched) warnLines(re string) []string {
	var out []string
	for _, l := range strings.Split(w.logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && regexp.MustCompile(re).MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// pki is a CA, another one, and a broker certificate the first signed.
type pki struct {
	ca, other *certstest.CA
	broker    certstest.Issued
}

func newPKI(t *testing.T) pki {
	ca := certstest.NewCA(t)
	return pki{ca: ca, other: certstest.NewCA(t), broker: ca.Issue(t, "broker", "broker.test")}
}

func newCluster(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, testTopic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func groupOffsetsWith(t *testing.T, brokers []string, d *kafkago.Dialer) map[int]partitionOffsets {
	t.Helper()
	c := newClient(brokers, d)
	defer closeClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := groupOffsets(ctx, c, DefaultGroupID, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// refusal is a broker set-up that refuses a client's settings.
type refusal struct {
	name    string
	brokers []string
	sec     Security
	reason  string
	say     []string // what the log line and the health message hold, besides the broker
}

// TestConnectionRefusedSaysWhy: against brokers that refuse the
// connection for each reason an operator meets (a wrong password, a CA
// that does not sign the broker's certificate, certificates expired on
// either side, TLS on one side only, SASL on one side only, a wrong
// server name, no broker), the receiver logs one line naming the broker,
// what is wrong and the setting that fixes it, however many times it
// checks again; counts each check by reason; tells its health what to
// fix; and reads and commits nothing: the right settings then read
// every record.
func TestConnectionRefusedSaysWhy(t *testing.T) {
	p := newPKI(t)
	const user, pass = "ingest", "right-pass"
	secure := newCluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", user, pass),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{p.broker.TLS}}))
	produce(t, secure, []record{traceRecord(t, 0, 1, 1, 1, false), traceRecord(t, 1, 2, 2, 1, false)},
		kgo.DialTLSConfig(&tls.Config{RootCAs: p.ca.Pool}), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	expired := p.ca.IssueValid(t, "expired", time.Now().Add(-72*time.Hour), time.Now().Add(-24*time.Hour))
	notAfter := expired.TLS.Leaf.NotAfter.UTC().Format(time.RFC3339)
	oldBroker := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{expired.TLS}}))
	mutual := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{p.broker.TLS},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.ca.Pool}))
	plaintext := newCluster(t)
	nobody := deadAddr(t)

	right := Security{TLSCA: p.ca.File, SASLMechanism: "plain", SASLUsername: user, SASLPassword: pass}
	with := func(f func(*Security)) Security { s := right; f(&s); return s }
	for i, c := range []refusal{
		{"wrong password", secure, with(func(s *Security) { s.SASLPassword = "not-it" }),
			connAuth, []string{`refused SASL PLAIN authentication for user "ingest"`, "--kafka-sasl-username", "--kafka-sasl-password-file"}},
		{"wrong CA", secure, with(func(s *Security) { s.TLSCA = p.other.File }), connTLSUnknownCA,
			[]string{"no CA we trust signed", "--kafka-tls-ca " + p.other.File, `issued by "CN=test CA"`}},
		{"plaintext to TLS", secure, with(func(s *Security) { s.TLSCA = "" }), connTLSMismatch, []string{"speaks TLS on this port", "set --kafka-tls"}},
		{"no SASL", secure, Security{TLSCA: p.ca.File}, connAuth, []string{"it wants SASL", "--kafka-sasl-mechanism"}},
		{"wrong server name", secure, with(func(s *Security) { s.TLSServerName = "kafka.example" }), connTLSName,
			[]string{"not valid for", "kafka.example", "--kafka-tls-server-name"}},
		{"broker's certificate expired", oldBroker, Security{TLSCA: p.ca.File}, connTLSExpired,
			[]string{`certificate (subject "CN=expired"`, "expired at " + notAfter, "renew the broker's certificate"}},
		{"our certificate expired", mutual, Security{TLSCA: p.ca.File, TLSCert: expired.CertFile, TLSKey: expired.KeyFile}, connTLSExpired,
			[]string{"refused our client certificate", "--kafka-tls-cert " + expired.CertFile + " expired at " + notAfter}},
		{"no client certificate", mutual, Security{TLSCA: p.ca.File}, connTLSClientCert, []string{"wants a client certificate", "--kafka-tls-cert"}},
		{"TLS to plaintext", plaintext, Security{TLSCA: p.ca.File}, connTLSMismatch,
			[]string{"speaks plaintext Kafka on this port, not TLS", "drop --kafka-tls"}},
		{"nobody listening", []string{nobody}, Security{}, connUnreachable, []string{"cannot reach", "connection refused", "--kafka-brokers"}},
	} {
		t.Run(c.name, func(t *testing.T) { checkRefusal(t, c, i%2 == 1) })
	}

	good, err := right.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	for id, o := range groupOffsetsWith(t, secure, good) {
		if o.Committed != -1 {
			t.Errorf("partition %d: offset %d committed while the brokers refused us", id, o.Committed)
		}
	}
	cfg := testConfig(t, secure)
	cfg.Security = right
	w := startWatched(t, cfg, false)
	waitFor(t, 10*time.Second, "both records", func() bool { return len(w.rec.msgs()) == 2 })
	if _, ok := w.health.get(HealthKey); ok || w.health.failCount() != 0 {
		t.Errorf("health told of a failure with the right settings: %+v", w.health)
	}
}

// checkRefusal runs a receiver against c and checks what it says.
func checkRefusal(t *testing.T, c refusal, partitioned bool) {
	cfg := testConfig(t, c.brokers)
	cfg.Security = c.sec
	if c.sec.Enabled() {
		d, err := c.sec.Dialer()
		if err != nil {
			t.Fatal(err)
		}
		d.Timeout = 500 * time.Millisecond // kfake's plaintext listener waits for the rest of a TLS hello
		cfg.Dialer = d
	}
	w := startWatched(t, cfg, partitioned)
	waitFor(t, 15*time.Second, "three failed checks", func() bool { return w.connErrors(c.reason) >= 3 })
	msg, ok := w.health.get(HealthKey)
	if !ok {
		t.Fatal("health not told")
	}
	lines := w.warnLines(`reason=` + c.reason)
	if len(lines) != 1 {
		t.Fatalf("%d lines of reason %s after %v checks, want 1:\n%s", len(lines), c.reason, w.connErrors(c.reason), strings.Join(lines, "\n"))
	}
	for _, s := range append(c.say, "broker "+c.brokers[0]) {
		if !strings.Contains(msg, s) {
			t.Errorf("health message %q does not hold %q", msg, s)
		}
		if !strings.Contains(lines[0], strings.ReplaceAll(s, `"`, `\"`)) {
			t.Errorf("log line %q does not hold %q", lines[0], s)
		}
	}
	if n := len(w.warnLines(`kafka client|fetch failed|joining the consumer group`)); n > 0 {
		t.Errorf("the client ran (%d warnings) though no broker accepts the connection", n)
	}
	if v := testutil.ToFloat64(w.r.m.connFailing); v != 1 {
		t.Errorf("connection_failing %v, want 1", v)
	}
	for _, r := range connReasons {
		if v := w.connErrors(r); r != c.reason && v != 0 {
			t.Errorf("%v checks counted as %s", v, r)
		}
	}
	if err := w.stop(); err != nil {
		t.Fatal(err)
	}
	if n := w.rec.numAccepted(); n != 0 {
		t.Errorf("%d spans consumed", n)
	}
	if c.sec.SASLPassword != "" && strings.Contains(w.logs.String(), c.sec.SASLPassword) {
		t.Error("the password is in the log")
	}
}

// dropListener is a listener whose accepted connections can all be cut,
// as a broker restart cuts them.
type dropListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *dropListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *dropListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// TestConnectionRecovers: a failure that starts while the receiver runs
// (the broker comes back from a restart with an expired certificate) is
// logged once and reported to health; once the broker's certificate is
// renewed, the report clears and what was produced meanwhile is consumed
// and committed: nothing lost. A broker that is not up yet at start is
// reported as unreachable until it is, then consumed from (partitioned
// receiver).
func TestConnectionRecovers(t *testing.T) {
	t.Run("certificate expires and is renewed", func(t *testing.T) {
		p := newPKI(t)
		expired := p.ca.IssueValid(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), "broker.test")
		var cert atomic.Pointer[tls.Certificate]
		cert.Store(&p.broker.TLS)
		var lns []*dropListener
		brokers := newCluster(t, kfake.TLS(&tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil }}),
			kfake.ListenFn(func(network, addr string) (net.Listener, error) {
				l, err := net.Listen(network, addr)
				dl := &dropListener{Listener: l}
				lns = append(lns, dl)
				return dl, err
			}))
		producer := kgo.DialTLSConfig(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's producer
		produce(t, brokers, []record{traceRecord(t, 0, 1, 1, 1, false), traceRecord(t, 1, 2, 2, 1, false)}, producer)
		cfg := testConfig(t, brokers)
		cfg.Security = Security{TLSCA: p.ca.File}
		w := startWatched(t, cfg, false)
		waitFor(t, 10*time.Second, "the first records", func() bool { return len(w.rec.msgs()) == 2 })

		cert.Store(&expired.TLS)
		for _, l := range lns {
			l.dropAll()
		}
		produce(t, brokers, []record{traceRecord(t, 0, 3, 3, 1, false), traceRecord(t, 1, 4, 4, 1, false)}, producer)
		waitFor(t, 15*time.Second, "the expiry reported and checked again", func() bool { return w.connErrors(connTLSExpired) >= 3 })
		msg, ok := w.health.get(HealthKey)
		if !ok || !strings.Contains(msg, "broker "+brokers[0]) || !strings.Contains(msg, "renew the broker's certificate") {
			t.Fatalf("health: %q %v", msg, ok)
		}
		if lines := w.warnLines("reason=tls_expired"); len(lines) != 1 {
			t.Fatalf("%d lines for the expiry, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		if n := len(w.rec.msgs()); n != 2 {
			t.Fatalf("%d records consumed through an expired certificate", n)
		}

		cert.Store(&p.broker.TLS)
		waitFor(t, 15*time.Second, "all four records", func() bool { return len(w.rec.msgs()) == 4 })
		waitFor(t, 5*time.Second, "the report cleared", func() bool { _, ok := w.health.get(HealthKey); return !ok })
		good, err := Security{TLSCA: p.ca.File}.Dialer()
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "all committed", func() bool {
			for _, o := range groupOffsetsWith(t, brokers, good) {
				if o.Committed != o.Last {
					return false
				}
			}
			return true
		})
		if v := testutil.ToFloat64(w.r.m.connFailing); v != 0 {
			t.Errorf("connection_failing %v after recovery", v)
		}
		if n := strings.Count(w.logs.String(), "kafka: the brokers accept the connection again"); n != 1 {
			t.Errorf("recovery logged %d times, want 1", n)
		}
	})

	t.Run("broker starts late", func(t *testing.T) {
		addr := deadAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		w := startWatched(t, testConfig(t, []string{addr}), true)
		waitFor(t, 10*time.Second, "unreachable reported", func() bool { return w.connErrors(connUnreachable) >= 2 })
		if msg, _ := w.health.get(HealthKey); !strings.Contains(msg, "cannot reach broker "+addr) {
			t.Fatalf("health: %q", msg)
		}
		var portNo int
		fmt.Sscan(port, &portNo)
		brokers := newCluster(t, kfake.Ports(portNo))
		produce(t, brokers, []record{traceRecord(t, 0, 1, 1, 2, false), traceRecord(t, 1, 2, 2, 2, false)})
		waitFor(t, 15*time.Second, "both records", func() bool { return len(w.rec.msgs()) == 2 })
		if _, ok := w.health.get(HealthKey); ok {
			t.Error("still reported after the broker came up")
		}
		if lines := w.warnLines("reason=unreachable"); len(lines) != 1 {
			t.Errorf("%d lines for the broker being down, want 1", len(lines))
		}
	})
}

// A broker that is down while another one accepts us is not reported:
// the cluster moves its partitions to the others.
func TestOneBrokerDownIsNotAFailure(t *testing.T) {
	brokers := cluster(t, 1)
	w := startWatched(t, testConfig(t, []string{deadAddr(t), brokers[0]}), false)
	produce(t, brokers, []record{traceRecord(t, 0, 1, 1, 1, false)})
	waitFor(t, 10*time.Second, "the record", func() bool { return len(w.rec.msgs()) == 1 })
	if n := w.health.failCount(); n != 0 || w.connErrors(connUnreachable) != 0 {
		t.Errorf("a broker down among live ones reported: %d fails, %v checks", n, w.connErrors(connUnreachable))
	}
}

// A listener that takes the connection and says nothing, in plaintext or
// TLS, is reported as not answering, within the dial timeout (and the
// probe's) of each attempt.
func TestSilentBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	addr := ln.Addr().String()
	for _, c := range []struct {
		tls    *tls.Config
		reason string
		say    string
	}{
		{nil, connClosed, "did not answer our Kafka requests (no answer in time)"},
		{&tls.Config{}, connTLS, "did not complete the TLS handshake (no answer in time)"},
	} {
		start := time.Now()
		f := newChecker(&kafkago.Dialer{Timeout: 200 * time.Millisecond, TLS: c.tls}, Security{}).check(context.Background(), addr)
		if f == nil || f.reason != c.reason || !strings.Contains(f.msg, "broker "+addr+" "+c.say) {
			t.Errorf("TLS %v: %+v, want %s saying %q", c.tls != nil, f, c.reason, c.say)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("TLS %v: the check took %v", c.tls != nil, d)
		}
	}
}

// The connection backoff defaults to 1 s doubling to 30 s; a maximum below
// the minimum is refused, a minimum above the default maximum raises it.
func TestConnBackoffConfig(t *testing.T) {
	c, err := Config{Brokers: []string{"k:9092"}}.withDefaults()
	if err != nil || c.ConnMinBackoff != time.Second || c.ConnMaxBackoff != 30*time.Second {
		t.Errorf("defaults %v..%v, %v", c.ConnMinBackoff, c.ConnMaxBackoff, err)
	}
	c, err = Config{Brokers: []string{"k:9092"}, ConnMinBackoff: time.Minute}.withDefaults()
	if err != nil || c.ConnMaxBackoff != time.Minute {
		t.Errorf("min 1m: max %v, %v", c.ConnMaxBackoff, err)
	}
	_, err = Config{Brokers: []string{"k:9092"}, ConnMinBackoff: time.Second, ConnMaxBackoff: time.Millisecond}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), "connection max backoff") {
		t.Errorf("max below min: %v", err)
	}
}
