package sampling

import (
	"context"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // the configs' exporters send gzip
	"google.golang.org/grpc/metadata"
)

// logLines is how many of a process's last lines a failed test logs.
const logLines = 60

// token is what the sink requires in the authorization header, as
// stormradius serve --ingest-token does.
const token = "e2e-token"

// sink is an OTLP/gRPC trace receiver in the test process, standing
// where stormradius would: it keeps everything the collector exports.
type sink struct {
	ptraceotlp.UnimplementedGRPCServer
	addr string

	mu       sync.Mutex
	got      ptrace.Traces
	spans    int
	requests int
	badAuth  string // the first wrong authorization header, if any
}

// startSink serves a sink on a random loopback port until the test ends.
func startSink(t *testing.T) *sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{addr: ln.Addr().String(), got: ptrace.NewTraces()}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, s)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return s
}

func (s *sink) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := strings.Join(md.Get("authorization"), ",")
	s.mu.Lock()
	defer s.mu.Unlock()
	if auth != "Bearer "+token && s.badAuth == "" {
		s.badAuth = fmt.Sprintf("%q", auth)
	}
	td := req.Traces()
	s.spans += td.SpanCount()
	s.requests++
	td.ResourceSpans().MoveAndAppendTo(s.got.ResourceSpans())
	return ptraceotlp.NewExportResponse(), nil
}

// count is how many spans the sink has received.
func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spans
}

// traces is a copy of everything the sink has received.
func (s *sink) traces() ptrace.Traces {
	s.mu.Lock()
	defer s.mu.Unlock()
	td := ptrace.NewTraces()
	s.got.CopyTo(td)
	return td
}

// collector is a running collector with the otlp receiver in front.
type collector struct {
	*e2ekit.Proc
	grpc, http string // its receiver's addresses
}

// testOverrides is merged over the shipped config (a second --config):
// quicker batches, and no telemetry server on :8888, which parallel
// collectors would fight over. Nothing about sampling is changed.
const testOverrides = `processors:
  batch:
    timeout: 100ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      disable_stacktrace: true
`

// run is a collector under test with the sink it exports to.
type run struct {
	*collector
	sink *sink
}

// startRun starts bin as startCollector does, exporting to a new sink.
func startRun(t *testing.T, bin, config, override string, flags ...string) *run {
	t.Helper()
	s := startSink(t)
	return &run{collector: startCollector(t, bin, config, s.addr, override, flags...), sink: s}
}

// startCollector starts bin with the shipped config deploy/collector/config,
// its ${env:…} variables set to export to endpoint (an OTLP/gRPC receiver:
// the test's sink, or a stormradius serve; plaintext, gzip, the token),
// the test's overrides merged over it and then override (YAML, a third
// --config) when not empty, and flags (--feature-gates=…). Its own
// receiver listens on random loopback ports.
func startCollector(t *testing.T, bin, config, endpoint, override string, flags ...string) *collector {
	t.Helper()
	c := e2ekit.StartCollector(t, e2ekit.CollectorRun{Name: "collector " + config, Bin: bin,
		Config: filepath.Join(suite.configs, config), Overrides: []string{testOverrides, override}, Args: flags, LogLines: logLines,
		Env: []string{
			"STORMRADIUS_ENDPOINT=" + endpoint,
			"STORMRADIUS_COMPRESSION=gzip",
			"STORMRADIUS_TOKEN=" + token,
			"STORMRADIUS_TLS_INSECURE=true",
		}})
	return &collector{Proc: c.Proc, grpc: c.GRPC, http: c.HTTP}
}

// send exports requests to the collector's receiver, alternately over
// OTLP/gRPC and OTLP/HTTP (protobuf), and fails the test on a refused one.
func (r *collector) send(t *testing.T, requests ...ptrace.Traces) {
	t.Helper()
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	for i, td := range requests {
		req := ptraceotlp.NewExportRequestFromTraces(td)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if i%2 == 0 {
			_, err = client.Export(ctx, req)
		} else {
			var body []byte
			if body, err = req.MarshalProto(); err == nil {
				err = e2ekit.PostOTLP(ctx, "http://"+r.http+"/v1/traces", body)
			}
		}
		cancel()
		if err != nil {
			t.Fatalf("sending request %d to the collector: %v", i+1, err)
		}
	}
}

// Settling: the output is taken as complete once the sink has more than
// it had and then nothing new for quietFor, or after settleWait
// whatever it has.
const (
	quietFor   = 3 * time.Second
	settleWait = 2 * time.Minute
)

