package app_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/internal/app"
)

// The Kafka TLS and SASL flags reach the Kafka config of serve and
// cmd/ingest, from the command line or STORMRADIUS_<FLAG>; the password
// only from its file or STORMRADIUS_KAFKA_SASL_PASSWORD, never a flag,
// and no error holds it.
func TestKafkaSecurityFlags(t *testing.T) {
	parse := func(role app.Role, args ...string) (app.Config, error) {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		build := app.Flags(fs, role)
		if fs.Lookup("kafka-sasl-password") != nil {
			t.Fatal("a password flag: argv is readable by every user")
		}
		if err := fs.Parse(append([]string{"--kafka-brokers", "k:9092"}, args...)); err != nil {
			t.Fatal(err)
		}
		if err := app.ApplyEnv(fs); err != nil {
			t.Fatal(err)
		}
		return build()
	}
	const secret = "p@ss:w/rd#1"
	dir := t.TempDir()
	passFile := filepath.Join(dir, "pass")
	if err := os.WriteFile(passFile, []byte(secret+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	for _, role := range []app.Role{app.Serve, app.Ingest} {
		c, err := parse(role, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-username", "ingest",
			"--kafka-sasl-password-file", passFile, "--kafka-tls-server-name", "broker.test")
		if err != nil {
			t.Fatal(err)
		}
		want := kafka.Security{TLSServerName: "broker.test", SASLMechanism: "scram-sha-512", SASLUsername: "ingest", SASLPassword: secret}
		if c.Kafka.Security != want {
			t.Fatalf("%v: %+v, want %+v", role, c.Kafka.Security, want)
		}
	}

	t.Setenv("STORMRADIUS_KAFKA_SASL_MECHANISM", "plain")
	t.Setenv("STORMRADIUS_KAFKA_SASL_USERNAME", "env-user")
	t.Setenv("STORMRADIUS_KAFKA_SASL_PASSWORD", secret)
	t.Setenv("STORMRADIUS_KAFKA_TLS", "true")
	c, err := parse(app.Ingest)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Kafka.Security; !s.TLS || s.SASLMechanism != "plain" || s.SASLUsername != "env-user" || s.SASLPassword != secret {
		t.Fatalf("from the environment: %+v", s)
	}

	t.Setenv("STORMRADIUS_KAFKA_SASL_PASSWORD", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "needs --kafka-sasl-username and a password"},
		{[]string{"--kafka-sasl-password-file", filepath.Join(dir, "missing")}, "--kafka-sasl-password-file"},
		{[]string{"--kafka-sasl-password-file", passFile, "--kafka-sasl-mechanism", "gssapi"}, `"gssapi"`},
		{[]string{"--kafka-sasl-password-file", passFile, "--kafka-tls-ca", filepath.Join(dir, "missing.pem")}, "TLS CA"},
	} {
		_, err := parse(app.Serve, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one holding %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%v: the error holds the password: %v", c.args, err)
		}
	}
}

// --retention takes whole days as well as Go durations, from the command
// line or the environment.
func TestRetentionDays(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want time.Duration
	}{{"7d", 7 * 24 * time.Hour}, {"30d", 30 * 24 * time.Hour}, {"168h", 168 * time.Hour}, {"90m", 90 * time.Minute}} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		build := app.Flags(fs, app.Serve)
		if err := fs.Parse([]string{"--retention", c.arg}); err != nil {
			t.Fatalf("%s: %v", c.arg, err)
		}
		cfg, err := build()
		if err != nil || cfg.Pipeline.Retention != c.want {
			t.Errorf("--retention %s: %v %v, want %v", c.arg, cfg.Pipeline.Retention, err, c.want)
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	app.Flags(fs, app.Serve)
	if err := fs.Parse([]string{"--retention", "7 days"}); err == nil || !strings.Contains(err.Error(), "7d") {
		t.Errorf("--retention '7 days': %v, want an error naming 7d", err)
	}
	if f := fs.Lookup("retention"); f.DefValue != "7d" {
		t.Errorf("default %q, want 7d", f.DefValue)
	}
}
