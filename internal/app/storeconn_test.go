package app_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/chtest"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
)

// switchProxy forwards connections to a target that can change; changing
// it cuts the connections open, so that the next ones reach the new one.
type switchProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			to := p.target
			p.mu.Unlock()
			b, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[b] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { io.Copy(b, c); b.Close() }()
			go func() { io.Copy(c, b); c.Close() }()
		}
	}()
	return p
}

// to sends new connections to target and cuts the open ones.
func (p *switchProxy) to(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.cut()
}

func (p *switchProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// The store's connection failing while the service runs — here ClickHouse's
// TLS port, as the writer user, behind a proxy that switches to the
// plaintext port: TLS to a plaintext port — makes /readyz not ready with
// the store's one line (the server's address, what to set), counts
// stormradius_store_connection_errors_total{reason="not_tls"}, logs one
// line however many writes fail, and answers the OTLP senders 503 (they
// retry), not 500. Switched back, the next write works, /readyz is ready
// again, and the service never stopped.
func TestStoreConnectionHealth(t *testing.T) {
	srv := chtest.TLS(t)
	user, pass := chtest.User(t, chtest.WriterEnv)
	db := chtest.DatabaseOf(chtest.FreshDSN(t))
	t.Setenv(storeurl.PasswordEnv, pass)
	proxy := newSwitchProxy(t, srv.Host)
	dsn := strings.Replace(srv.DSN(db, user, "dial_timeout", "2s"), srv.Host, proxy.ln.Addr().String(), 1)
	var log syncBuffer
	svc := runService(t, app.Config{
		Store:    storeurl.Options{URL: dsn, Window: 10 * time.Minute},
		Pipeline: pipeline.Config{TraceIdle: 50 * time.Millisecond, MaxTraceAge: 5 * time.Second, Retention: -1},
		OTLP:     otlp.Config{DisableGRPC: true, HTTPAddr: "127.0.0.1:0"},
		HTTPAddr: "127.0.0.1:0",
		Logger:   slog.New(slog.NewTextHandler(&log, nil)),
	})
	base := "http://" + svc.addrs.HTTP.String()
	traces := "http://" + svc.addrs.OTLPHTTP.String() + otlp.TracesPath
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	send := func(i int) int {
		b, _ := ptraceotlp.NewExportRequestFromTraces(oneSpan(i)).MarshalProto()
		resp, err := http.Post(traces, "application/x-protobuf", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(0); code != 200 {
		t.Fatalf("a span over TLS: %d\n%s", code, &log)
	}

	proxy.to(srv.Plain)
	want := "clickhouse: " + proxy.ln.Addr().String() + ": the server is not speaking TLS on this port: drop secure=true"
	deadline := time.Now().Add(20 * time.Second)
	for i := 1; ; i++ {
		code := send(i)
		if code != 200 && code != 503 {
			t.Fatalf("a span while the store is on the wrong port: %d, want 503 (retry)", code)
		}
		status, body := get("/readyz")
		if status == 503 && strings.Contains(body, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %q, want 503 with %q\n%s", status, body, want, &log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	send(-1) // one more failed write: still one log line
	_, metrics := get("/metrics")
	m := regexp.MustCompile(`stormradius_store_connection_errors_total\{reason="not_tls"\} (\d+)`).FindStringSubmatch(metrics)
	if n, _ := strconv.Atoi(m2(m)); n < 2 {
		t.Errorf("stormradius_store_connection_errors_total{reason=\"not_tls\"}: %v, want at least 2", m)
	}

	proxy.to(srv.Host)
	deadline = time.Now().Add(20 * time.Second)
	for i := 100; send(i) != 200; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no span stored once the store is back\n%s", &log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status, body := get("/readyz"); status != 200 || strings.Contains(body, "clickhouse") {
		t.Errorf("/readyz once the store is back: %d %q", status, body)
	}
	if n := strings.Count(log.String(), "store connection failing"); n != 1 {
		t.Errorf("%d log lines of the failing connection, want 1:\n%s", n, &log)
	}
	if !strings.Contains(log.String(), "store connection works again") {
		t.Errorf("no log line of the connection back:\n%s", &log)
	}
	if err := svc.stop(); err != nil {
		t.Fatalf("shutdown: %v\n%s", err, &log)
	}
}

func m2(m []string) string {
	if len(m) < 2 {
		return ""
	}
	return m[1]
}

// oneSpan is a trace of one server span, its own for each i.
func oneSpan(i int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "frontend")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	var tid pcommon.TraceID
	copy(tid[:], "storeconn-trace-")
	tid[15] = byte(i)
	sp.SetTraceID(tid)
	sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, byte(i)})
	sp.SetName("GET /")
	sp.SetKind(ptrace.SpanKindServer)
	now := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now))
	return td
}
