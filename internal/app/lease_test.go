package app_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/sim"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// A second service on the same store is refused at start, naming the
// first; once the first stops gracefully, a new one starts at once (the
// lease is released, not left to expire: the default timeout is 30 s).
func TestLeaseSecondServiceRefused(t *testing.T) {
	dir := t.TempDir()
	const window = 10 * time.Minute
	first := startService(t, dir, window)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	started := make(chan struct{}, 1)
	begin := time.Now()
	err := app.Run(ctx, app.Config{Store: storeurl.Options{Data: dir, Window: window},
		OTLP: otlp.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}, Ready: func(app.Addrs) { started <- struct{}{} }})
	var held *store.LeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("second service: %v, want refused as the lease is held", err)
	}
	if len(started) > 0 || time.Since(begin) > 5*time.Second {
		t.Fatalf("second service became ready, or took %v to be refused", time.Since(begin))
	}
	if held.Holder.PID != os.Getpid() || held.Expires.Sub(held.Now) > app.DefaultLeaseTimeout {
		t.Fatalf("refused naming pid %d until %v (at %v), want this process, within %v",
			held.Holder.PID, held.Expires, held.Now, app.DefaultLeaseTimeout)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", os.Getpid()), "stop the other instance", "if it crashed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not say %q", err, want)
		}
	}

	if err := first.stop(); err != nil {
		t.Fatalf("first service: %v", err)
	}
	begin = time.Now()
	next := startService(t, dir, window)
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("a service after a graceful stop took %v to start", d)
	}
	if err := next.stop(); err != nil {
		t.Fatal(err)
	}
}

// A service that loses its lease (here: not renewed before its deadline,
// the clock moved past it) stops with ErrLeaseLost, acknowledges nothing
// more and analyses nothing more; the traces it held pending are not lost:
// the next service recovers them from the stored spans, and the report
// equals analyze.
func TestLeaseLostStopsService(t *testing.T) {
	res, err := sim.Run(storetest.Scenario(60, time.Date(2026, 3, 1, 9, 58, 0, 0, time.UTC), 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const window = 10 * time.Minute
	want := analyze(t, res, window)
	dir := t.TempDir()
	clk := storetest.NewFakeClock(time.Now())
	ready := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(context.Background(), app.Config{
			OpenStore: func(ctx context.Context) (store.Store, error) {
				return sqlite.Open(ctx, sqlite.Options{Dir: dir, Window: window, LeaseClock: clk.Now})
			},
			// Nothing is analysed before the loss: every trace is pending.
			Pipeline:     pipeline.Config{TraceIdle: time.Hour, MaxTraceAge: time.Hour, Retention: -1},
			OTLP:         otlp.Config{GRPCAddr: "off", DisableGRPC: true, HTTPAddr: "127.0.0.1:0"},
			LeaseTimeout: 3 * time.Second,
			Ready:        func(a app.Addrs) { ready <- a },
		})
	}()
	var addrs app.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("service did not start: %v", err)
	}
	url := "http://" + addrs.OTLPHTTP.String() + otlp.TracesPath
	exports := res.Exports(4, 3, 0)
	for _, td := range exports {
		b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err := post(url, "application/x-protobuf", "", b); err != nil {
			t.Fatal(err)
		}
	}

	clk.Add(time.Minute) // past the deadline: renewals cannot save it
	lostAt := time.Now()
	b, _ := ptraceotlp.NewExportRequestFromTraces(exports[0]).MarshalProto()
	if resp, err := http.Post(url, "application/x-protobuf", strings.NewReader(string(b))); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a request was acknowledged after the lease was lost")
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("service stopped with %v, want the lease lost", err)
		}
		// Renewed every third of the 3 s timeout: noticed within a second.
		if d := time.Since(lostAt); d > 3*time.Second {
			t.Fatalf("the loss took %v to stop the service", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the service kept running without its lease")
	}

	next := startService(t, dir, window)
	got := reportWhenQuiet(t, dir, int64(res.Stats.Spans))
	if err := next.stop(); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("report after the takeover differs from analyze:\n got %s\nwant %s", got, want)
	}
}

// --lease-timeout: 30 s by default, STORMRADIUS_LEASE_TIMEOUT when the flag
// is not given, at least a second.
func TestLeaseTimeoutFlag(t *testing.T) {
	parse := func(args ...string) (app.Config, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		build := app.Flags(fs, app.Serve)
		if err := fs.Parse(args); err != nil {
			return app.Config{}, err
		}
		if err := app.ApplyEnv(fs); err != nil {
			return app.Config{}, err
		}
		return build()
	}
	if c, err := parse(); err != nil || c.LeaseTimeout != 30*time.Second {
		t.Fatalf("default: %v, %v; want 30s", c.LeaseTimeout, err)
	}
	t.Setenv("STORMRADIUS_LEASE_TIMEOUT", "45s")
	if c, err := parse(); err != nil || c.LeaseTimeout != 45*time.Second {
		t.Fatalf("from the environment: %v, %v; want 45s", c.LeaseTimeout, err)
	}
	if c, err := parse("--lease-timeout", "10s"); err != nil || c.LeaseTimeout != 10*time.Second {
		t.Fatalf("flag over the environment: %v, %v; want 10s", c.LeaseTimeout, err)
	}
	if _, err := parse("--lease-timeout", "500ms"); err == nil || !strings.Contains(err.Error(), "--lease-timeout 500ms") {
		t.Fatalf("half a second: %v, want refused", err)
	}
}
