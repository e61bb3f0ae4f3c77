package sampling

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// traceIdle is serve's --trace-idle: short, so that it is quiet soon.
const traceIdle = time.Second

// service is a running `stormradius serve` on an embedded store of its own.
type service struct {
	*e2ekit.Proc
	data       string // its --data
	grpc, http string // its OTLP/gRPC receiver's and its API's addresses
}

// startServe starts `stormradius serve` on a new embedded store, with
// random loopback ports, a short --trace-idle, no retention, the ingest
// token and extra flags; it returns once the service runs.
func startServe(t *testing.T, extra ...string) *service {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	args := append([]string{"serve", "--data", data, "--otlp-grpc", "127.0.0.1:0", "--otlp-http", "off",
		"--http", "127.0.0.1:0", "--trace-idle", traceIdle.String(), "--retention", "0", "--ingest-token", token}, extra...)
	p := e2ekit.Start(t, logLines, "stormradius serve", e2ekit.BaseEnv(), suite.stormradius, args...)
	a, err := e2ekit.Running(p)
	if err != nil {
		t.Fatal(err)
	}
	return &service{Proc: p, data: data, grpc: a.GRPC, http: a.HTTP}
}

// apiRange is the from and to of every REST request: from an hour
// before the traffic started to two hours after, so that every trace's
// start minute is in it (and the same range every time: the answers
// hold it).
var apiRange = url.Values{
	"from": {fmt.Sprint(start.AsTime().Add(-time.Hour).Unix())},
	"to":   {fmt.Sprint(start.AsTime().Add(2 * time.Hour).Unix())},
}

// get answers GET /api/v1/PATH over apiRange, as a JSON object.
func (s *service) get(path string) (map[string]any, error) {
	resp, err := http.Get("http://" + s.http + "/api/v1/" + path + "?" + apiRange.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/%s: %s: %s", path, resp.Status, b)
	}
	return e2ekit.DecodeDoc(b)
}

// Waiting for serve: its figures are taken as final once it has received
// the spans the collector exported (sampling.spans_received of
// /api/v1/fleet), no span is in flight (stored and not analysed) and
// /api/v1/fleet has not changed for serveQuiet; or after serveWait
// whatever it has (the comparisons then show what is missing).
const (
	serveQuiet = 2 * traceIdle
	serveWait  = 90 * time.Second
)

// served waits until serve is quiet (see serveQuiet), having received
// spans spans, and returns what it serves: /api/v1/fleet's fields,
// /api/v1/apis's apis and /api/v1/services's services and edges, in one
// §5.2 document.
func (s *service) served(t *testing.T, spans int) map[string]any {
	t.Helper()
	start := time.Now()
	var last []byte
	changed := start
	for {
		select {
		case <-s.Exited():
			t.Fatalf("stormradius serve exited early: %v", s.Err())
		default:
		}
		fleet, err := s.get("fleet")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(fleet)
		if !bytes.Equal(b, last) {
			last, changed = b, time.Now()
		}
		received, _ := number(fleet, "sampling.spans_received")
		inflight, ierr := e2ekit.Metric(s.http, "stormradius_spans_inflight")
		if int(received) == spans && ierr == nil && inflight == 0 && time.Since(changed) >= serveQuiet {
			break
		}
		if time.Since(start) > serveWait {
			t.Logf("serve did not settle in %v: %v of %d spans received, %v in flight (%v)", serveWait, received, spans, inflight, ierr)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	doc := map[string]any{}
	for _, part := range []struct {
		path string
		keys []string
	}{
		{"fleet", []string{"fleet", "spans", "traces", "fragments", "sampling"}},
		{"apis", []string{"apis"}},
		{"services", []string{"services", "edges"}},
	} {
		got, err := s.get(part.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range part.keys {
			v, ok := got[k]
			if !ok {
				t.Fatalf("GET /api/v1/%s: no %q", part.path, k)
			}
			doc[k] = v
		}
	}
	return doc
}

// report runs `stormradius report --format json` on the service's store.
func (s *service) report() ([]byte, error) {
	return e2ekit.Run(suite.stormradius, "report", "--format", "json", "--data", s.data)
}

// analyze runs `stormradius analyze --format json` on file.
func analyze(file string) ([]byte, error) {
	return e2ekit.Run(suite.stormradius, "analyze", "--format", "json", file)
}

// writeJSONLines writes each of requests as one line of OTLP JSON, as
// the collector's file exporter does, to a new file in dir.
func writeJSONLines(t *testing.T, dir, name string, requests ...ptrace.Traces) string {
	t.Helper()
	var m ptrace.JSONMarshaler
	var b bytes.Buffer
	for _, td := range requests {
		line, err := m.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// captureOverride adds an exporter to the shipped config's pipeline: the
// same kept traffic that goes to serve also goes to the test's sink at
// addr (the sampling and the rest of the config unchanged).
func captureOverride(addr string) string {
	return fmt.Sprintf(`exporters:
  otlp_grpc/capture:
    endpoint: %s
    compression: gzip
    headers:
      authorization: "Bearer %s"
    tls:
      insecure: true
service:
  pipelines:
    traces:
      exporters: [otlp_grpc/stormradius, otlp_grpc/capture]
`, addr, token)
}

// number is the number at a dotted path of doc.
func number(doc map[string]any, path string) (float64, bool) {
	v, ok := at(doc, path)
	if !ok {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// at is the value at a dotted path of doc.
func at(doc map[string]any, path string) (any, bool) {
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// element is the object of doc's section (apis, services, edges) that
// key names (see figure), or nil.
func element(doc map[string]any, section, key string) map[string]any {
	list, _ := doc[section].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		var name string
		switch section {
		case "apis":
			name, _ = m["api"].(string)
		case "services":
			name, _ = m["service"].(string)
		case "edges":
			caller, _ := m["caller"].(string)
			callee, _ := m["callee"].(string)
			name = caller + " -> " + callee
		}
		if name == key {
			return m
		}
	}
	return nil
}

// value is figure g in doc: 0 when its element is absent (an API, a
// service or an edge no trace showed), an error when the element lacks
// the field.
func value(doc map[string]any, g figure) (float64, error) {
	obj := doc
	if g.section != "" {
		if obj = element(doc, g.section, g.key); obj == nil {
			return 0, nil
		}
	}
	v, ok := number(obj, g.field)
	if !ok {
		return 0, fmt.Errorf("%s: no such number in the document", g)
	}
	return v, nil
}
