package loadbalancing

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ingestToken is the token the instances require of OTLP clients
// (--ingest-token): the shipped config's authorization header must carry it.
const ingestToken = "e2e-token"

// traceIdle is the instances' --trace-idle: short, so that ingestion is
// quiet soon.
const traceIdle = time.Second

// service is a running `stormradius serve` or cmd/ingest.
type service struct {
	*e2ekit.Proc
	storeFlags           []string // the store it writes, as report takes it
	grpc, otlpHTTP, http string   // bound addresses ("" when off)
}

// startService starts bin (the stormradius binary with "serve" first in
// args, or ingest) with storeFlags, random loopback ports, a short
// --trace-idle, no retention (the sample is older than the default seven
// days) and the ingest token; it returns once the service runs.
func startService(t *testing.T, name, bin string, storeFlags []string, args ...string) *service {
	t.Helper()
	s, err := tryService(t, name, bin, storeFlags, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryService is startService returning the error of a service that did
// not start (its output is in the error's proc).
func tryService(t *testing.T, name, bin string, storeFlags []string, args ...string) (*service, error) {
	t.Helper()
	all := append(append([]string{}, args...), storeFlags...)
	all = append(all, "--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--trace-idle", traceIdle.String(), "--retention", "0", "--ingest-token", ingestToken)
	p := e2ekit.Start(t, logLines, name, e2ekit.BaseEnv(), bin, all...)
	a, err := e2ekit.Running(p)
	if err != nil {
		return &service{Proc: p}, err
	}
	return &service{Proc: p, storeFlags: storeFlags, grpc: a.GRPC, otlpHTTP: a.OTLPHTTP, http: a.HTTP}, nil
}

// report runs `stormradius report --format json` on the service's store.
func (s *service) report() ([]byte, error) {
	return e2ekit.Run(suite.stormradius, append([]string{"report", "--format", "json"}, s.storeFlags...)...)
}

// metric returns the sum of a metric's series on the service's /metrics
// (an instance that is one named partition labels them with it), or an
// error when it has none.
func (s *service) metric(name string) (float64, error) { return e2ekit.Metric(s.http, name) }

// collector is a running collector with the otlp receiver in front.
type collector struct {
	*e2ekit.Proc
	grpc, http string // its receiver's addresses
}

// testOverrides is merged over the shipped config (a second --config):
// smaller, quicker batches, so that the sample goes out in several export
// requests without waiting a second for each; and no telemetry server on
// :8888, which parallel collectors would fight over.
const testOverrides = `processors:
  batch:
    timeout: 100ms
    send_batch_size: 2000
    send_batch_max_size: 2000
service:
  telemetry:
    metrics:
      level: none
    logs:
      disable_stacktrace: true
`

// startCollector runs the collector with deploy/collector/loadbalancing.yaml
// exporting to the OTLP/gRPC receivers of backends, over plaintext with
// the ingest token; override, when not empty, is YAML merged over the
// shipped config after the test's own (a third --config). Its receiver
// listens on random loopback ports.
func startCollector(t *testing.T, backends []*service, override string) *collector {
	t.Helper()
	hosts := make([]string, len(backends))
	for i, b := range backends {
		hosts[i] = b.grpc
	}
	c := e2ekit.StartCollector(t, e2ekit.CollectorRun{Name: "collector", Bin: suite.otelcol,
		Config: filepath.Join(suite.configs, "loadbalancing.yaml"), Overrides: []string{testOverrides, override}, LogLines: logLines,
		Env: []string{
			// A YAML list: the env provider parses a value that is the
			// whole field as YAML.
			"STORMRADIUS_BACKENDS=[" + strings.Join(hosts, ", ") + "]",
			"STORMRADIUS_COMPRESSION=gzip",
			"STORMRADIUS_TOKEN=" + ingestToken,
			"STORMRADIUS_TLS_INSECURE=true",
		}})
	return &collector{Proc: c.Proc, grpc: c.GRPC, http: c.HTTP}
}

// send exports the sample to the collector's receiver, the requests
// alternately over OTLP/gRPC and OTLP/HTTP (protobuf), and fails the test
// on a refused request.
func (c *collector) send(t *testing.T) {
	t.Helper()
	conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	for i, body := range suite.requests {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if i%2 == 0 {
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(body); err != nil {
				t.Fatal(err)
			}
			_, err = client.Export(ctx, req)
		} else {
			err = e2ekit.PostOTLP(ctx, "http://"+c.http+"/v1/traces", body)
		}
		cancel()
		if err != nil {
			t.Fatalf("sending request %d of the sample to the collector: %v", i+1, err)
		}
	}
}

// Settling: the reports are taken as final once together they cover the
// sample's spans, no span is in flight in any instance and none has
// changed for quietFor; or once neither the reports nor the spans stored
// have changed for stallFor, whatever they cover (ingestion stopped short:
// the checks then show what is missing).
const (
	quietFor   = 2 * traceIdle
	stallFor   = 30 * time.Second
	settleWait = 3 * time.Minute
)

// settle waits until ingestion into svcs is quiet and returns the last
// reports, one per store: reports takes them. It stops the test early
// when a process dropped data or exited.
func settle(t *testing.T, svcs []*service, reports func() ([][]byte, error), watch ...*e2ekit.Proc) [][]byte {
	t.Helper()
	procs := append([]*e2ekit.Proc{}, watch...)
	for _, s := range svcs {
		procs = append(procs, s.Proc)
	}
	var last [][]byte
	var lastErr error
	lastStored := -1.0
	start := time.Now()
	changed, progressed := start, start
	for {
		for _, p := range procs {
			// Data the collector gave up on: the figures can no longer add
			// up, so the test stops at once with the reason.
			for _, d := range e2ekit.Dropped {
				if line := p.Find(d); line != "" {
					t.Fatalf("%s dropped the sample's data: %s", p.Name, e2ekit.ExportError(line))
				}
			}
			select {
			case <-p.Exited():
				t.Fatalf("%s exited early: %v", p.Name, p.Err())
			default:
			}
		}
		docs, err := reports()
		if err == nil && !equalDocs(docs, last) || err != nil && lastErr == nil {
			changed, progressed = time.Now(), time.Now()
		}
		if err == nil {
			last = docs
		}
		lastErr = err
		stored, inflight, merr := 0.0, 0.0, error(nil)
		for _, s := range svcs {
			v, err := s.metric("stormradius_spans_stored_total")
			w, err2 := s.metric("stormradius_spans_inflight")
			stored, inflight = stored+v, inflight+w
			if err != nil || err2 != nil {
				merr = fmt.Errorf("%s: %v %v", s.Name, err, err2)
			}
		}
		if merr == nil && stored != lastStored {
			lastStored, progressed = stored, time.Now()
		}
		if err == nil && merr == nil && inflight == 0 && time.Since(changed) >= quietFor && spansOf(docs) == suite.spans {
			return last
		}
		if stalled := time.Since(progressed); stalled >= stallFor || time.Since(start) > settleWait {
			if last == nil {
				t.Fatalf("no report after %v: %v", time.Since(start).Round(time.Second), lastErr)
			}
			t.Logf("ingestion stopped short: nothing new stored or reported for %v (%v spans stored)",
				stalled.Round(time.Second), lastStored)
			return last
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func equalDocs(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// spansOf is the documents' span count, summed (-1 when one has none).
func spansOf(docs [][]byte) int {
	n := 0
	for _, doc := range docs {
		var d struct{ Spans *int }
		if e2ekit.DecodeInto(doc, &d) != nil || d.Spans == nil {
			return -1
		}
		n += *d.Spans
	}
	return n
}

// compareDocs fails the test, listing the differing fields, unless got is
// the reference document.
func compareDocs(t *testing.T, what string, got []byte) {
	t.Helper()
	if err := e2ekit.SameDoc(got, suite.want); err != nil {
		t.Errorf("%s differs from `stormradius analyze` of the sample in %v", what, err)
	}
}
