package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/internal/certs/certstest"
	"github.com/stormradius/stormradius/sim"
)

// lockedKafka is a Kafka-protocol broker (kfake) that takes only TLS, with
// a certificate of its own CA, and SASL with one user and mechanism, as a
// production broker's SASL_SSL listener.
type lockedKafka struct {
	broker   string
	ca       *certstest.CA
	mech     string // plain, scram-sha-256 or scram-sha-512, as --kafka-sasl-mechanism takes it
	user     string
	passFile string // the right password, as --kafka-sasl-password-file takes it
	client   *kgo.Client
}

const kafkaUser, kafkaPass = "stormradius-ingest", "k4fka:S3cret/pass"

func newLockedKafka(t *testing.T, mech string, partitions int32) *lockedKafka {
	t.Helper()
	ca := certstest.NewCA(t)
	cert := ca.Issue(t, "broker", "broker.test")
	kfakeMech := map[string]string{"plain": "PLAIN", "scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512"}[mech]
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "otlp_spans"), kfake.EnableSASL(),
		kfake.Superuser(kfakeMech, kafkaUser, kafkaPass), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert.TLS}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var m sasl.Mechanism
	switch mech {
	case "plain":
		m = plain.Auth{User: kafkaUser, Pass: kafkaPass}.AsMechanism()
	case "scram-sha-256":
		m = scram.Auth{User: kafkaUser, Pass: kafkaPass}.AsSha256Mechanism()
	default:
		m = scram.Auth{User: kafkaUser, Pass: kafkaPass}.AsSha512Mechanism()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("otlp_spans"),
		kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool}), kgo.SASL(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	k := &lockedKafka{broker: cluster.ListenAddrs()[0], ca: ca, mech: mech, user: kafkaUser, client: cl,
		passFile: secretFile(t, kafkaPass)}
	return k
}

func secretFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(s+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	return p
}

// flags are the consumer's flags for this broker: the right ones.
func (k *lockedKafka) flags(group string) []string {
	return []string{"--kafka-brokers", k.broker, "--kafka-group", group, "--kafka-tls-ca", k.ca.File,
		"--kafka-sasl-mechanism", k.mech, "--kafka-sasl-username", k.user, "--kafka-sasl-password-file", k.passFile}
}

