package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/sim"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// naiveChainFile writes n traces of the naive chain A→B→C→D with D down
// (radius 3 per trace, 15 hops per trace, see analysis tests) as JSON lines.
func naiveChainFile(t *testing.T, n int) (string, []string) {
	t.Helper()
	res, err := sim.Run(sim.Scenario{Services: sim.Chain([]string{"A", "B", "C", "D"}, sim.Policy{Retry: sim.RetryNaive, Retries: 1}),
		Root: "A", Faults: []sim.Fault{{Service: "D", Rate: 1, Persistent: true}}, Traces: n, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.WriteJSONLines(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(buf.String(), "\n"), "\n")
	p := filepath.Join(t.TempDir(), "traces.jsonl")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, lines
}

func TestAnalyzeJSON(t *testing.T) {
	p, _ := naiveChainFile(t, 4)
	code, out, stderr := runCmd(t, "analyze", "--format", "json", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Decode generically: the docs/SPEC.md §5.2 field names are the contract.
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// 4 traces × (15 SERVER + 14 CLIENT spans) = 116 spans.
	if doc["spans"] != 116.0 || doc["traces"] != 4.0 || doc["fragments"] != 0.0 {
		t.Errorf("spans %v traces %v fragments %v", doc["spans"], doc["traces"], doc["fragments"])
	}
	fleet := doc["fleet"].(map[string]any)
	if fleet["max_radius"] != 3.0 || fleet["mean_radius"] != 3.0 {
		t.Errorf("fleet %v", fleet)
	}
	apis := doc["apis"].([]any)
	a := apis[0].(map[string]any)
	want := map[string]any{"api": "A GET /A", "traces": 4.0, "failed_traces": 4.0, "max_radius": 3.0, "mean_radius": 3.0,
		"potential_radius": 3.0, "max_amplification": 8.0, "suppressed_retries": 0.0, "spurious_requests_prevented": 0.0,
		"misattributed_errors": 0.0}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("apis[0].%s = %v, want %v", k, a[k], v)
		}
	}
	if h := a["radius_histogram"].(map[string]any); h["3"] != 4.0 {
		t.Errorf("histogram %v", h)
	}
	o := a["owners"].([]any)[0].(map[string]any)
	if o["service"] != "D" || o["operation"] != "GET /D" || o["owned_failures"] != 32.0 {
		t.Errorf("owner %v", o)
	}
	for _, s := range doc["services"].([]any) {
		sv := s.(map[string]any)
		c := sv["claims"].(map[string]any)
		for _, k := range []string{"correct", "false_claim", "false_unclaim", "missing", "invalid"} {
			if _, ok := c[k]; !ok {
				t.Errorf("claims of %v lack %s", sv["service"], k)
			}
		}
		if _, ok := sv["context_drops"]; !ok {
			t.Errorf("no context_drops")
		}
	}
	for _, e := range doc["edges"].([]any) {
		ev := e.(map[string]any)
		if src := ev["fail_open_source"]; src != "default" && src != "learned" && src != "declared" {
			t.Errorf("edge %v", ev)
		}
	}
}

// A bad line is reported with its file and line number; the other lines
// are analysed; the exit status says the input was not all good.
func TestAnalyzeBadLine(t *testing.T) {
	_, lines := naiveChainFile(t, 3)
	bad := lines[0] + "{\"resourceSpans\": [nope\n" + lines[1] + lines[2]
	p := filepath.Join(t.TempDir(), "mixed.jsonl")
	os.WriteFile(p, []byte(bad), 0o644)
	code, out, stderr := runCmd(t, "analyze", p)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr, "mixed.jsonl:2") {
		t.Errorf("stderr does not name the file and line: %q", stderr)
	}
	var doc struct{ Traces, Spans int }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("no report: %v", err)
	}
	if doc.Traces != 3 || doc.Spans != 3*29 {
		t.Errorf("traces %d spans %d, want 3 and 87", doc.Traces, doc.Spans)
	}
}

func TestAnalyzeErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.bin")
	os.WriteFile(garbage, []byte("\xff\xfe this is not OTLP at all"), 0o644)
	code, _, stderr := runCmd(t, "analyze", garbage)
	if code != 1 || !strings.Contains(stderr, "garbage.bin") {
		t.Errorf("garbage: exit %d stderr %q", code, stderr)
	}
	code, _, stderr = runCmd(t, "analyze", filepath.Join(dir, "missing.jsonl"))
	if code != 1 || !strings.Contains(stderr, "missing.jsonl") {
		t.Errorf("missing: exit %d stderr %q", code, stderr)
	}
	if code, _, _ = runCmd(t, "analyze"); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
	if code, _, _ = runCmd(t, "analyze", "--format", "xml", garbage); code != 2 {
		t.Errorf("bad format: exit %d, want 2", code)
	}
	if code, _, _ = runCmd(t, "nosuchcommand"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}

// '-' reads stdin, here gzip-compressed protobuf framed as the collector's
// file exporter writes it.
func TestAnalyzeStdin(t *testing.T) {
	res, err := sim.Run(sim.Scenario{Services: sim.Chain([]string{"A", "B"}, sim.Policy{}), Root: "A", Traces: 5, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var raw, gz bytes.Buffer
	if err := res.WriteProto(&raw); err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"analyze", "-"}, &gz, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc struct{ Spans, Traces int }
	json.Unmarshal(out.Bytes(), &doc)
	// 5 traces of A (SERVER) → B (CLIENT + SERVER).
	if doc.Traces != 5 || doc.Spans != 15 {
		t.Errorf("traces %d spans %d, want 5 15", doc.Traces, doc.Spans)
	}
}

func TestAnalyzeTable(t *testing.T) {
	p, _ := naiveChainFile(t, 2)
	code, out, stderr := runCmd(t, "analyze", "--format", "table", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"A GET /A", "claim integrity", "MAX R"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// The seed's three tables through the command line (docs/SPEC.md §5.1, §5.2).
func TestWhatIfChain(t *testing.T) {
	for policy, want := range map[string]map[string]float64{
		"naive":     {"A": 1, "B": 2, "C": 4, "D": 8, "E": 8, "F": 8, "G": 8},
		"budget":    {"A": 1, "B": 1.1, "C": 1.21, "D": 1.331, "E": 1.331, "F": 1.331, "G": 1.331},
		"ownership": {"A": 1, "B": 1, "C": 1, "D": 1.1, "E": 1.1, "F": 1.1, "G": 1.1},
	} {
		code, out, stderr := runCmd(t, "whatif", "--chain", "A,B,C,D,E,F,G", "--fail", "D", "--retries", "1", "--budget", "0.1", "--policy", policy, "--format", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var got struct {
			Policy   string
			Requests map[string]float64
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.Policy != policy {
			t.Errorf("policy %q", got.Policy)
		}
		for k, v := range want {
			if got.Requests[k] != v {
				t.Errorf("%s: %s = %v, want %v", policy, k, got.Requests[k], v)
			}
		}
	}
	if code, _, _ := runCmd(t, "whatif", "--chain", "A,B", "--fail", "Z"); code != 2 {
		t.Errorf("unknown failing node: exit %d, want 2", code)
	}
}

// What-if over the call graph learned from traces: the naive chain
// A→B→C→D with one retry observed per edge; failing D under naive retries
// gives 1, 2, 4, 8; under ownership (B = 1: no budget bite) only C→D
// retries: 1, 1, 1, 2.
func TestWhatIfTraces(t *testing.T) {
	p, _ := naiveChainFile(t, 3)
	for policy, want := range map[string][]float64{"naive": {1, 2, 4, 8}, "ownership": {1, 1, 1, 2}} {
		code, out, stderr := runCmd(t, "whatif", "--traces", p, "--api", "A GET /A", "--fail", "D", "--policy", policy, "--budget", "1")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var got struct {
			Requests map[string]float64
			Nodes    map[string]float64
		}
		json.Unmarshal([]byte(out), &got)
		for i, s := range []string{"A", "B", "C", "D"} {
			if got.Requests[s] != want[i] || got.Nodes[s+" GET /"+s] != want[i] {
				t.Errorf("%s: %s = %v (node %v), want %v", policy, s, got.Requests[s], got.Nodes[s+" GET /"+s], want[i])
			}
		}
	}
	if code, _, _ := runCmd(t, "whatif", "--traces", p, "--api", "nope", "--fail", "D"); code != 1 {
		t.Errorf("unknown api: exit %d, want 1", code)
	}
}
