// Command ingest is the ingesting side over a ClickHouse store: OTLP
// gRPC/HTTP and Kafka receivers and the analysis pipeline, with /healthz,
// /readyz and /metrics on --http; cmd/api serves the REST API and the UI
// over the same store, as many of them as reads need. Run one analysing
// instance per store until scale-out exists: a second is refused at start
// (the store's analysis lease). Every flag also reads STORMRADIUS_<FLAG>.
//
//	ingest --store clickhouse://clickhouse:9000/stormradius [--kafka-brokers kafka:9092]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/stormradius/stormradius/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	build := app.Flags(fs, app.Ingest)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ingest --store clickhouse://host:9000/db [flags]")
		fmt.Fprintln(stderr, "\nReceives OTLP traces (gRPC, HTTP, optionally Kafka) into the store and analyses them;")
		fmt.Fprintln(stderr, "cmd/api serves the results. One analysing instance per store until scale-out exists:")
		fmt.Fprintln(stderr, "a second is refused at start.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ingest: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		return 2
	}
	cfg, err := build()
	if err != nil {
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		return 2
	}
	if cfg.Store.URL == "" {
		fmt.Fprintln(stderr, "ingest: --store is required (the scaled-out pieces share a ClickHouse store; `stormradius serve` runs on the embedded one)")
		return 2
	}
	if err := app.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		return 1
	}
	return 0
}
