package otlp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// slowClient sends an OTLP/HTTP request's headers whole, announcing a body
// of length bytes, then the body a byte every gap, until the server answers
// or stop is closed. It returns the server's status (0 if none) and how long
// after the headers it came.
func slowClient(addr string, length int, gap time.Duration, stop <-chan struct{}) (int, time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", addr, length)
	sent := time.Now()
	answer := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answer <- 0
			return
		}
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	t := time.NewTicker(gap)
	defer t.Stop()
	for {
		select {
		case st := <-answer:
			return st, time.Since(sent), nil
		case <-stop:
			return 0, time.Since(sent), nil
		case <-t.C:
			if _, err := c.Write([]byte{0x0a}); err != nil {
				// The server closed the connection: its answer, if
				// any, is being read.
				select {
				case st := <-answer:
					return st, time.Since(sent), nil
				case <-time.After(time.Second):
					return 0, time.Since(sent), err
				}
			}
		}
	}
}

// TestSlowBodiesHoldNoSlots: forty connections that send complete headers,
// then one body byte at a time, more of them than admission slots (4), do
// not stall ingestion: a normal exporter's HTTP and gRPC requests keep
// succeeding all through the attack, and every slow body is answered 408
// within the rate window (plus scheduling slack) of its start.
func TestSlowBodiesHoldNoSlots(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	const window = 600 * time.Millisecond
	s := startServer(t, Config{
		Registerer:          reg,
		MaxInflightRequests: 4,
		MinBodyRate:         1000, // 600 bytes due every window; the attackers send ~2
		BodyRateWindow:      window,
	}, rec)
	addr := s.HTTPAddr().String()

	stop := make(chan struct{})
	var attackers sync.WaitGroup
	var answered, late, unanswered atomic.Int64
	for range 40 {
		attackers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// As the attacker of the issue: one byte every 3 s,
				// here every 300 ms against a 600 ms window.
				st, took, err := slowClient(addr, 100_000, 300*time.Millisecond, stop)
				switch {
				case st == http.StatusRequestTimeout && took < window+time.Second:
					answered.Add(1)
				case st == http.StatusRequestTimeout:
					late.Add(1)
				case st == 0 && err == nil: // stopped
				default:
					unanswered.Add(1)
					t.Logf("slow client: status %d after %v: %v", st, took, err)
				}
			}
		})
	}

	// A normal exporter, all through the attack: every request succeeds.
	time.Sleep(200 * time.Millisecond) // the attackers hold their connections
	c := ptraceotlp.NewGRPCClient(dialGRPC(t, s))
	body := protoBody(t, testTraces(1, 10))
	deadline := time.Now().Add(3 * window)
	var httpOK, grpcOK int
	for i := 0; time.Now().Before(deadline); i++ {
		r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "")
		if r.status != 200 {
			t.Fatalf("HTTP request %d during the attack: status %d: %s", i, r.status, r.body)
		}
		httpOK++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Export(ctx, ptraceotlp.NewExportRequestFromTraces(testTraces(2, 10)))
		cancel()
		if err != nil {
			t.Fatalf("gRPC request %d during the attack: %v", i, err)
		}
		grpcOK++
	}
	close(stop)
	attackers.Wait()
	if httpOK < 10 || grpcOK < 10 {
		t.Errorf("only %d HTTP and %d gRPC requests in %v", httpOK, grpcOK, 3*window)
	}
	if answered.Load() < 40 || late.Load() > 0 || unanswered.Load() > 0 {
		t.Errorf("slow bodies: %d answered 408 in time, %d late, %d otherwise", answered.Load(), late.Load(), unanswered.Load())
	}
	// Clients stopped mid-wait may be answered after they stopped
	// listening: those count too.
	if n := metricValue(t, reg, "stormradius_otlp_requests_refused_total", "protocol", "http", "reason", "slow_body"); n < float64(answered.Load()) || n > float64(answered.Load()+40) {
		t.Errorf("refused slow_body = %v, want %d to %d", n, answered.Load(), answered.Load()+40)
	}
}

// TestBodyBudget: bodies being received hold at most BodyBufferBytes;
// a request that would take them past it is answered 503 with Retry-After
// (the sender retries), and succeeds once the budget is free.
func TestBodyBudget(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	const limit = 64 << 10
	s := startServer(t, Config{
		Registerer:      reg,
		MaxBodyBytes:    limit,
		BodyBufferBytes: limit + 1, // one whole body
		MinBodyRate:     100,
		BodyRateWindow:  time.Second,
	}, rec)
	addr := s.HTTPAddr().String()

	// A client that sends most of a large body at once, then slowly,
	// above the minimum rate: it holds the whole budget.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", limit)
	if _, err := conn.Write(make([]byte, limit-1000)); err != nil {
		t.Fatal(err)
	}
	trickle := make(chan struct{})
	go func() {
		for {
			select {
			case <-trickle:
				return
			case <-time.After(200 * time.Millisecond):
				if _, err := conn.Write(make([]byte, 50)); err != nil {
					return
				}
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // the server has read what was sent

	body := protoBody(t, testTraces(1, 5))
	r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, "")
	if r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Fatalf("with the budget full: status %d (Retry-After %q), want 503: %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if _, msg := rpcStatus(t, r); !strings.Contains(msg, "request bodies") {
		t.Errorf("message %q", msg)
	}
	close(trickle)
	conn.Close() // the budget is released with its request
	time.Sleep(100 * time.Millisecond)
	if r := post(t, nil, "POST", tracesURL(s), bytes.NewReader(body), contentTypeProto, ""); r.status != 200 {
		t.Fatalf("after the slow client left: status %d: %s", r.status, r.body)
	}
	checkIDs(t, rec.taken(), 1, 5, nil)
	if got := s.budget.used.Load(); got != 0 {
		t.Errorf("%d bytes of the budget still reserved", got)
	}
	waitMetric(t, reg, 1, "stormradius_otlp_requests_refused_total", "protocol", "http", "reason", "busy")
}
