package e2ekit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cached build is reused while its inputs stay, rebuilt under a new key
// when they change, and the sweep of stale keys takes its own prefix only:
// the suites share the cache and must not delete each other's binaries.
func TestCachedBuild(t *testing.T) {
	root := t.TempDir()
	t.Setenv("STORMRADIUS_E2E_CACHE", root)
	mod := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/prog\n\ngo 1.26\n")
	write("main.go", "package main\n\nfunc main() {}\n")
	others := []string{"otelcol-0123456789abcdef", "lbcol-0123456789abcdef", "progx-0123456789abcdef"}
	for _, d := range append([]string{"prog-0123456789abcdef"}, others...) {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := CachedBuild{What: "prog", Prefix: "prog-", File: "prog", Dir: mod, Pkg: ".",
		Inputs: []string{filepath.Join(mod, "go.mod"), filepath.Join(mod, "main.go")}, Cold: "seconds"}

	first, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if dir := filepath.Base(filepath.Dir(first)); !strings.HasPrefix(dir, "prog-") || len(dir) != len("prog-")+16 || filepath.Base(first) != "prog" {
		t.Errorf("binary at %s, want %s/prog-<16 hex digits>/prog", first, root)
	}
	if _, err := os.Stat(filepath.Join(root, "prog-0123456789abcdef")); !os.IsNotExist(err) {
		t.Errorf("the stale key of its own prefix is still there (%v)", err)
	}
	for _, d := range others {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("another program's %s was removed: %v", d, err)
		}
	}

	// Unchanged inputs: the same binary, not rebuilt.
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if fi2, err := os.Stat(again); again != first || err != nil || !os.SameFile(fi, fi2) {
		t.Errorf("second build: %s (%v), want the cached %s", again, err, first)
	}

	// A changed source: a new key, the old one swept.
	write("main.go", "package main\n\nfunc main() { println() }\n")
	changed, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if changed == first {
		t.Errorf("a changed source kept the key: %s", changed)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the previous key's binary is still there (%v)", err)
	}
}