// produceTraces writes the traces as the collector's kafka exporter does
// with partition_traces_by_id: a record per service per trace, keyed by
// the trace id in hex, over neighbouring traces.
func (k *lockedKafka) produceTraces(t *testing.T, res *sim.Result) {
	t.Helper()
	var records []*kgo.Record
	for _, td := range res.Exports(11, 1, 20) {
		id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, &kgo.Record{Key: []byte(hex.EncodeToString(id[:])), Value: b})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestServeKafkaTLSSASL: serve consuming from a broker that takes only
// TLS and SASL, with PLAIN and with SCRAM-SHA-512 (SCRAM-SHA-256 is
// TestIngestKafkaTLSSASL's): its report equals analyze of the same spans.
func TestServeKafkaTLSSASL(t *testing.T) {
	res := crashCorpus(t)
	want := reference(t, res)
	for _, mech := range []string{"plain", "scram-sha-512"} {
		t.Run(mech, func(t *testing.T) {
			k := newLockedKafka(t, mech, 3)
			k.produceTraces(t, res)
			dir := t.TempDir()
			p := serve(t, dir, k.flags("serve-"+mech)...)
			defer p.term(t)
			got := settledReport(t, dir, res.Stats.Spans)
			if got != want {
				t.Fatalf("report over TLS and SASL %s differs from analyze:\n got %s\nwant %s\nlog:\n%s", mech, got, want, p.log)
			}
		})
	}
}

var (
	ingestOnce sync.Once
	ingestPath string
	ingestErr  error
)

// ingestBinary builds cmd/ingest once per test run.
func ingestBinary(t *testing.T) string {
	t.Helper()
	commandBinary(t) // skips in -short
	ingestOnce.Do(func() {
		ingestPath = filepath.Join(filepath.Dir(binPath), "ingest")
		out, err := exec.Command("go", "build", "-o", ingestPath, "../ingest").CombinedOutput()
		if err != nil {
			ingestErr = fmt.Errorf("go build ../ingest: %v\n%s", err, out)
		}
	})
	if ingestErr != nil {
		t.Fatal(ingestErr)
	}
	return ingestPath
}

// startIngest starts cmd/ingest on the embedded store in dir, OTLP off,
// and waits until /readyz answers (ready or not).
func startIngest(t *testing.T, dir string, extra ...string) *proc {
	t.Helper()
	p := &proc{httpURL: "http://" + freeAddr(t), log: &logBuffer{}}
	args := append([]string{"--store", "sqlite://" + dir, "--window", "10m", "--trace-idle", "100ms", "--max-trace-age", "3s",
		"--retention", "0", "--otlp-grpc", "off", "--otlp-http", "off", "--kafka-session-timeout", "6s",
		"--http", strings.TrimPrefix(p.httpURL, "http://")}, extra...)
	p.cmd = exec.Command(ingestBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if code, _ := p.get("/readyz"); code != 0 {
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("ingest never answered /readyz:\n%s", p.log)
	return nil
}

// get returns a path's status and body (0 when it does not answer).
func (p *proc) get(path string) (int, string) {
	resp, err := http.Get(p.httpURL + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady waits until /readyz says ready.
func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for code, _ := p.get("/readyz"); code != 200; code, _ = p.get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("never ready:\n%s", p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric returns the value of the first series of /metrics that matches
// re (name and labels), or -1.
func (p *proc) metric(re string) float64 {
	_, body := p.get("/metrics")
	m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestIngestKafkaTLSSASL: two cmd/ingest in one consumer group, OTLP off,
// over one store, consuming from a broker that takes only TLS and
// SCRAM-SHA-256: each is assigned partitions, and the report equals
// analyze of the same spans.
func TestIngestKafkaTLSSASL(t *testing.T) {
	res := crashCorpus(t)
	want := reference(t, res)
	k := newLockedKafka(t, "scram-sha-256", 4)
	dir := t.TempDir()
	args := k.flags("ingest-pair")
	a := startIngest(t, dir, args...)
	b := startIngest(t, dir, args...)
	defer func() {
		if t.Failed() {
			t.Logf("instance a:\n%s\ninstance b:\n%s", a.log, b.log)
		}
	}()
	a.waitReady(t)
	b.waitReady(t)
	assigned(t, a, b)
	k.produceTraces(t, res)
	got := settledReport(t, dir, res.Stats.Spans)
	for _, p := range []*proc{a, b} {
		if p.metric(`stormradius_kafka_spans_total\{[^}]*\}`) <= 0 {
			t.Errorf("an instance stored no span from Kafka:\n%s", p.log)
		}
	}
	a.term(t)
	b.term(t)
	if got != want {
		t.Fatalf("report of two ingest over TLS and SASL differs from analyze:\n got %s\nwant %s", got, want)
	}
}

// TestIngestKafkaRefused: cmd/ingest started with a wrong password, then
// with a CA that did not sign the broker's certificate, says so in one log
// line naming the setting and the broker however often it checks again,
// counts the failed checks in stormradius_kafka_connection_errors_total,
// and /readyz is 503 with the same message; it consumes nothing. Started
// again with the right settings, it consumes every record: the report
// equals analyze, nothing lost to the failed starts.
func TestIngestKafkaRefused(t *testing.T) {
	res := crashCorpus(t)
	want := reference(t, res)
	k := newLockedKafka(t, "scram-sha-512", 3)
	k.produceTraces(t, res)
	dir := t.TempDir()
	other := certstest.NewCA(t)
	right := k.flags("refused")
	with := func(flag, value string) []string {
		args := append([]string(nil), right...)
		for i := range args {
			if args[i] == flag {
				args[i+1] = value
			}
		}
		return args
	}
	for _, c := range []struct {
		name   string
		args   []string
		reason string
		say    []string
	}{
		{"wrong password", with("--kafka-sasl-password-file", secretFile(t, "not-the-password")), "auth",
			[]string{`refused SASL SCRAM-SHA-512 authentication for user "` + kafkaUser + `"`, "--kafka-sasl-username", "--kafka-sasl-password-file"}},
		{"wrong CA", with("--kafka-tls-ca", other.File), "tls_unknown_ca",
			[]string{"no CA we trust signed", "--kafka-tls-ca " + other.File}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startIngest(t, dir, c.args...)
			series := `stormradius_kafka_connection_errors_total\{reason="` + c.reason + `",topic="otlp_spans"\}`
			deadline := time.Now().Add(20 * time.Second)
			for p.metric(series) < 3 { // checked at once, after 1 s and 2 s more
				if time.Now().After(deadline) {
					t.Fatalf("%s: %v failed checks counted, want 3:\n%s", series, p.metric(series), p.log)
				}
				time.Sleep(100 * time.Millisecond)
			}
			code, body := p.get("/readyz")
			wantLine := "not ready: kafka: broker " + k.broker
			if code != http.StatusServiceUnavailable || !strings.Contains(body, wantLine) {
				t.Errorf("/readyz: %d %q, want 503 with %q", code, body, wantLine)
			}
			var lines []string
			for _, l := range strings.Split(p.log.String(), "\n") {
				if strings.Contains(l, "reason="+c.reason) {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 {
				t.Fatalf("%d log lines of reason %s after 3 checks, want 1:\n%s", len(lines), c.reason, p.log)
			}
			for _, s := range append(c.say, "broker "+k.broker) {
				if !strings.Contains(body, s) {
					t.Errorf("/readyz does not say %q:\n%s", s, body)
				}
				if !strings.Contains(lines[0], strings.ReplaceAll(s, `"`, `\"`)) {
					t.Errorf("the log line does not say %q:\n%s", s, lines[0])
				}
			}
			if n := p.metric(`stormradius_kafka_messages_total\{[^}]*\}`); n != 0 {
				t.Errorf("%v records fetched while the broker refused us", n)
			}
			if strings.Contains(p.log.String()+body, kafkaPass) || strings.Contains(p.log.String()+body, "not-the-password") {
				t.Error("a password shows in the log or /readyz")
			}
			p.term(t)
		})
	}

	p := startIngest(t, dir, right...)
	defer p.term(t)
	p.waitReady(t)
	got := settledReport(t, dir, res.Stats.Spans)
	if got != want {
		t.Fatalf("report after the refused starts differs from analyze:\n got %s\nwant %s\nlog:\n%s", got, want, p.log)
	}
}
