package e2ekit

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Collector is a running OpenTelemetry Collector and its OTLP receiver's
// addresses.
type Collector struct {
	*Proc
	GRPC, HTTP string
}

// CollectorRun says how to start a collector (StartCollector).
type CollectorRun struct {
	Name string // names the process in the logs
	Bin  string // the collector binary
	// Config is the shipped config; Overrides, YAML merged over it in
	// order (each a --config of its own; empty ones skipped).
	Config    string
	Overrides []string
	// Env sets its variables beyond OTLP_GRPC_LISTEN and OTLP_HTTP_LISTEN
	// (NAME=value); Args follow the configs (--feature-gates=…).
	Env, Args []string
	LogLines  int
}

// collectorReady is what a collector logs once it takes data.
var collectorReady = regexp.MustCompile(`Everything is ready`)

// StartCollector starts the collector of r, its receiver on loopback
// ports of its own (OTLP_GRPC_LISTEN, OTLP_HTTP_LISTEN), and waits until
// it is ready: when a port was taken between choosing it and the bind, it
// starts again on new ones (three attempts). It fails t otherwise.
func StartCollector(t testing.TB, r CollectorRun) *Collector {
	t.Helper()
	args := []string{"--config", r.Config}
	dir := t.TempDir()
	for i, o := range r.Overrides {
		if o == "" {
			continue
		}
		p := filepath.Join(dir, "override-"+strconv.Itoa(i)+".yaml")
		if err := os.WriteFile(p, []byte(o), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	args = append(args, r.Args...)
	for attempt := 1; ; attempt++ {
		c := &Collector{GRPC: FreeAddr(t), HTTP: FreeAddr(t)}
		env := BaseEnv(append([]string{"OTLP_GRPC_LISTEN=" + c.GRPC, "OTLP_HTTP_LISTEN=" + c.HTTP}, r.Env...)...)
		c.Proc = Start(t, r.LogLines, r.Name, env, r.Bin, args...)
		_, err := c.WaitFor(collectorReady, 60*time.Second)
		if err == nil {
			return c
		}
		if attempt < 3 && strings.Contains(c.Output(), "address already in use") {
			c.Stop(5 * time.Second) // a port was taken between FreeAddr and the bind: new ones
			continue
		}
		t.Fatal(err)
	}
}
