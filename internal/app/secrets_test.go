package app_test

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
)

// syncBuffer is a bytes.Buffer for concurrent log writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A secret planted in every place a user puts one — the Kafka SASL
// password (from the environment and, wrong, from a file), the API and
// ingest bearer tokens — never shows in what the service prints: its
// configuration errors, its logs (the broker refusing the wrong
// password included), /metrics, /healthz, /readyz or an /api/v1 answer.
// The flag set has no place for a password at all (argv).
func TestSecretsStaySecret(t *testing.T) {
	const secret = "Planted-S3cret"
	const wrong = "Wr0ng-Planted-S3cret"
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, kafka.DefaultTopic), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "ingest", secret))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers := strings.Join(kc.ListenAddrs(), ",")
	passFile := t.TempDir() + "/kafka-password"
	if err := os.WriteFile(passFile, []byte(wrong+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}

	build := func(env map[string]string, args ...string) (app.Config, error) {
		for k, v := range env {
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		b := app.Flags(fs, app.Serve)
		fs.VisitAll(func(f *flag.Flag) {
			if strings.Contains(f.Name, "password") && !strings.HasSuffix(f.Name, "-file") {
				t.Errorf("--%s: a password on the command line is readable by every user", f.Name)
			}
		})
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := app.ApplyEnv(fs); err != nil {
			t.Fatal(err)
		}
		return b()
	}
	// Configuration errors.
	_, err = build(map[string]string{"STORMRADIUS_KAFKA_SASL_PASSWORD": secret}, "--kafka-brokers", brokers,
		"--kafka-sasl-mechanism", "kerberos", "--kafka-sasl-username", "ingest")
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("an unknown mechanism: %v", err)
	}

	logs := &syncBuffer{}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"the right password from the environment", nil},
		{"a wrong password from a file", []string{"--kafka-sasl-password-file", passFile}},
	} {
		cfg, err := build(map[string]string{"STORMRADIUS_KAFKA_SASL_PASSWORD": secret, "STORMRADIUS_API_TOKEN": secret + "-api",
			"STORMRADIUS_INGEST_TOKEN": secret + "-ingest"}, append([]string{"--kafka-brokers", brokers,
			"--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", "ingest", "--kafka-partitioned=false",
			"--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0", "--http", "127.0.0.1:0"}, c.args...)...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cfg.Store = storeurl.Options{Data: t.TempDir()}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.Kafka.LagInterval = 100 * time.Millisecond
		svc := runService(t, cfg)
		time.Sleep(1500 * time.Millisecond) // the consumer joins, or is refused, and says so
		base := "http://" + svc.addrs.HTTP.String()
		var seen []string
		for _, path := range []string{"/metrics", "/healthz", "/readyz", "/api/v1/apis", "/api/v1/fleet", "/api/v1/status"} {
			req, _ := http.NewRequest("GET", base+path, nil)
			req.Header.Set("Authorization", "Bearer "+secret+"-api")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen = append(seen, path+": "+string(b))
		}
		if err := svc.stop(); err != nil {
			t.Logf("%s: stop: %v", c.name, err)
		}
		for _, s := range append(seen, "logs: "+logs.String()) {
			if strings.Contains(s, "Planted-S3cret") {
				i := strings.Index(s, "Planted-S3cret")
				t.Errorf("%s: %q shows a secret: …%s…", c.name, s[:min(len(s), 40)], s[max(0, i-80):min(len(s), i+40)])
			}
		}
	}
	if !strings.Contains(logs.String(), "kafka") {
		t.Errorf("the logs say nothing of Kafka:\n%s", logs.String())
	}
}
