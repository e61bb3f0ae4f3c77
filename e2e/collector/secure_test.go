package collector

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka account of TestKafkaSecure. The password has characters a
// shell, a URL or YAML would take for syntax, and is distinctive enough
// that finding it in a log or an argv means it leaked.
const (
	kafkaUser     = "stormradius-e2e"
	kafkaPassword = "E2E-kafka/p@ss:w0rd#1%"
)

// The collector's kafka exporter with deploy/collector/kafka.yaml and
// kafka-secure.yaml merged over it (TLS verified against a CA file, SASL
// with each mechanism the exporter and stormradius share) into a broker
// that speaks only TLS and takes only that account (kfake); consumed by
// `stormradius serve` (embedded) or cmd/ingest (ClickHouse) over TLS with
// the same CA file and SASL, the password read from a file of mode 0400.
// The report equals analyze of the sample; the broker saw SASL
// handshakes with the configured mechanism only; the password is on no
// process' command line, and in none of their logs, /metrics or /readyz.
func TestKafkaSecure(t *testing.T) {
	t.Parallel()
	setup(t)
	const topic = "otlp_spans"
	pki := newPKI(t)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			forStores(t, func(t *testing.T, st store) {
				cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic),
					kfake.EnableSASL(), kfake.Superuser(mech, kafkaUser, kafkaPassword),
					kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.server}}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(cluster.Close)
				handshakes := watchSASL(cluster)
				broker := cluster.ListenAddrs()[0]
				passFile := filepath.Join(t.TempDir(), "kafka-password")
				if err := os.WriteFile(passFile, []byte(kafkaPassword+"\n"), 0o400); err != nil {
					t.Fatal(err)
				}
				kafka := []string{"--kafka-brokers", broker, "--kafka-topic", topic, "--kafka-group", "stormradius-e2e",
					"--kafka-tls-ca", pki.caFile, "--kafka-sasl-mechanism", strings.ToLower(mech),
					"--kafka-sasl-username", kafkaUser, "--kafka-sasl-password-file", passFile}
				var svc *service
				if st.name == embedded.name {
					svc = startServe(t, st, kafka...)
				} else {
					svc = startService(t, st, suite.ingest, kafka...)
				}
				col := startCollector(t, "kafka", []string{
					"KAFKA_BROKERS=" + broker,
					"KAFKA_TOPIC=" + topic,
					"KAFKA_ENCODING=otlp_proto",
					"KAFKA_COMPRESSION=zstd",
					"KAFKA_TLS_CA_FILE=" + pki.caFile,
					"KAFKA_SASL_MECHANISM=" + mech,
					"KAFKA_SASL_USERNAME=" + kafkaUser,
					"KAFKA_SASL_PASSWORD=" + kafkaPassword,
				}, "--config", filepath.Join(suite.configs, "kafka-secure.yaml"))
				col.send(t)
				checkReport(t, svc, col.Proc)
				handshakes.check(t, mech)
				checkNoPassword(t, kafkaPassword, svc, col.Proc)
			})
		})
	}
}

// saslSeen counts the SASL mechanisms clients asked the broker for.
type saslSeen struct {
	mu    sync.Mutex
	mechs map[string]int
}

// watchSASL observes every SASLHandshake request (the broker still
// answers it).
func watchSASL(c *kfake.Cluster) *saslSeen {
	s := &saslSeen{mechs: map[string]int{}}
	c.ControlKey(int16(kmsg.SASLHandshake), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		s.mu.Lock()
		s.mechs[kr.(*kmsg.SASLHandshakeRequest).Mechanism]++
		s.mu.Unlock()
		return nil, nil, false
	})
	return s
}

// check asserts that the clients authenticated with mech only, at least
// twice: the collector's producer and stormradius' consumer.
func (s *saslSeen) check(t *testing.T, mech string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for m, n := range s.mechs {
		if m != mech {
			t.Errorf("%d SASL handshakes with %s, want %s only", n, m, mech)
		}
	}
	if s.mechs[mech] < 2 {
		t.Errorf("%d SASL handshakes with %s, want one of the collector's and one of stormradius' at least", s.mechs[mech], mech)
	}
}

// checkNoPassword asserts that password is on no process' command line
// (/proc/PID/cmdline, read while they run), in none of their output, nor
// on the service's /metrics and /readyz. So that the check cannot pass
// by reading the wrong thing, the service's command line must name
// --kafka-sasl-password-file.
func checkNoPassword(t *testing.T, password string, svc *service, others ...*e2ekit.Proc) {
	t.Helper()
	for _, p := range append([]*e2ekit.Proc{svc.Proc}, others...) {
		argv, err := os.ReadFile("/proc/" + strconv.Itoa(p.Cmd.Process.Pid) + "/cmdline")
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		if len(argv) == 0 {
			t.Errorf("%s: empty /proc/%d/cmdline: has it exited?", p.Name, p.Cmd.Process.Pid)
		}
		if strings.Contains(string(argv), password) {
			t.Errorf("%s has the Kafka password on its command line", p.Name)
		}
		if p == svc.Proc && !strings.Contains(string(argv), "\x00--kafka-sasl-password-file\x00") {
			t.Errorf("%s: /proc/%d/cmdline %q has no --kafka-sasl-password-file", p.Name, p.Cmd.Process.Pid, argv)
		}
		if strings.Contains(p.Output(), password) {
			t.Errorf("%s wrote the Kafka password to its log", p.Name)
		}
	}
	for _, path := range []string{"/metrics", "/readyz"} {
		resp, err := http.Get("http://" + svc.http + path)
		if err != nil {
			t.Error(err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(body) == 0 {
			t.Errorf("%s %s: %d bytes, %v", svc.Name, path, len(body), err)
		}
		if strings.Contains(string(body), password) {
			t.Errorf("%s shows the Kafka password on %s", svc.Name, path)
		}
	}
}

// pki is a certificate authority's PEM file and a server certificate it
// signed for 127.0.0.1.
type pki struct {
	caFile string
	server tls.Certificate
}

// newPKI makes a CA and a server certificate it signs; the server
// certificate is not itself a CA, so that a client trusting the CA file
// must verify the chain.
func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, caDER := certificate(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "stormradius e2e CA"},
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, der := certificate(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kafka broker"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
	p := pki{caFile: filepath.Join(dir, "ca.pem"), server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
	if err := os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var certSerial struct {
	sync.Mutex
	n int64
}

// certificate signs tmpl (valid from an hour ago for a day) with a new
// key, by parent and parentKey, or by itself when parent is nil.
func certificate(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certSerial.Lock()
	certSerial.n++
	tmpl.SerialNumber = big.NewInt(certSerial.n)
	certSerial.Unlock()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(fmt.Errorf("certificate %s: %w", tmpl.Subject.CommonName, err))
	}
	return key, der
}
