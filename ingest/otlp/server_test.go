package otlp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/stormradius/stormradius/graph"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "stormradius test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	rec := &recorder{}
	s := startServer(t, Config{TLSCertFile: certFile, TLSKeyFile: keyFile, BearerTokens: []string{"tok"}}, rec)

	// HTTP over TLS (HTTP/2, as Go negotiates it).
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
	}}
	defer client.CloseIdleConnections()
	body := protoBody(t, testTraces(1, 4))
	url := "https://" + s.HTTPAddr().String() + TracesPath
	r := post(t, client, "POST", url, bytes.NewReader(body), contentTypeProto, "", "Authorization", "Bearer tok")
	if r.status != 200 {
		t.Fatalf("HTTPS status %d: %s", r.status, r.body)
	}
	// A TLS 1.1 client is refused.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Post(url, contentTypeProto, bytes.NewReader(body)); err == nil {
		resp.Body.Close()
		t.Errorf("TLS 1.1 accepted")
	}
	// Plain HTTP to the TLS port is refused (a 400 or a reset, depending
	// on when the client reads).
	if resp, err := http.Post("http://"+s.HTTPAddr().String()+TracesPath, contentTypeProto, bytes.NewReader(body)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: status %d", resp.StatusCode)
		}
	}

	// gRPC over TLS.
	conn, err := grpc.NewClient(s.GRPCAddr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadataBearer(context.Background(), "tok")
	if _, err := export(t, ptraceotlp.NewGRPCClient(conn), ctx, ptraceotlp.NewExportRequestFromTraces(testTraces(2, 5))); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	if got := len(rec.taken()); got != 9 {
		t.Errorf("%d spans stored over TLS, want 9", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{TLSCertFile: "cert.pem"}, "set both or neither"},
		{Config{TLSCertFile: "/nonexistent/cert.pem", TLSKeyFile: "/nonexistent/key.pem"}, "/nonexistent/cert.pem"},
		{Config{BearerTokens: []string{"a", ""}}, "BearerTokens[1] is empty"},
		{Config{MaxBodyBytes: -1}, "MaxBodyBytes"},
		{Config{DisableGRPC: true, DisableHTTP: true}, "both receivers are disabled"},
	} {
		_, err := New(tc.cfg, &recorder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error saying %q", tc.cfg, err, tc.want)
		}
	}
	// A port in use is reported at Start, naming the address.
	s := startServer(t, Config{DisableGRPC: true}, &recorder{})
	s2, err := New(Config{DisableGRPC: true, HTTPAddr: s.HTTPAddr().String()}, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(context.Background()); err == nil || !strings.Contains(err.Error(), s.HTTPAddr().String()) {
		t.Errorf("Start on a port in use: %v", err)
	}
	if s2.GRPCAddr() != nil || s2.HTTPAddr() != nil {
		t.Errorf("addresses of a server that failed to start: %v %v", s2.GRPCAddr(), s2.HTTPAddr())
	}
}

// TestShutdownWaitsForInflight holds one HTTP and one gRPC request inside
// Consume: Shutdown must wait for both, and both must be acknowledged.
func TestShutdownWaitsForInflight(t *testing.T) {
	rec := &recorder{gate: make(chan struct{}), enter: make(chan struct{}, 2)}
	s, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))
	body := protoBody(t, testTraces(1, 3))

	var wg sync.WaitGroup
	var httpStatus int
	var grpcErr error
	wg.Go(func() {
		httpStatus = post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "").status
	})
	wg.Go(func() {
		_, grpcErr = export(t, c, context.Background(), ptraceotlp.NewExportRequestFromTraces(testTraces(2, 4)))
	})
	<-rec.enter
	<-rec.enter

	httpAddr := s.HTTPAddr().String()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with requests in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	// No new connection is accepted meanwhile.
	if conn, err := net.DialTimeout("tcp", httpAddr, time.Second); err == nil {
		conn.Close()
		t.Errorf("HTTP receiver accepts connections while shutting down")
	}

	close(rec.gate)
	wg.Wait()
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if httpStatus != 200 || grpcErr != nil {
		t.Errorf("in-flight requests: HTTP %d, gRPC %v; want both acknowledged", httpStatus, grpcErr)
	}
	if got := len(rec.taken()); got != 7 {
		t.Errorf("%d spans stored, want 7", got)
	}
}

// TestShutdownDeadline: a request stuck in Consume past Shutdown's
// deadline is cancelled, and Shutdown says so.
func TestShutdownDeadline(t *testing.T) {
	rec := &recorder{gate: make(chan struct{}), enter: make(chan struct{}, 2)}
	defer close(rec.gate)
	s, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))
	done := make(chan error, 1)
	go func() {
		_, err := export(t, c, context.Background(), ptraceotlp.NewExportRequestFromTraces(testTraces(2, 4)))
		done <- err
	}()
	<-rec.enter
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown past its deadline: %v, want DeadlineExceeded", err)
	}
	if err := <-done; status.Code(err) == codes.OK {
		t.Errorf("request cut by a forced shutdown succeeded")
	}
	if len(rec.taken()) != 0 {
		t.Errorf("spans stored by a request cut short")
	}
}

// TestBusy: with every MaxInflightRequests slot taken, a request waits
// about a second, then is refused with a retryable answer.
func TestBusy(t *testing.T) {
	rec := &recorder{gate: make(chan struct{}), enter: make(chan struct{}, 4)}
	s := startServer(t, Config{MaxInflightRequests: 1}, rec)
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))
	body := protoBody(t, testTraces(1, 3))

	first := make(chan int, 1)
	go func() {
		first <- post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "").status
	}()
	<-rec.enter

	var wg sync.WaitGroup
	var r reply
	var grpcErr error
	wg.Go(func() { r = post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "") })
	wg.Go(func() {
		_, grpcErr = export(t, c, context.Background(), ptraceotlp.NewExportRequestFromTraces(testTraces(2, 3)))
	})
	wg.Wait()
	if r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("HTTP while busy: status %d, Retry-After %q; want 503 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
	if code := status.Code(grpcErr); code != codes.Unavailable {
		t.Errorf("gRPC while busy: %v, want Unavailable", grpcErr)
	}
	close(rec.gate)
	if st := <-first; st != 200 {
		t.Errorf("the request holding the slot: status %d", st)
	}
}

// laggard is a Consumer that hands the spans on and gives up waiting when
// its context is done, as the pipeline does: what it handed on still reads
// the slice afterwards.
type laggard struct {
	held  chan []graph.Span
	first atomic.Bool
}

func (l *laggard) Consume(ctx context.Context, spans []graph.Span) error {
	if l.first.CompareAndSwap(false, true) {
		l.held <- spans // the slice itself, not a copy
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// TestCanceledSpansNotReused: after a Consume that returned because the
// client went away, the receiver must not reuse the slice it passed.
func TestCanceledSpansNotReused(t *testing.T) {
	l := &laggard{held: make(chan []graph.Span, 1)}
	s, err := New(Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DisableGRPC: true}, l)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", tracesURL(s), bytes.NewReader(protoBody(t, testTraces(1, 50))))
	req.Header.Set("Content-Type", contentTypeProto)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	held := <-l.held
	cancel()
	<-done
	// Later requests, which would take the pooled slice back.
	for i := range 5 {
		r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(protoBody(t, testTraces(byte(2+i), 50))), contentTypeProto, "")
		if r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	for i := range held {
		if tid, _ := wantIDs(1, 0); held[i].TraceID[0] != tid[0] {
			t.Fatalf("span %d of the canceled request was overwritten: trace id %s", i, held[i].TraceID)
		}
	}
}
