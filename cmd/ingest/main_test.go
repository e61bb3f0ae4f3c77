package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// ingest --help lists the flags ingest honours, each described as it
// behaves: no --data (ingest refuses the embedded store), and --http
// serves health, readiness and metrics, not the API and the UI.
func TestHelpTellsTheTruth(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out); code != 0 {
		t.Fatalf("--help: exit %d\n%s", code, &out)
	}
	help := out.String()
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(help, -1) {
		flags = append(flags, m[1])
	}
	want := "body-buffer-bytes body-timeout claim-header clickhouse-cluster http http-tls-cert http-tls-key ingest-token kafka-brokers kafka-encoding " +
		"kafka-group kafka-partitioned " +
		"kafka-sampling-probability kafka-sasl-mechanism kafka-sasl-password-file kafka-sasl-username kafka-session-timeout " +
		"kafka-tls kafka-tls-ca kafka-tls-cert kafka-tls-insecure-skip-verify kafka-tls-key kafka-tls-server-name kafka-topic " +
		"lease-timeout log-format log-level max-apis max-body-bytes max-inflight-requests max-inflight-spans max-operations " +
		"max-services max-trace-age max-versions min-body-rate " +
		"otlp-grpc otlp-http otlp-sampling-probability otlp-tls-client-ca partition retention " +
		"sampling-adjusted-count-attribute sampling-probability sampling-service-probability source source-lag source-poll source-shard source-start " +
		"store tls-cert tls-key trace-idle window"
	if strings.Join(flags, " ") != want {
		t.Errorf("ingest lists the flags\n %s\nwant\n %s", strings.Join(flags, " "), want)
	}
	httpHelp := regexp.MustCompile(`(?m)^  -http string\n\s+(.*)$`).FindStringSubmatch(help)
	if httpHelp == nil || strings.Contains(httpHelp[1], "API,") || strings.Contains(httpHelp[1], "UI,") ||
		!strings.HasPrefix(httpHelp[1], "/healthz, /readyz and /metrics listen address") {
		t.Errorf("--http is described as %q", httpHelp)
	}
	for _, say := range []string{"in one Kafka consumer group", "--otlp-grpc off --otlp-http off", "own --partition"} {
		if !strings.Contains(help, say) {
			t.Errorf("the help does not say how several instances share a store (%q):\n%s", say, help)
		}
	}

	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"--data", t.TempDir()}, &errOut); code != 2 || !strings.Contains(errOut.String(), "not defined: -data") {
		t.Errorf("--data: exit %d %s", code, &errOut)
	}
}

// A sampling probability out of range is a usage error that names its
// flag.
func TestSamplingFlagUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--otlp-sampling-probability", "1.5"},
		{"--kafka-brokers", "k:9092", "--kafka-sampling-probability", "-1"},
		{"--sampling-probability", "2"},
		{"--sampling-service-probability", "api=0"},
	} {
		var errOut bytes.Buffer
		code := run(context.Background(), append([]string{"--store", "clickhouse://127.0.0.1:1/x"}, args...), &errOut)
		if code != 2 || !strings.HasPrefix(errOut.String(), "ingest: "+args[len(args)-2]) {
			t.Errorf("%v: exit %d, %q", args, code, &errOut)
		}
	}
}

// What --http serves, as its help says: health, readiness and metrics;
// the REST API and the UI are not there.
func TestHTTPServesWhatItSays(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var log bytes.Buffer
	code := -1
	wg.Add(1)
	go func() {
		defer wg.Done()
		code = run(ctx, []string{"--store", "sqlite://" + t.TempDir(), "--http", addr, "--otlp-grpc", "127.0.0.1:0",
			"--otlp-http", "off", "--log-level", "error"}, &log)
	}()
	defer func() {
		cancel()
		wg.Wait()
		if code != 0 {
			t.Errorf("ingest: exit %d\n%s", code, &log)
		}
	}()
	get := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return -1
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	for get("/readyz") != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("ingest never became ready\n%s", &log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for path, want := range map[string]int{"/healthz": 200, "/metrics": 200, "/api/v1/apis": 404, "/": 404} {
		if got := get(path); got != want {
			t.Errorf("GET %s: %d, want %d", path, got, want)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Paper cuts an operator meets (issue 29): ingest with nothing to ingest
// refuses to start, saying so; its --http default is not cmd/api's;
// --retention takes days.
func TestOperatorPaperCuts(t *testing.T) {
	var out bytes.Buffer
	code := run(context.Background(), []string{"--store", "sqlite://" + t.TempDir(), "--otlp-grpc", "off", "--otlp-http", "off"}, &out)
	if code != 2 || !strings.Contains(out.String(), "nothing to ingest") {
		t.Errorf("OTLP off and no Kafka: exit %d\n%s", code, &out)
	}
	out.Reset()
	if code := run(context.Background(), []string{"--help"}, &out); code != 0 || !regexp.MustCompile(`-http string\n.*\(default ":8081"\)`).MatchString(out.String()) {
		t.Errorf("--help: exit %d; want --http defaulting to :8081 (cmd/api has :8080)\n%s", code, &out)
	}
	out.Reset()
	code = run(context.Background(), []string{"--store", "sqlite://" + t.TempDir(), "--retention", "7x"}, &out)
	if code != 2 || !strings.Contains(out.String(), "7d") {
		t.Errorf("--retention 7x: exit %d, want a usage error naming 7d\n%s", code, &out)
	}
}
