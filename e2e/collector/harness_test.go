package collector

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ingestToken is the token serve and ingest require of OTLP clients
// (--ingest-token): the shipped configs' authorization header must carry it.
const ingestToken = "e2e-token"

// traceIdle is serve's --trace-idle: short, so that ingestion is quiet soon.
const traceIdle = time.Second

// store is where a service keeps its data: the embedded store or a fresh
// ClickHouse database.
type store struct {
	name string
	// flags returns the service's and report's store flags for a new store
	// (skipping the test when the store is not available).
	flags func(t *testing.T) []string
}

var (
	embedded   = store{"embedded", func(t *testing.T) []string { return []string{"--data", filepath.Join(t.TempDir(), "data")} }}
	clickhouse = store{"clickhouse", func(t *testing.T) []string { return []string{"--store", freshClickHouse(t)} }}
	stores     = []store{embedded, clickhouse}
)

// service is a running `stormradius serve` or cmd/ingest.
type service struct {
	*e2ekit.Proc
	storeFlags           []string
	grpc, otlpHTTP, http string // bound addresses ("" when off)
}

// startService starts bin (the stormradius binary with "serve" first in
// args, or ingest) on a new store of st with random loopback ports, a
// short --trace-idle, no retention (the sample is older than the default
// seven days) and the ingest token; it returns once the service runs.
func startService(t *testing.T, st store, bin string, args ...string) *service {
	t.Helper()
	sf := st.flags(t)
	all := append(args, sf...)
	if !slices.Contains(args, "--otlp-grpc") {
		all = append(all, "--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0")
	}
	all = append(all, "--http", "127.0.0.1:0", "--trace-idle", traceIdle.String(), "--retention", "0", "--ingest-token", ingestToken)
	name := filepath.Base(bin)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name += " " + args[0]
	}
	p := e2ekit.Start(t, logLines, name, e2ekit.BaseEnv(), bin, all...)
	a, err := e2ekit.Running(p)
	if err != nil {
		t.Fatal(err)
	}
	return &service{Proc: p, storeFlags: sf, grpc: a.GRPC, otlpHTTP: a.OTLPHTTP, http: a.HTTP}
}

// startServe starts `stormradius serve` (extra flags after the defaults win).
func startServe(t *testing.T, st store, extra ...string) *service {
	return startService(t, st, suite.stormradius, append([]string{"serve"}, extra...)...)
}

// report runs `stormradius report --format json` on the service's store.
func (s *service) report() ([]byte, error) {
	return e2ekit.Run(suite.stormradius, append([]string{"report", "--format", "json"}, s.storeFlags...)...)
}

// metric returns the sum of a metric's series on the service's /metrics
// (one per analysis partition when it analyses several), or an error.
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

// startCollector runs the collector with deploy/collector/ROUTE.yaml, env
// (NAME=value) setting its variables, and args; its receiver listens on
// random loopback ports.
func startCollector(t *testing.T, route string, env []string, args ...string) *collector {
	t.Helper()
	return startCollectorOver(t, route, nil, env, args...)
}

// startCollectorOver is startCollector with more YAML merged over the
// shipped config after testOverrides, in order.
func startCollectorOver(t *testing.T, route string, overrides, env []string, args ...string) *collector {
	t.Helper()
	c := e2ekit.StartCollector(t, e2ekit.CollectorRun{Name: "collector " + route, Bin: suite.otelcol,
		Config: filepath.Join(suite.configs, route+".yaml"), Overrides: append([]string{testOverrides}, overrides...),
		Env: env, Args: args, LogLines: logLines})
	return &collector{Proc: c.Proc, grpc: c.GRPC, http: c.HTTP}
}

// send exports the sample to the collector's receiver, the requests
// alternately over OTLP/gRPC and OTLP/HTTP (protobuf), and fails the test
// on a refused request.
func (c *collector) send(t *testing.T) {
	t.Helper()
	c.sendRange(t, 0, len(suite.requests))
}

