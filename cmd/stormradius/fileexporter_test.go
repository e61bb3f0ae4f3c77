package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// exporterDir holds the real file exporter's output in each format and
// compression (see its README).
const exporterDir = "../../ingest/testdata/fileexporter"

// referenceCounts counts, with pdata, the spans and distinct traces of the
// reference (the fixtures' requests as OTLP JSON lines, gzipped).
func referenceCounts(t *testing.T) (spans, traces int) {
	t.Helper()
	f, err := os.Open(filepath.Join(exporterDir, "input.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[pcommon.TraceID]bool{}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		spans += td.SpanCount()
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			for j := 0; j < td.ResourceSpans().At(i).ScopeSpans().Len(); j++ {
				ss := td.ResourceSpans().At(i).ScopeSpans().At(j).Spans()
				for k := 0; k < ss.Len(); k++ {
					ids[ss.At(k).TraceID()] = true
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return spans, len(ids)
}

// TestAnalyzeFileExporterFormats: analyze reads every format and
// compression the collector's file exporter writes (and zstd -c, pzstd),
// from a file or from stdin, detected from the bytes, and prints the same
// document as for the same requests as plain OTLP JSON lines; what-if over
// them is the same too.
func TestAnalyzeFileExporterFormats(t *testing.T) {
	ref := filepath.Join(exporterDir, "input.jsonl.gz")
	code, want, stderr := runCmd(t, "analyze", ref)
	if code != 0 {
		t.Fatalf("reference: exit %d: %s", code, stderr)
	}
	var doc struct{ Spans, Traces int }
	if err := json.Unmarshal([]byte(want), &doc); err != nil {
		t.Fatal(err)
	}
	if spans, traces := referenceCounts(t); doc.Spans != spans || doc.Traces != traces || traces != 24 {
		t.Fatalf("reference: %d spans, %d traces; pdata counts %d, %d (24 traces simulated)", doc.Spans, doc.Traces, spans, traces)
	}
	groupby, err := filepath.Glob(filepath.Join(exporterDir, "groupby", "*.bin"))
	if err != nil || len(groupby) == 0 {
		t.Fatal(groupby, err)
	}
	inputs := [][]string{groupby} // group_by: one file per service
	for _, f := range []string{
		"json.jsonl", "proto.binpb", "json-zstd.bin", "proto-zstd.bin",
		"native-json-zstd.jsonl.zst", "native-json-zstd-rotation.jsonl.zst",
		"native-proto-zstd.binpb.zst", "native-proto-zstd-rotation.binpb.zst",
		"zstd-cli.jsonl.zst", "pzstd-cli.binpb.zst",
	} {
		inputs = append(inputs, []string{filepath.Join(exporterDir, f)})
	}
	for _, files := range inputs {
		name := strings.TrimPrefix(files[0], exporterDir+"/")
		if len(files) > 1 {
			name = "groupby"
		}
		t.Run(name, func(t *testing.T) {
			code, got, stderr := runCmd(t, append([]string{"analyze"}, files...)...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got != want {
				t.Fatalf("document differs from the reference's:\n%s\nwant\n%s", got, want)
			}
			if len(files) > 1 {
				return
			}
			// From stdin: no file name to go by.
			data, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run(context.Background(), []string{"analyze", "-"}, bytes.NewReader(data), &out, &errb); code != 0 || out.String() != want {
				t.Fatalf("stdin: exit %d: %s\n%s", code, errb.String(), out.String())
			}
		})
	}
	// What-if over the traces of a zstd file, the same as over the
	// reference.
	args := []string{"whatif", "--api", "frontend GET /dispatch", "--fail", "geo", "--policy", "naive", "--traces"}
	code, wantW, stderr := runCmd(t, append(args, ref)...)
	if code != 0 {
		t.Fatalf("whatif: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"proto-zstd.bin", "native-json-zstd.jsonl.zst"} {
		code, got, stderr := runCmd(t, append(args, filepath.Join(exporterDir, f))...)
		if code != 0 || got != wantW {
			t.Fatalf("whatif --traces %s: exit %d: %s\n%s\nwant\n%s", f, code, stderr, got, wantW)
		}
	}
}
