package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/graph"
)

// capsFile writes one JSON line of traces, one root span each, of the
// given services ("GET /x").
func capsFile(t *testing.T, services ...string) string {
	t.Helper()
	td := ptrace.NewTraces()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i, s := range services {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", s)
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID([16]byte{0xc0, byte(i + 1)})
		sp.SetSpanID([8]byte{byte(i + 1)})
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName("GET /x")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i) * time.Second)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i)*time.Second + time.Millisecond)))
	}
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "caps.jsonl")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func analyzedAPIs(t *testing.T, out string) map[string]float64 {
	t.Helper()
	var doc struct {
		APIs []struct {
			API    string  `json:"api"`
			Traces float64 `json:"traces"`
		} `json:"apis"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, a := range doc.APIs {
		m[a.API] = a.Traces
	}
	return m
}

// analyze takes the caps as flags or STORMRADIUS_* variables: at the cap
// nothing is folded and nothing is said; one past it, the extra API is
// counted under ⟨other APIs⟩ and standard error says so (exit 0: nothing
// was lost). A cut name is noted too; a cap of 0 is a usage error.
func TestAnalyzeCaps(t *testing.T) {
	p := capsFile(t, "a", "b", "c", "d")
	code, out, stderr := runCmd(t, "analyze", "--max-apis", "4", p)
	if code != 0 || stderr != "" {
		t.Fatalf("at the cap: exit %d, stderr %q", code, stderr)
	}
	if got := analyzedAPIs(t, out); len(got) != 4 || got[graph.OtherAPI] != 0 {
		t.Fatalf("at the cap: %v", got)
	}
	for _, args := range [][]string{{"analyze", "--max-apis", "3", p}, {"analyze", p}} {
		if len(args) == 2 {
			t.Setenv("STORMRADIUS_MAX_APIS", "3")
		}
		code, out, stderr = runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if got := analyzedAPIs(t, out); len(got) != 4 || got[graph.OtherAPI] != 1 {
			t.Fatalf("%v: APIs %v: want 3 and one trace under %s", args, got, graph.OtherAPI)
		}
		want := "stormradius analyze: 1 trace with a root API past its window's --max-apis 3, counted under " + graph.OtherAPI + "\n"
		if stderr != want {
			t.Fatalf("%v: stderr %q, want %q", args, stderr, want)
		}
	}
	code, _, stderr = runCmd(t, "analyze", "--max-services", "0", p)
	if code != exitUsage || !strings.Contains(stderr, "--max-services 0 must be positive") {
		t.Fatalf("--max-services 0: exit %d, %q", code, stderr)
	}
	long := strings.Repeat("s", 300)
	code, out, stderr = runCmd(t, "analyze", capsFile(t, long))
	if code != 0 || stderr != "stormradius analyze: 1 span with a name longer than 256 bytes, cut\n" {
		t.Fatalf("long name: exit %d, stderr %q", code, stderr)
	}
	for api := range analyzedAPIs(t, out) {
		if !strings.HasPrefix(api, long[:245]+"…") || len(api) != 256+len(" GET /x") {
			t.Fatalf("long name: API %q (%d bytes)", api, len(api))
		}
	}
}
