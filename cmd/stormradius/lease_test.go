package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/chtest"
)

// instance is a `stormradius serve` process of the lease tests.
type instance struct {
	cmd     *exec.Cmd
	httpURL string
	log     bytes.Buffer // read once exited
	exited  chan struct{}
}

// startInstance starts `stormradius serve` with args (the store's and the
// lease's flags); it is killed when the test ends.
func startInstance(t *testing.T, args ...string) *instance {
	t.Helper()
	p := &instance{httpURL: "http://" + freeAddr(t), exited: make(chan struct{})}
	full := append([]string{"serve", "--window", "10m", "--retention", "0", "--otlp-grpc", "off",
		"--otlp-http", freeAddr(t), "--http", strings.TrimPrefix(p.httpURL, "http://")}, args...)
	p.cmd = exec.Command(commandBinary(t), full...)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// ready waits until the instance is ready (true) or has exited (false).
func (p *instance) ready(t *testing.T) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return false
		default:
		}
		if resp, err := http.Get(p.httpURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("serve neither became ready nor exited in 30 s")
	return false
}

// exit waits for the instance to exit and returns its status and output.
func (p *instance) exit(t *testing.T, within time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("serve still running after %v:\n%s", within, p.log.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.log.String()
}

// mustStart starts an instance that must become ready.
func mustStart(t *testing.T, args ...string) *instance {
	t.Helper()
	for range 3 {
		p := startInstance(t, args...)
		if p.ready(t) {
			return p
		}
		_, out := p.exit(t, time.Second)
		if !portTaken(out) {
			t.Fatalf("serve did not start:\n%s", out)
		}
	}
	t.Fatal("serve found its ports taken three times")
	return nil
}

// portTaken reports whether an instance exited because a port freeAddr
// chose was taken by another process in the meantime (tests of other
// packages run alongside): not what a test here is about.
func portTaken(out string) bool { return strings.Contains(out, "address already in use") }

// refused checks that an instance exited 1 with the refusal naming
// holder's pid.
func refused(t *testing.T, p *instance, holder *instance) string {
	t.Helper()
	code, out := p.exit(t, 30*time.Second)
	for _, want := range []string{"another instance is analysing this store", fmt.Sprintf("pid %d on host", holder.cmd.Process.Pid),
		"stop the other instance, or wait", "if it crashed", "to run several instances over one store", "--kafka-partitioned"} {
		if !strings.Contains(out, want) {
			t.Fatalf("exit %d, output does not say %q:\n%s", code, want, out)
		}
	}
	if code != exitFail {
		t.Fatalf("refused instance exited %d, want %d:\n%s", code, exitFail, out)
	}
	return out
}

// Two analysing instances on one embedded store: the second is refused at
// start; after kill -9 of the holder a restart takes over at once (its
// process is gone); a frozen holder (alive, not renewing) loses the lease
// after the timeout, and, thawed, finds it lost and exits non-zero; a
// graceful stop releases it.
func TestLeaseProcesses(t *testing.T) {
	leaseProcesses(t, []string{"--data", t.TempDir()})
}

// The same on ClickHouse.
func TestLeaseProcessesClickHouse(t *testing.T) {
	leaseProcesses(t, []string{"--store", chtest.FreshDSN(t)})
}

func leaseProcesses(t *testing.T, storeArgs []string) {
	const ttl = 5 * time.Second
	args := append(storeArgs, "--lease-timeout", ttl.String())
	first := mustStart(t, args...)

	refused(t, startInstance(t, args...), first)
	if !first.ready(t) {
		t.Fatal("the holder stopped when a second instance was refused")
	}

	first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.exited
	begin := time.Now()
	second := mustStart(t, args...)
	if d := time.Since(begin); d >= ttl {
		t.Fatalf("after kill -9 of the holder, the restart took %v (the timeout is %v): it waited for the expiry", d, ttl)
	}

	// Frozen: its pid lives, its lease is not renewed.
	second.cmd.Process.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	refusals := 0
	var third *instance
	for third == nil {
		p := startInstance(t, args...)
		if p.ready(t) {
			third = p
			break
		}
		if _, out := p.exit(t, 30*time.Second); portTaken(out) {
			continue
		}
		refused(t, p, second)
		refusals++
		if time.Since(frozen) > ttl+30*time.Second {
			t.Fatalf("the frozen holder's lease did not expire in %v", time.Since(frozen))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Renewed at most a third of the timeout before the freeze, the lease
	// expires at least two thirds of it after.
	if took := time.Since(frozen); refusals == 0 || took < ttl*2/3 {
		t.Fatalf("took over a frozen holder's lease %v after the freeze, after %d refusals; want at least %v", took, refusals, ttl*2/3)
	}

	t.Logf("took over a frozen holder's lease %v after the freeze, after %d refusals", time.Since(frozen), refusals)

	second.cmd.Process.Signal(syscall.SIGCONT)
	thawed := time.Now()
	code, out := second.exit(t, 20*time.Second)
	if code != exitFail || !strings.Contains(out, "analysis lease lost") {
		t.Fatalf("the thawed holder exited %d, want %d saying the lease was lost:\n%s", code, exitFail, out)
	}
	t.Logf("the thawed holder exited %v after SIGCONT:\n%s", time.Since(thawed), out)
	if !third.ready(t) {
		t.Fatal("the new holder stopped")
	}

	third.cmd.Process.Signal(syscall.SIGTERM)
	if code, out := third.exit(t, 30*time.Second); code != exitOK {
		t.Fatalf("SIGTERM: exit %d:\n%s", code, out)
	}
	begin = time.Now()
	fourth := mustStart(t, args...)
	if d := time.Since(begin); d >= ttl {
		t.Fatalf("after a graceful stop, the restart took %v: the lease was not released", d)
	}
	fourth.cmd.Process.Signal(syscall.SIGTERM)
	if code, out := fourth.exit(t, 30*time.Second); code != exitOK {
		t.Fatalf("SIGTERM: exit %d:\n%s", code, out)
	}
}
