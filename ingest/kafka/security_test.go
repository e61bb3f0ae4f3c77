package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stormradius/stormradius/internal/certs/certstest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// testPKI returns a CA's pool and file, and a broker certificate it
// signed for 127.0.0.1 and the name "broker.test".
func testPKI(t *testing.T) (*x509.CertPool, string, tls.Certificate) {
	ca := certstest.NewCA(t)
	return ca.Pool, ca.File, ca.Issue(t, "broker", "broker.test").TLS
}

// TestSecureBroker consumes from a broker that takes only TLS and SASL
// (kfake speaks the real protocol for both), with each mechanism, the
// brokers' certificate verified by a CA file, by a CA file and a server
// name, or not at all.
func TestSecureBroker(t *testing.T) {
	pool, caFile, cert := testPKI(t)
	const user, pass = "ingest", "p@ss:w/rd#1"
	for _, c := range []struct {
		name, kfakeMech string
		sec             Security
		client          sasl.Mechanism
	}{
		{"plain, CA file", "PLAIN", Security{TLSCA: caFile, SASLMechanism: "plain"}, plain.Auth{User: user, Pass: pass}.AsMechanism()},
		{"scram-sha-256, CA and server name", "SCRAM-SHA-256", Security{TLSCA: caFile, TLSServerName: "broker.test",
			SASLMechanism: "scram-sha-256"}, scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()},
		{"scram-sha-512, not verified", "SCRAM-SHA-512", Security{TLSInsecureSkipVerify: true, SASLMechanism: "SCRAM-SHA-512"},
			scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()},
	} {
		t.Run(c.name, func(t *testing.T) {
			kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, testTopic), kfake.EnableSASL(),
				kfake.Superuser(c.kfakeMech, user, pass), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(kc.Close)
			brokers := kc.ListenAddrs()
			recs := []record{traceRecord(t, 0, 1, 1, 3, false), traceRecord(t, 1, 2, 2, 2, false)}
			produce(t, brokers, recs, kgo.DialTLSConfig(&tls.Config{RootCAs: pool}), kgo.SASL(c.client))

			cfg := testConfig(t, brokers)
			cfg.Security = c.sec
			cfg.Security.SASLUsername, cfg.Security.SASLPassword = user, pass
			reg := prometheus.NewRegistry()
			cfg.Registerer = reg
			rec := &recorder{}
			r, stop := start(t, cfg, rec)
			waitFor(t, 10*time.Second, "all spans", func() bool { return rec.numAccepted() >= 5 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if got := rec.msgs(); len(got) != 2 || !got[1] || !got[2] {
				t.Fatalf("read records %v, want 1 and 2", got)
			}
			want := 0.0
			if c.sec.TLSInsecureSkipVerify {
				want = 1
			}
			if got := testutil.ToFloat64(r.m.insecure); got != want {
				t.Errorf("insecure gauge %v, want %v", got, want)
			}

			// The wrong password reads nothing, and nothing panics.
			bad := testConfig(t, brokers)
			bad.Security = cfg.Security
			bad.Security.SASLPassword = "wrong"
			bad.GroupID = "other"
			rec2 := &recorder{}
			_, stop2 := start(t, bad, rec2)
			time.Sleep(time.Second)
			_ = stop2()
			if n := rec2.numAccepted(); n != 0 {
				t.Fatalf("a wrong password read %d spans", n)
			}
		})
	}
}

// TestSecurityErrors: each wrong setting is refused at once, naming it,
// and no error holds the password.
func TestSecurityErrors(t *testing.T) {
	_, caFile, _ := testPKI(t)
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "Secret123"
	for _, c := range []struct {
		sec  Security
		want string
	}{
		{Security{TLSCA: filepath.Join(t.TempDir(), "missing.pem")}, "TLS CA"},
		{Security{TLSCA: notPEM}, "no PEM certificate"},
		{Security{TLSCA: caFile, TLSCert: caFile}, "both its certificate and its key"},
		{Security{SASLMechanism: "gssapi", SASLUsername: "u", SASLPassword: secret}, `"gssapi"`},
		{Security{SASLMechanism: "plain", SASLUsername: "u"}, "needs a username and a password"},
		{Security{SASLMechanism: "scram-sha-512", SASLPassword: secret}, "needs a username and a password"},
	} {
		_, err := c.sec.Dialer()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one holding %q", c.sec, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error %q holds the password", err)
		}
		if _, err := NewReceiver(Config{Brokers: []string{"127.0.0.1:1"}, Security: c.sec}, &recorder{}); err == nil {
			t.Errorf("%+v: NewReceiver took it", c.sec)
		}
	}
	if (Security{}).Enabled() || !(Security{TLSServerName: "x"}).TLSOn() || !(Security{SASLMechanism: "plain"}).Enabled() {
		t.Error("Enabled/TLSOn")
	}
}

// A Security printed or logged by mistake shows no password.
func TestSecurityPrintsNoPassword(t *testing.T) {
	s := Security{SASLMechanism: "plain", SASLUsername: "u", SASLPassword: "Secret123"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "sec", s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%+v", s), fmt.Sprintf("%v", &s), b.String()} {
		if strings.Contains(out, "Secret123") || !strings.Contains(out, "SASLUsername:u") {
			t.Errorf("printed as %q", out)
		}
	}
}
