// Package hotrod is stormradius' end-to-end test with Jaeger's HotROD
// demo (github.com/jaegertracing/jaeger/examples/hotrod v1.76.0, a tool
// of this module): it builds HotROD and stormradius, runs HotROD's `all`
// exporting to `stormradius serve`, drives HotROD's frontend with
// concurrent dispatches and checks what stormradius reports against what
// HotROD answered and logged. README.md says what it checks and how to
// run it.
package hotrod

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// hotrodPkg is HotROD's main package, the tool this module requires.
const hotrodPkg = "github.com/jaegertracing/jaeger/examples/hotrod"

func TestMain(m *testing.M) {
	code := m.Run()
	if suite.tmp != "" {
		os.RemoveAll(suite.tmp)
	}
	os.Exit(code)
}

// The suite's shared state, built once by setup.
var suite struct {
	once sync.Once
	err  error

	tmp         string // removed by TestMain
	repo        string // the stormradius module's root
	stormradius string // the stormradius binary
	hotrod      string // HotROD's binary (cached)
}

// setup builds both programs, once; a test whose setup failed fails with
// the reason.
func setup(t *testing.T) {
	t.Helper()
	suite.once.Do(func() { suite.err = build() })
	if suite.err != nil {
		t.Fatalf("setup: %v", suite.err)
	}
}

func build() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	suite.repo = filepath.Clean(filepath.Join(wd, "..", ".."))
	if suite.tmp, err = os.MkdirTemp("", "stormradius-e2e-hotrod-"); err != nil {
		return err
	}
	// Both build at once: HotROD's cold build is the longer one,
	// stormradius' mostly comes from the build cache.
	errc := make(chan error, 1)
	go func() { errc <- buildHotROD(wd) }()
	start := time.Now()
	suite.stormradius = filepath.Join(suite.tmp, "stormradius")
	if out, err := goCmd(suite.repo, "build", "-o", suite.stormradius, "./cmd/stormradius").CombinedOutput(); err != nil {
		<-errc
		return fmt.Errorf("go build stormradius: %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: built stormradius in %v\n", time.Since(start).Round(time.Millisecond))
	return <-errc
}

// goCmd is `go ARGS` in dir, each module built on its own (no go.work
// above the checkout mixes them).
func goCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	return cmd
}

// buildHotROD builds HotROD into a cache directory keyed by what decides
// the binary — this module's go.mod and go.sum (which pin HotROD and its
// dependencies), the Go version and platform — and reuses it when it is
// there: the cold build takes about a minute on two cores.
func buildHotROD(moduleDir string) error {
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(moduleDir, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	ver, err := goCmd(moduleDir, "env", "GOVERSION", "GOOS", "GOARCH").Output()
	if err != nil {
		return fmt.Errorf("go env: %v", err)
	}
	h.Write(ver)
	key := hex.EncodeToString(h.Sum(nil))[:16]

	cacheRoot := os.Getenv("STORMRADIUS_E2E_CACHE")
	if cacheRoot == "" {
		base, err := os.UserCacheDir() // $XDG_CACHE_HOME or ~/.cache
		if err != nil {
			base = os.TempDir()
		}
		cacheRoot = filepath.Join(base, "stormradius-e2e")
	}
	dir := filepath.Join(cacheRoot, "hotrod-"+key)
	suite.hotrod = filepath.Join(dir, "hotrod")
	if fi, err := os.Stat(suite.hotrod); err == nil && fi.Mode().IsRegular() {
		fmt.Fprintf(os.Stderr, "e2e: HotROD from the cache: %s\n", suite.hotrod)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "e2e: building HotROD into %s (about a minute when cold)\n", dir)
	tmp := filepath.Join(dir, fmt.Sprintf(".hotrod-%d", os.Getpid()))
	if out, err := goCmd(moduleDir, "build", "-o", tmp, hotrodPkg).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go build HotROD: %v\n%s", err, out)
	}
	// A rename is atomic: a concurrent run sees the whole binary or none.
	if err := os.Rename(tmp, suite.hotrod); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: built HotROD in %v\n", time.Since(start).Round(time.Millisecond))
	// Binaries of other keys are stale (about 25 MB each); the collector
	// suite's otelcol-* directories next to them are its own.
	old, _ := filepath.Glob(filepath.Join(cacheRoot, "hotrod-*"))
	for _, o := range old {
		if o != dir {
			os.RemoveAll(o)
		}
	}
	return nil
}