// sendRange sends the sample's requests lo to hi (excluded), as send.
func (c *collector) sendRange(t *testing.T, lo, hi int) {
	t.Helper()
	conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	for i := lo; i < hi; i++ {
		body := suite.requests[i]
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

// Settling: the report is taken as final once it covers the sample's
// spans, no span is in flight (stored and not analysed) and it has not
// changed for quietFor; or once neither the report nor the count of spans
// stored has changed for stallFor, whatever the report covers (ingestion
// stopped short: the comparison then shows what is missing).
const (
	quietFor   = 2 * traceIdle
	stallFor   = 30 * time.Second
	settleWait = 3 * time.Minute
)

// checkReport waits until ingestion into svc is quiet and asserts that
// `stormradius report --format json` equals `stormradius analyze` of the
// sample, field by field; it stops early when a watched process dropped
// data or exited.
func checkReport(t *testing.T, svc *service, watch ...*e2ekit.Proc) {
	t.Helper()
	compareDocs(t, "stormradius report", settle(t, []*service{svc}, suite.spans, watch...))
}

// settle waits until ingestion into svcs (services over one store) is
// quiet and returns the last `stormradius report --format json` of their
// store: quiet once the report covers wantSpans, no span is in flight in
// any of them and the report has not changed for quietFor; or once
// neither the report nor the spans they stored changed for stallFor
// (logged). It fails the test at once when one of them or a watched
// process dropped data or exited.
func settle(t *testing.T, svcs []*service, wantSpans int, watch ...*e2ekit.Proc) []byte {
	t.Helper()
	procs := slices.Clone(watch)
	for _, s := range svcs {
		procs = append(procs, s.Proc)
	}
	var last []byte
	var lastErr error
	lastStored := -1.0
	start := time.Now()
	changed, progressed := start, start
	for {
		for _, p := range procs {
			// Data the collector gave up on: the report can no longer match,
			// so the test stops at once with the reason.
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
		doc, err := svcs[0].report()
		if err == nil && !bytes.Equal(doc, last) || err != nil && lastErr == nil {
			changed, progressed = time.Now(), time.Now()
		}
		if err == nil {
			last = doc
		}
		lastErr = err
		if stored, serr := sumMetric(svcs, "stormradius_spans_stored_total"); serr == nil && stored != lastStored {
			lastStored, progressed = stored, time.Now()
		}
		if err == nil && time.Since(changed) >= quietFor && spansOf(doc) == wantSpans {
			if inflight, ierr := sumMetric(svcs, "stormradius_spans_inflight"); ierr == nil && inflight == 0 {
				break
			}
		}
		if stalled := time.Since(progressed); stalled >= stallFor || time.Since(start) > settleWait {
			if last == nil {
				t.Fatalf("no report after %v: %v", time.Since(start).Round(time.Second), lastErr)
			}
			t.Logf("ingestion stopped short: nothing new stored or reported for %v (%v spans stored)",
				stalled.Round(time.Second), lastStored)
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return last
}

// sumMetric is the sum of a metric over services (an error when one of
// them lacks it).
func sumMetric(svcs []*service, name string) (float64, error) {
	sum := 0.0
	for _, s := range svcs {
		v, err := s.metric(name)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s.Name, err)
		}
		sum += v
	}
	return sum, nil
}

// spansOf is a document's span count (-1 when it has none).
func spansOf(doc []byte) int {
	var d struct{ Spans *int }
	if e2ekit.DecodeInto(doc, &d) != nil || d.Spans == nil {
		return -1
	}
	return *d.Spans
}

// compareDocs fails the test, listing the differing fields, unless got is
// the reference document.
func compareDocs(t *testing.T, what string, got []byte) {
	t.Helper()
	if err := e2ekit.SameDoc(got, suite.want); err != nil {
		t.Errorf("%s differs from `stormradius analyze` of the sample in %v", what, err)
	}
}