// settle waits until the sink's output is quiet, having grown past
// before spans, and returns how many spans it holds. It stops the test
// early when the collector dropped data or exited.
func (r *run) settle(t *testing.T, before int) int {
	t.Helper()
	start := time.Now()
	last, changed := r.sink.count(), time.Now()
	for {
		for _, d := range e2ekit.Dropped {
			if line := r.Find(d); line != "" {
				t.Fatalf("the collector dropped data: %s", e2ekit.ExportError(line))
			}
		}
		select {
		case <-r.Exited():
			t.Fatalf("the collector exited early: %v", r.Err())
		default:
		}
		n := r.sink.count()
		if n != last {
			last, changed = n, time.Now()
		}
		if n > before && time.Since(changed) >= quietFor {
			return n
		}
		if time.Since(start) > settleWait {
			t.Logf("the sink got %d spans (%d before) and did not settle in %v", n, before, settleWait)
			return n
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// finish stops the collector (SIGTERM: it decides what it still holds and
// flushes) and returns everything the sink received: the kept traffic, as
// stormradius behind the collector would have received it. Spans that
// came only with the shutdown are logged: the traffic had settled without
// them.
func (r *run) finish(t *testing.T, settled int) ptrace.Traces {
	t.Helper()
	if err := r.Stop(30 * time.Second); err != nil {
		t.Errorf("the collector did not stop cleanly: %v", err)
	}
	if n := r.sink.count(); n != settled {
		t.Logf("%d spans came with the collector's shutdown, after the output had settled", n-settled)
	}
	r.sink.mu.Lock()
	bad := r.sink.badAuth
	r.sink.mu.Unlock()
	if bad != "" {
		t.Errorf("the collector sent authorization %s, want the token", bad)
	}
	return r.sink.traces()
}

// keptSpan is what the checks read of a span the collector kept.
type keptSpan struct {
	span       pcommon.SpanID
	adjusted   pcommon.Value // sampling.adjusted_count (an empty Value when absent)
	hasCount   bool
	tracestate string
	policy     string // the scope attribute tailsampling.policy, "" when absent
}

// byTrace indexes kept traffic by trace id.
func byTrace(td ptrace.Traces) map[pcommon.TraceID][]keptSpan {
	out := map[pcommon.TraceID][]keptSpan{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			policy := ""
			if v, ok := ss.Scope().Attributes().Get("tailsampling.policy"); ok {
				policy = v.AsString()
			}
			for _, sp := range ss.Spans().All() {
				k := keptSpan{span: sp.SpanID(), tracestate: sp.TraceState().AsRaw(), policy: policy}
				if v, ok := sp.Attributes().Get(adjustedCountKey); ok {
					k.adjusted, k.hasCount = v, true
				}
				out[sp.TraceID()] = append(out[sp.TraceID()], k)
			}
		}
	}
	return out
}

// countOf is a kept span's adjusted count as a string ("1", "20", "absent"),
// with its type when not an integer.
func (k keptSpan) countOf() string {
	switch {
	case !k.hasCount:
		return "absent"
	case k.adjusted.Type() == pcommon.ValueTypeInt:
		return fmt.Sprint(k.adjusted.Int())
	default:
		return fmt.Sprintf("%s %s", k.adjusted.Type(), k.adjusted.AsString())
	}
}

// problems collects what a check found wrong, each kind counted and its
// first few instances kept.
type problems struct {
	counts   map[string]int
	examples map[string][]string
	order    []string
}

func (p *problems) add(kind, format string, args ...any) {
	if p.counts == nil {
		p.counts, p.examples = map[string]int{}, map[string][]string{}
	}
	if p.counts[kind] == 0 {
		p.order = append(p.order, kind)
	}
	p.counts[kind]++
	if len(p.examples[kind]) < 5 {
		p.examples[kind] = append(p.examples[kind], fmt.Sprintf(format, args...))
	}
}

func (p *problems) empty() bool { return len(p.order) == 0 }

func (p *problems) String() string {
	var b strings.Builder
	for _, k := range p.order {
		fmt.Fprintf(&b, "%s: %d, e.g.\n", k, p.counts[k])
		for _, e := range p.examples[k] {
			fmt.Fprintf(&b, "    %s\n", e)
		}
	}
	return b.String()
}

// binomialBounds is the interval a Binomial(n, p) count falls in but for
// a chance below one in a million: its mean ± 5 standard deviations.
func binomialBounds(n int, p float64) (lo, hi int) {
	mean := float64(n) * p
	sd := 5 * math.Sqrt(mean*(1-p))
	return int(mean - sd), int(mean+sd) + 1
}
