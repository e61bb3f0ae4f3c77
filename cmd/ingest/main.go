// Command ingest is the scaled-out ingester: OTLP gRPC/HTTP and Kafka
// receivers and the analysis pipeline over a shared ClickHouse store, with
// /healthz, /readyz and /metrics. Run one per store (a second is refused
// at start: the store's analysis lease), and as many cmd/api as reads
// need to serve the results. Every flag also reads STORMRADIUS_<FLAG>.
//
//	ingest --store clickhouse://clickhouse:9000/stormradius [--kafka-brokers kafka:9092]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/flagenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	build := app.Flags(fs, "")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ingest --store clickhouse://host:9000/db [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := flagenv.Apply(fs); err != nil {
		fmt.Fprintf(os.Stderr, "ingest: %v\n", err)
		os.Exit(2)
	}
	cfg, err := build()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ingest: %v\n", err)
		os.Exit(2)
	}
	if cfg.Store.URL == "" {
		fmt.Fprintln(os.Stderr, "ingest: --store is required (the scaled-out pieces share a ClickHouse store; `stormradius serve` runs on the embedded one)")
		os.Exit(2)
	}
	if err := app.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "ingest: %v\n", err)
		os.Exit(1)
	}
}
