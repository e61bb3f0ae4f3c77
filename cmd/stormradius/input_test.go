package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags may follow the file names, as users type them.
func TestAnalyzeFlagsAfterFiles(t *testing.T) {
	p, _ := naiveChainFile(t, 2)
	code, out, stderr := runCmd(t, "analyze", p, "--format", "table")
	if code != 0 || !strings.Contains(out, "claim integrity") {
		t.Fatalf("exit %d, stderr %q, out:\n%s", code, stderr, out)
	}
	// "--" ends the flags: a file named like a flag is a file.
	code, _, stderr = runCmd(t, "analyze", "--", "--format")
	if code != 1 || !strings.Contains(stderr, "--format") {
		t.Errorf("after --: exit %d stderr %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "analyze", p, "--no-such-flag"); code != 2 {
		t.Errorf("unknown flag after a file: exit %d, want 2", code)
	}
}

// flushedGzip compresses lines, flushing after each, and returns the
// compressed bytes and the compressed length after each line: cutting the
// stream at ends[k] leaves exactly lines[:k+1] decodable.
func flushedGzip(t *testing.T, lines []string) ([]byte, []int) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	ends := make([]int, len(lines))
	for i, l := range lines {
		zw.Write([]byte(l))
		if err := zw.Flush(); err != nil {
			t.Fatal(err)
		}
		ends[i] = buf.Len()
	}
	zw.Close()
	return buf.Bytes(), ends
}

// A gzip file cut while being written: the report covers the requests read
// before the cut, the file is named and the exit status is 1. The naive
// chain has 29 spans per trace (see naiveChainFile).
func TestAnalyzeTruncatedGzip(t *testing.T) {
	_, lines := naiveChainFile(t, 6)
	gz, ends := flushedGzip(t, lines)
	dir := t.TempDir()
	for _, k := range []int{1, 4} {
		p := filepath.Join(dir, fmt.Sprintf("cut%d.jsonl.gz", k))
		// Cut a few bytes into line k+1's compressed data: k lines survive.
		os.WriteFile(p, gz[:ends[k-1]+5], 0o644)
		code, out, stderr := runCmd(t, "analyze", p)
		if code != 1 {
			t.Errorf("cut after %d lines: exit %d, want 1", k, code)
		}
		var doc struct{ Traces, Spans int }
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("cut after %d lines: no report (%v); stderr %q", k, err, stderr)
		}
		if doc.Traces != k || doc.Spans != 29*k {
			t.Errorf("cut after %d lines: traces %d spans %d, want %d %d", k, doc.Traces, doc.Spans, k, 29*k)
		}
		if !strings.Contains(stderr, p) || !strings.Contains(stderr, "read only in part") {
			t.Errorf("cut after %d lines: stderr %q", k, stderr)
		}
	}
	// The same through stdin.
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"analyze", "-"}, bytes.NewReader(gz[:ends[2]+5]), &out, &errb)
	var doc struct{ Traces int }
	json.Unmarshal(out.Bytes(), &doc)
	if code != 1 || doc.Traces != 3 || !strings.Contains(errb.String(), "(stdin)") {
		t.Errorf("stdin: exit %d traces %d stderr %q", code, doc.Traces, errb.String())
	}
}

// Repeated bad lines: the first five are shown, then one count for the
// file; every good line is analysed.
func TestAnalyzeBadLinesCapped(t *testing.T) {
	_, lines := naiveChainFile(t, 2)
	var b strings.Builder
	b.WriteString(lines[0])
	for i := 0; i < 12; i++ {
		b.WriteString("{\"resourceSpans\": [nope\n")
	}
	b.WriteString(lines[1])
	p := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(p, []byte(b.String()), 0o644)
	code, out, stderr := runCmd(t, "analyze", p)
	var doc struct{ Traces int }
	json.Unmarshal([]byte(out), &doc)
	if code != 1 || doc.Traces != 2 {
		t.Fatalf("exit %d traces %d", code, doc.Traces)
	}
	// Lines 2..13 are bad: 2..6 shown, 7 more counted.
	for _, want := range []string{"bad.jsonl:2:", "bad.jsonl:6:", "7 more bad lines or messages not shown (12 in all)", "12 bad lines or messages"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "bad.jsonl:7:") {
		t.Errorf("the sixth bad line was shown:\n%s", stderr)
	}
}

// Input without spans says so instead of printing an all-zero report.
func TestAnalyzeNoSpans(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty.jsonl":   "",
		"nospans.jsonl": "{}\n{\"resourceSpans\":[]}\n",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		code, out, stderr := runCmd(t, "analyze", p)
		if code != 1 || out != "" || !strings.Contains(stderr, "no spans in input") {
			t.Errorf("%s: exit %d out %q stderr %q", name, code, out, stderr)
		}
	}
}

// whatif --traces learns from what a broken file held, says the file was
// read in part and exits 1; flags may follow the file. Four lines survive
// the cut: the naive chain's call graph is complete in each trace, so the
// answer is the one of TestWhatIfTraces: naive, D failing: A 1, B 2, C 4,
// D 8.
func TestWhatIfTruncatedInput(t *testing.T) {
	_, lines := naiveChainFile(t, 6)
	gz, ends := flushedGzip(t, lines)
	p := filepath.Join(t.TempDir(), "cut.jsonl.gz")
	os.WriteFile(p, gz[:ends[3]+5], 0o644)
	code, out, stderr := runCmd(t, "whatif", "--traces", p, "--api", "A GET /A", "--fail", "D", "--policy", "naive", "--format", "json")
	var got struct{ Requests map[string]float64 }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("no answer: %v; stderr %q", err, stderr)
	}
	if code != 1 || got.Requests["D"] != 8 || got.Requests["B"] != 2 || !strings.Contains(stderr, "read only in part") {
		t.Errorf("exit %d requests %v stderr %q", code, got.Requests, stderr)
	}
	code, _, stderr = runCmd(t, "whatif", "--api", "A GET /A", "--fail", "D", p, "--policy", "naive")
	if code != 1 || strings.Contains(stderr, "usage") {
		t.Errorf("flags after the file: exit %d stderr %q", code, stderr)
	}
}

// migrate --dry-run lists what a new directory needs and changes nothing;
// migrate applies it; then the schema is up to date.
func TestMigrate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	code, out, stderr := runCmd(t, "migrate", "--data", dir, "--dry-run")
	if code != 0 || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS spans") || !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("the dry run created the store")
	}
	if code, out, stderr = runCmd(t, "migrate", "--data", dir); code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("migrate: %d %q %q", code, out, stderr)
	}
	if code, out, _ = runCmd(t, "migrate", "--data", dir, "--dry-run"); code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("after migrate: %d %q", code, out)
	}
}
