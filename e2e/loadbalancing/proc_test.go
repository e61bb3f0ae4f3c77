// Processes, the environment and ClickHouse databases: a copy of
// e2e/collector/proc_test.go (each end-to-end module is built on its own,
// and test files cannot be imported), with a database prefix of its own.

package loadbalancing

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// proc is a process the suite started: its output is kept (for waiting on
// a log line, and shown when the test fails), and it is stopped when the
// test ends, failed or not.
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
// caller's STORMRADIUS_* or collector variables, so that the flags and
// variables a test passes are all that configure it.
func baseEnv(extra ...string) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// runStormradius runs the stormradius command to its end, with baseEnv
// (no STORMRADIUS_* of the caller's shell), and returns its stdout; its
// error carries the command line and stderr.
func runStormradius(args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(suite.stormradius, args...)
	cmd.Env = baseEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("stormradius %s: %v\n%s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
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
			t.Logf("--- %s (%s %s), last lines:\n%s", name, filepath.Base(bin), strings.Join(args, " "), tail(p.output(), 60))
		}
	})
	return p
}

// stop sends SIGTERM, waits up to grace for the process to exit, then
// kills it; it returns the exit error (nil for a clean exit).
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.exited
	}
	return p.err
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

// find returns the first line of the output that contains s, or "".
func (p *proc) find(s string) string {
	out := p.output()
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

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("(%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// freeAddr returns a loopback address no one listens on right now (the
// collector binds its receivers itself; startCollector retries when
// another process took the port meanwhile).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// clickHouseEnv names the ClickHouse server of the ClickHouse variants.
const clickHouseEnv = "STORMRADIUS_CLICKHOUSE"

// freshClickHouse returns the DSN of a new database on the server
// STORMRADIUS_CLICKHOUSE names (the store creates it), dropped when the
// test ends; it skips the test without a server.
func freshClickHouse(t *testing.T) string {
	t.Helper()
	server := os.Getenv(clickHouseEnv)
	if server == "" {
		t.Skip("set STORMRADIUS_CLICKHOUSE=clickhouse://127.0.0.1:9000/default to run the ClickHouse variants")
	}
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("%s: %v", clickHouseEnv, err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "stormradius_e2e_lb_" + hex.EncodeToString(b[:])
	d := *u
	d.Path = "/" + name
	// Registered before any process starts, so it runs after they stopped.
	t.Cleanup(func() {
		o, err := ch.ParseDSN(server)
		if err == nil {
			var conn ch.Conn
			if conn, err = ch.Open(o); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name)
				cancel()
				conn.Close()
			}
		}
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return d.String()
}
