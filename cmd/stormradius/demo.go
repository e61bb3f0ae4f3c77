package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/demo"
)

func runDemo(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr)
	data := fs.String("data", "", "directory of the embedded store (default: a temporary directory, removed at exit)")
	duration := fs.Duration("duration", 15*time.Second, "length of each phase (the first ends on a minute boundary: from half of it to a minute more)")
	headless := fs.Bool("headless", false, "exit after printing the results instead of serving the UI")
	format := fs.String("format", "table", "output format: table, or json ({\"before\": REPORT, \"after\": REPORT})")
	httpAddr := fs.String("http", ":8080", `API and UI listen address ("off" for none; with --headless, off unless set)`)
	errorRate := fs.Float64("error-rate", 0.3, "share of the failing service's requests that fail every time during the incident (a broken shard); the rest fail 5% of the time")
	rate := fs.Float64("rate", 20, "root requests per second")
	level := fs.String("log-level", "warn", "log level of the service: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius demo [--headless] [--duration 15s] [--data DIR] [--format table|json] [--http :8080]")
		fmt.Fprintln(stderr, "\nStarts stormradius on the embedded store and a mesh of 16 HTTP services on loopback that send it")
		fmt.Fprintln(stderr, "their traces (OTLP), then runs one incident twice — vault, eight calls deep, degrades to a high")
		fmt.Fprintln(stderr, "error rate — first with naive retries at every hop, then with the error-ownership middleware,")
		fmt.Fprintln(stderr, "and prints the storm radius before and after, read back from the store. Then it serves the UI")
		fmt.Fprintln(stderr, "until interrupted (not with --headless).")
		fs.PrintDefaults()
	}
	if rest, err := parseArgs(fs, args); err != nil {
		return exitUsage
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "stormradius demo: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius demo: %v\n", err)
		return exitUsage
	}
	var lvl slog.Level
	switch {
	case *format != "table" && *format != "json":
		fmt.Fprintf(stderr, "stormradius demo: unknown --format %q (want table or json)\n", *format)
		return exitUsage
	case *duration < time.Second:
		fmt.Fprintf(stderr, "stormradius demo: --duration %v is too short (at least 1s)\n", *duration)
		return exitUsage
	case *errorRate <= 0 || *errorRate > 1:
		fmt.Fprintf(stderr, "stormradius demo: --error-rate %v: want a rate in (0, 1]\n", *errorRate)
		return exitUsage
	case *rate <= 0 || *rate > 5000:
		fmt.Fprintf(stderr, "stormradius demo: --rate %v: want (0, 5000] requests a second\n", *rate)
		return exitUsage
	case lvl.UnmarshalText([]byte(*level)) != nil:
		fmt.Fprintf(stderr, "stormradius demo: --log-level %q: want debug, info, warn or error\n", *level)
		return exitUsage
	}
	addr := *httpAddr
	if addr == "off" || (*headless && !app.Given(fs, "http")) {
		addr = ""
	}
	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "stormradius-demo-") // 0700; the store's files in it 0600
		if err != nil {
			fmt.Fprintf(stderr, "stormradius demo: %v\n", err)
			return exitFail
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	cfg := demo.Config{Data: dir, Duration: *duration, ErrorRate: *errorRate, Rate: *rate, HTTPAddr: addr,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})),
		Progress: stderr, Terminal: isTerminal(stderr)}
	fmt.Fprintf(stderr, "stormradius demo: 16 services on loopback, storing in %s; two phases of at least %v each\n", dir, *duration)
	err := demo.Run(ctx, cfg, func(ctx context.Context, r *demo.Result) error {
		var err error
		if *format == "json" {
			err = demo.WriteJSON(stdout, r)
		} else {
			err = demo.WriteTable(stdout, r, *errorRate)
		}
		if err != nil || *headless {
			return err
		}
		if r.UI != "" {
			fmt.Fprintf(stderr, "\nThe UI is at %s (the API under %sapi/v1/). Ctrl-C to stop.\n", r.UI, r.UI)
		} else {
			fmt.Fprintln(stderr, "\nNo UI (--http off). Ctrl-C to stop.")
		}
		<-ctx.Done()
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "stormradius demo: %v\n", err)
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintln(stderr, "stormradius demo: another program listens there: pick another address with --http (e.g. --http :8081), or --http off")
		}
		return exitFail
	}
	if err != nil && *headless {
		fmt.Fprintln(stderr, "stormradius demo: interrupted")
		return exitFail
	}
	return exitOK
}

// isTerminal reports whether w is a terminal (progress is then rewritten on
// one line).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
