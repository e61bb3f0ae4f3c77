package e2ekit

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Blank lines are passed over and not numbered, the last line counts
// without its newline, and f's error stops the reading.
func TestEachGzipLine(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("{\"a\":1}\n\n  \n{\"b\":2}\n{\"c\":3}"))
	zw.Close()
	path := filepath.Join(t.TempDir(), "s.jsonl.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := EachGzipLine(path, func(n int, line []byte) error {
		got = append(got, fmt.Sprintf("%d %s", n, strings.TrimSpace(string(line))))
		return nil
	})
	if want := []string{`1 {"a":1}`, `2 {"b":2}`, `3 {"c":3}`}; err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	stop := errors.New("stop")
	calls := 0
	if err := EachGzipLine(path, func(int, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("f's error: got %v after %d calls, want it after 1", err, calls)
	}
	if err := EachGzipLine(filepath.Join(t.TempDir(), "none.gz"), func(int, []byte) error { return nil }); err == nil {
		t.Error("a missing file gave no error")
	}
}
