// Package e2ekit holds what stormradius' end-to-end suites (e2e/collector,
// e2e/loadbalancing, e2e/sampling, e2e/hotrod) share: processes started for a test and
// their output, the environment they start from, cached builds of the
// programs the suites run, the field-by-field comparison of two
// docs/SPEC.md §5.2 documents, and small HTTP readers. Each suite is a
// module of its own and test files cannot be imported across modules, so
// this is an ordinary package in a module of its own, with no dependency
// beyond the standard library; each suite requires it through a replace
// directive (../e2ekit).
package e2ekit

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a process a test started: its output is kept (for waiting on a
// log line, for reading, and shown when the test fails), and it is stopped
// when the test ends, failed or not.
type Proc struct {
	Name string
	Cmd  *exec.Cmd

	exited chan struct{}
	err    error // Cmd.Wait's, once exited is closed

	mu  sync.Mutex
	out bytes.Buffer // stdout and stderr together
}

// Write keeps b as output of the process.
func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is everything the process wrote so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error (nil for a clean exit), once Exited is
// closed.
func (p *Proc) Err() error { return p.err }

// BaseEnv is the environment every process starts from: only PATH, HOME
// and TMPDIR of the caller's, none of its STORMRADIUS_*, OTEL_*, JAEGER_*
// or collector variables (HotROD maps JAEGER_* onto OTEL_*), so that the
// flags and variables a test passes (extra, NAME=value) are all that
// configure it.
func BaseEnv(extra ...string) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// Start starts bin with args and env; a t.Cleanup stops it (SIGTERM, then
// SIGKILL after 10 s) and, when the test failed, logs the last logLines
// lines of its output.
func Start(t testing.TB, logLines int, name string, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, exited: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = p, p
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // killed with the test binary
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("--- %s (%s %s), last lines:\n%s", name, filepath.Base(bin), strings.Join(args, " "), Tail(p.Output(), logLines))
		}
	})
	return p
}

// Stop sends SIGTERM, waits up to grace for the process to exit, then
// kills it; it returns the exit error (nil for a clean exit).
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.Cmd.Process.Kill()
		<-p.exited
	}
	return p.err
}

// WaitFor waits until the process has written a line matching re and
// returns the line's submatches; it fails when the process exits first or
// the time runs out.
func (p *Proc) WaitFor(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.Output()); m != nil {
			return m, nil
		}
		select {
		case <-p.exited:
			if m := re.FindStringSubmatch(p.Output()); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("%s exited (%v) before logging %q", p.Name, p.err, re)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not log %q in %v", p.Name, re, timeout)
		}
	}
}

// Find returns the first line of the output that contains s, or "".
func (p *Proc) Find(s string) string {
	out := p.Output()
	i := strings.Index(out, s)
	if i < 0 {
		return ""
	}
	start := strings.LastIndexByte(out[:i], '\n') + 1
	end := strings.IndexByte(out[i:], '\n')
	if end < 0 {
		return out[start:]
	}
	return out[start : i+end]
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("(%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// FreeAddr returns a loopback address no one listens on right now (the
// programs bind their ports themselves: callers retry when another
// process took the port meanwhile).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// FreePort is FreeAddr's port, for programs that take ports as numbers.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var runningRE = regexp.MustCompile(`msg="stormradius is running" otlp_grpc=(\S+) otlp_http=(\S+) http=(\S+)`)

// Addrs are the addresses a stormradius service bound, "" for one that
// is off.
type Addrs struct{ GRPC, OTLPHTTP, HTTP string }

// Running waits up to a minute until p, a stormradius service (serve or
// ingest), logs that it runs, and returns the addresses it bound.
func Running(p *Proc) (Addrs, error) {
	m, err := p.WaitFor(runningRE, 60*time.Second)
	if err != nil {
		return Addrs{}, err
	}
	addr := func(s string) string {
		if s == "<nil>" {
			return ""
		}
		return s
	}
	return Addrs{addr(m[1]), addr(m[2]), addr(m[3])}, nil
}
