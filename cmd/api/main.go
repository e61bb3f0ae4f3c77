// Command api is the scaled-out read side: the REST API (docs/SPEC.md §5.3), the
// web UI and /metrics over the ClickHouse store that cmd/ingest writes.
// Run as many as the read load needs; they hold no state. The store is
// opened read-only: it must exist and be migrated (cmd/ingest or
// `stormradius migrate` do that), and api writes nothing to it. Every flag
// also reads STORMRADIUS_<FLAG>.
//
//	api --store clickhouse://clickhouse:9000/stormradius [--http :8080] [--api-token T]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run runs the command, writing its errors to stderr.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", "", "store URL: clickhouse://host:9000/db")
	httpAddr := fs.String("http", ":8080", "listen address of the API, the UI, /healthz, /readyz and /metrics")
	window := fs.Duration("window", 0, "analysis window the data was written with (default: the store's)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	buildWeb := app.WebFlags(fs)
	buildTLS := app.HTTPTLSFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: api --store clickhouse://host:9000/db [--http :8080] [--api-token T] [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "api: %v\n", err)
		return 2
	}
	wcfg, err := buildWeb()
	if err != nil {
		fmt.Fprintf(stderr, "api: %v\n", err)
		return 2
	}
	httpTLS, err := buildTLS()
	if err != nil {
		fmt.Fprintf(stderr, "api: %v\n", err)
		return 2
	}
	if *storeURL == "" {
		fmt.Fprintln(stderr, "api: --store is required (cmd/api serves the ClickHouse store cmd/ingest writes; `stormradius serve` serves the embedded one)")
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "api: --log-level %q: want debug, info, warn or error\n", *level)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	cfg := app.APIConfig{Store: storeurl.Options{URL: *storeURL, Window: *window}, HTTPAddr: *httpAddr,
		HTTPTLS: httpTLS, Web: wcfg, Logger: log}
	if err := app.RunAPI(ctx, cfg); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "api: %v\n", err)
		return 1
	}
	return 0
}
