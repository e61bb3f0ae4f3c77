package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/certs"
	"github.com/stormradius/stormradius/internal/certs/certstest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/web"
)

// The service over TLS end to end: the API and /healthz over
// --http-tls-cert (rotated on disk, served from the next handshake), and
// the OTLP receivers with mutual TLS (--otlp-tls-client-ca): an exporter
// with a client certificate the CA signed is served over gRPC and HTTP,
// one without, or with another CA's, is refused.
func TestServiceOverTLS(t *testing.T) {
	ca, other := certstest.NewCA(t), certstest.NewCA(t)
	srv, rotated := ca.Issue(t, "server"), ca.Issue(t, "rotated")
	var logs syncBuffer
	client, stranger := ca.Issue(t, "collector"), other.Issue(t, "stranger")

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	build := app.Flags(fs, app.Serve)
	if err := fs.Parse([]string{"--http-tls-cert", srv.CertFile, "--http-tls-key", srv.KeyFile, "--tls-cert", srv.CertFile,
		"--tls-key", srv.KeyFile, "--otlp-tls-client-ca", ca.File}); err != nil {
		t.Fatal(err)
	}
	cfg, err := build()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPTLS == nil || cfg.OTLP.TLSClientCAFile != ca.File {
		t.Fatalf("flags: HTTP TLS %v, OTLP client CA %q", cfg.HTTPTLS, cfg.OTLP.TLSClientCAFile)
	}
	svc := runService(t, app.Config{
		Store:    storeurl.Options{Data: t.TempDir()},
		Pipeline: pipeline.Config{TraceIdle: 50 * time.Millisecond, MaxTraceAge: 5 * time.Second, Retention: -1},
		OTLP:     otlp.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", TLSCertFile: srv.CertFile, TLSKeyFile: srv.KeyFile, TLSClientCAFile: ca.File},
		HTTPAddr: "127.0.0.1:0",
		HTTPTLS:  cfg.HTTPTLS,
		Web:      &web.Config{Tokens: []string{apiToken}},
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	})
	defer svc.stop()

	// The API over TLS, and its certificate rotated.
	api := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, DisableKeepAlives: true}}
	served := func() string {
		t.Helper()
		resp, err := api.Get("https://" + svc.addrs.HTTP.String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz: %s", resp.Status)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if n := served(); n != "server" {
		t.Fatalf("served %q", n)
	}
	for _, f := range [][2]string{{srv.CertFile, rotated.CertFile}, {srv.KeyFile, rotated.KeyFile}} {
		b, _ := os.ReadFile(f[1])
		if err := os.WriteFile(f[0], b, 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Minute)
		os.Chtimes(f[0], later, later)
	}
	time.Sleep(certs.CheckEvery + 100*time.Millisecond)
	if n := served(); n != "rotated" {
		t.Fatalf("after rotation: served %q", n)
	}
	if resp, err := http.Get("http://" + svc.addrs.HTTP.String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("the API answered plaintext on its TLS port")
		}
	}

	// OTLP with mutual TLS.
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID([16]byte{1})
	span.SetSpanID([8]byte{1})
	span.SetName("GET /")
	now := time.Now()
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Millisecond)))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	req := ptraceotlp.NewExportRequestFromTraces(td)
	body, _ := req.MarshalProto()
	for _, c := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{{"the CA's client", []tls.Certificate{client.TLS}, true}, {"no certificate", nil, false}, {"another CA's", []tls.Certificate{stranger.TLS}, false}} {
		tc := &tls.Config{RootCAs: ca.Pool, Certificates: c.certs}
		conn, err := grpc.NewClient(svc.addrs.OTLPGRPC.String(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, gerr := ptraceotlp.NewGRPCClient(conn).Export(ctx, req)
		cancel()
		conn.Close()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
		resp, herr := hc.Post("https://"+svc.addrs.OTLPHTTP.String()+otlp.TracesPath, "application/x-protobuf", bytes.NewReader(body))
		if herr == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				herr = &statusErr{resp.Status}
			}
		}
		if c.ok && (gerr != nil || herr != nil) {
			t.Errorf("%s: gRPC %v, HTTP %v; want both served", c.name, gerr, herr)
		}
		if !c.ok && (gerr == nil || herr == nil || !strings.Contains(herr.Error(), "certificate")) {
			t.Errorf("%s: gRPC %v, HTTP %v; want both refused", c.name, gerr, herr)
		}
	}
	// Each refusal counted by protocol and reason, and said once with the
	// client's address and the setting.
	resp, err := api.Get("https://" + svc.addrs.HTTP.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, p := range []string{"grpc", "http"} {
		for _, r := range []string{"no_client_cert", "client_cert_unknown_ca"} {
			if !regexp.MustCompile(`stormradius_otlp_tls_refused_total\{protocol="` + p + `",reason="` + r + `"\} [1-9]`).Match(metrics) {
				t.Errorf("no %s %s refusal counted", p, r)
			}
		}
	}
	l := logs.String()
	for _, want := range []string{"the client presented no certificate", `(subject \"CN=stranger\", issued by \"CN=test CA\") is signed by no CA`,
		"--otlp-tls-client-ca", "peer=127.0.0.1:"} {
		if !strings.Contains(l, want) {
			t.Errorf("the log does not say %q:\n%s", want, l)
		}
	}
}

type statusErr struct{ s string }

func (e *statusErr) Error() string { return e.s }
