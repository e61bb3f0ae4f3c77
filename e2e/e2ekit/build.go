package e2ekit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// GoCmd is `go ARGS` in dir, each module built on its own (no go.work
// above the checkout mixes them).
func GoCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	return cmd
}

// Run runs bin with args to its end, with BaseEnv (no STORMRADIUS_* of the
// caller's shell), and returns its stdout; its error carries the command
// line and stderr.
func Run(bin string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = BaseEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// CacheRoot is the directory the suites keep their built programs in:
// $STORMRADIUS_E2E_CACHE, else stormradius-e2e in the user's cache
// directory ($XDG_CACHE_HOME or ~/.cache), else in the temporary one.
func CacheRoot() string {
	if root := os.Getenv("STORMRADIUS_E2E_CACHE"); root != "" {
		return root
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "stormradius-e2e")
}

// CachedBuild is a program built into CacheRoot, in a directory keyed by
// everything that decides the binary (Inputs, the Go version and
// platform) and reused when it is there: cold builds take minutes on two
// cores.
type CachedBuild struct {
	What string // names the program in messages: "the collector", "HotROD"
	// Prefix starts the cache directory's name, the key follows. Each
	// program has its own: binaries under another key with this prefix
	// are stale and removed, and no other prefix may start with it (the
	// suites share CacheRoot).
	Prefix string
	File   string   // the binary's name in its directory
	Dir    string   // where go build runs: the module the program is built in
	Pkg    string   // the package to build, as go build takes it
	Inputs []string // the files that decide the binary (go.mod, go.sum, sources)
	Cold   string   // how long a cold build takes, for the message
}

// Build returns the path of the binary, built unless the cache holds it.
func (b CachedBuild) Build() (string, error) {
	h := sha256.New()
	for _, f := range b.Inputs {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	ver, err := GoCmd(b.Dir, "env", "GOVERSION", "GOOS", "GOARCH").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %v", err)
	}
	h.Write(ver)
	key := hex.EncodeToString(h.Sum(nil))[:16]

	root := CacheRoot()
	dir := filepath.Join(root, b.Prefix+key)
	bin := filepath.Join(dir, b.File)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		fmt.Fprintf(os.Stderr, "e2e: %s from the cache: %s\n", b.What, bin)
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "e2e: building %s into %s (%s when cold)\n", b.What, dir, b.Cold)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s-%d", b.File, os.Getpid()))
	if out, err := GoCmd(b.Dir, "build", "-o", tmp, b.Pkg).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s (%s): %v\n%s", b.What, b.Dir, err, out)
	}
	// A rename is atomic: a concurrent run sees the whole binary or none.
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "e2e: built %s in %v\n", b.What, time.Since(start).Round(time.Millisecond))
	// Binaries of other keys are stale (25 to 100 MB each); other
	// prefixes are other programs'.
	old, _ := filepath.Glob(filepath.Join(root, b.Prefix+"*"))
	for _, o := range old {
		if o != dir {
			os.RemoveAll(o)
		}
	}
	return bin, nil
}
