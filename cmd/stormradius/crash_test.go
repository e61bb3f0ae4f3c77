package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store/storetest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// commandBinary builds the stormradius command once per test run: crash tests
// need a real process to kill.
func commandBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stormradius-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "stormradius")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
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

type proc struct {
	cmd               *exec.Cmd
	otlpHTTP, httpURL string
	log               *logBuffer
}

// logBuffer is a process's output, read while it runs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serve starts `stormradius serve` on dir and waits until it is ready.
func serve(t *testing.T, dir string, extra ...string) *proc {
	t.Helper()
	p := &proc{otlpHTTP: freeAddr(t), httpURL: "http://" + freeAddr(t), log: &logBuffer{}}
	// The simulated traces are from March: --retention 0 keeps them.
	args := append([]string{"serve", "--data", dir, "--window", "10m", "--trace-idle", "100ms", "--max-trace-age", "3s", "--retention", "0",
		"--otlp-grpc", "off", "--otlp-http", p.otlpHTTP, "--http", strings.TrimPrefix(p.httpURL, "http://")}, extra...)
	p.cmd = exec.Command(commandBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(p.httpURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.cmd.Process.Kill()
	t.Fatalf("serve never became ready:\n%s", p.log)
	return nil
}

// kill9 kills the process without letting it flush anything.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// term stops the process gracefully and checks it exits 0.
func (p *proc) term(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v:\n%s", err, p.log)
	}
}

// send posts one export request, protobuf; it reports whether it was
// acknowledged.
func (p *proc) send(td ptrace.Traces) bool {
	b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	resp, err := http.Post("http://"+p.otlpHTTP+"/v1/traces", "application/x-protobuf", bytes.NewReader(b))
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == 200
}

// reference writes the traces as the collector's file exporter would and
// returns `analyze --format json` of them (10-minute windows).
func reference(t *testing.T, res *sim.Result) string {
	t.Helper()
	var buf bytes.Buffer
	if err := res.WriteJSONLines(&buf); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "traces.jsonl")
	os.WriteFile(p, buf.Bytes(), 0o644)
	t.Setenv("STORMRADIUS_WINDOW", "10m")
	code, out, stderr := runCmd(t, "analyze", p)
	if code != 0 {
		t.Fatalf("analyze: %d %s", code, stderr)
	}
	return out
}

// settledReport runs `stormradius report` until it covers want spans and
// has not changed for two seconds (trace-idle, then the window summaries,
// stored every second).
func settledReport(t *testing.T, dir string, want int) string {
	t.Helper()
	var last string
	same := 0
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		code, out, stderr := runCmd(t, "report", "--data", dir)
		if code == 0 {
			var d struct{ Spans int }
			json.Unmarshal([]byte(out), &d)
			if d.Spans == want && out == last {
				if same++; same == 8 {
					return out
				}
			} else {
				same = 0
			}
			last = out
		} else if !strings.Contains(stderr, "no stormradius data") {
			t.Fatalf("report: %d %s", code, stderr)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("report never settled on %d spans; last:\n%s", want, last)
	return ""
}

func crashCorpus(t *testing.T) *sim.Result {
	res, err := sim.Run(storetest.Scenario(300, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// kill -9 mid-stream over OTLP: every acknowledged span is stored once and
// analysed once. The client resends what was not acknowledged, and some of
// what was (as a collector does after a timeout); after the restart the
// report equals analyze of the traces.
func TestCrashOTLP(t *testing.T) {
	res := crashCorpus(t)
	want := reference(t, res)
	exports := res.Exports(5, 4, 0)
	dir := t.TempDir()
	p := serve(t, dir)
	cut := len(exports) * 6 / 10
	for _, td := range exports[:cut] {
		if !p.send(td) {
			t.Fatalf("request refused before the crash:\n%s", p.log)
		}
	}
	p.kill9(t)
	p = serve(t, dir)
	defer p.term(t)
	for i, td := range exports[cut-20:] { // 20 acknowledged ones again
		if !p.send(td) {
			t.Fatalf("request %d refused after the restart", i)
		}
	}
	got := settledReport(t, dir, res.Stats.Spans)
	if got != want {
		t.Fatalf("report after kill -9 differs from analyze:\n got %s\nwant %s", got, want)
	}
}

// kill -9 mid-stream over Kafka: offsets are committed only after the
// spans are durable, so the restarted service re-reads what was not
// committed, and the report equals analyze — nothing lost, nothing twice.
func TestCrashKafka(t *testing.T) {
	res := crashCorpus(t)
	want := reference(t, res)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "otlp_spans"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("otlp_spans"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, td := range res.Exports(6, 3, 0) {
		b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	kafkaArgs := []string{"--kafka-brokers", brokers, "--kafka-group", "crash-test"}
	p := serve(t, dir, kafkaArgs...)
	waitSpans(t, dir) // let it consume some, then kill it mid-stream
	p.kill9(t)
	p = serve(t, dir, kafkaArgs...)
	defer p.term(t)
	defer func() {
		if t.Failed() {
			t.Logf("second run:\n%s", p.log)
		}
	}()
	got := settledReport(t, dir, res.Stats.Spans)
	if got != want {
		t.Fatalf("report after kill -9 differs from analyze:\n got %s\nwant %s", got, want)
	}
}
