package hotrod

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

// proc is a process the test started: its output is kept (to wait for a
// log line, to read HotROD's log, and to show when the test fails), and it
// is stopped when the test ends, failed or not.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed

	mu  sync.Mutex
	out bytes.Buffer // stdout and stderr together
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// output is everything the process wrote so far.
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// baseEnv is the environment every process starts from: none of the
// caller's STORMRADIUS_*, OTEL_* or JAEGER_* variables (HotROD maps the
// latter onto the former), so that what a test passes is all that
// configures it.
func baseEnv(extra ...string) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// startProc starts bin with args and env; a t.Cleanup stops it (SIGTERM,
// then SIGKILL) and, when the test failed, logs the end of its output.
func startProc(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // killed with the test binary
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stop(10 * time.Second)
		if t.Failed() {
			t.Logf("--- %s (%s %s), last lines:\n%s", name, filepath.Base(bin), strings.Join(args, " "), tail(p.output(), 40))
		}
	})
	return p
}

// stop sends SIGTERM, waits up to grace for the process to exit, then
// kills it.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitFor waits until the process has written a line matching re and
// returns the line's submatches; it fails when the process exits first or
// the time runs out.
func (p *proc) waitFor(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.output()); m != nil {
			return m, nil
		}
		select {
		case <-p.exited:
			if m := re.FindStringSubmatch(p.output()); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("%s exited (%v) before logging %q", p.name, p.err, re)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not log %q in %v", p.name, re, timeout)
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("(%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// freePort returns a loopback port no one listens on right now (HotROD
// takes its ports as numbers; startHotROD retries when another process
// took one meanwhile).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
