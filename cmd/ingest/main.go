// Command ingest is the ingesting side over a ClickHouse store: OTLP
// gRPC/HTTP and Kafka receivers and the analysis pipeline, with /healthz,
// /readyz and /metrics on --http; cmd/api serves the REST API and the UI
// over the same store, as many of them as reads need. Every flag also
// reads STORMRADIUS_<FLAG>.
//
// Any number of instances share a store (docs/ARCHITECTURE.md, "Scaling
// out"):
//
//   - Behind Kafka: every instance in one consumer group, OTLP receivers
//     off. The group shares the topic's partitions out; each instance
//     analyses the partitions it is assigned, each on its own, and hands
//     them over on a rebalance. The collector's kafka exporter must write
//     with partition_traces_by_id, so that a trace stays on one partition.
//     Instances beyond the topic's partition count sit idle.
//
//     ingest --store clickhouse://clickhouse:9000/stormradius --kafka-brokers kafka:9092 --otlp-grpc off --otlp-http off
//
//   - Without Kafka: each instance receives OTLP as a partition of its own
//     (--partition, stable across restarts), behind a collector whose
//     loadbalancing exporter routes by trace id (deploy/collector).
//
//     ingest --store clickhouse://clickhouse:9000/stormradius --partition shard-0
//
// One instance with OTLP on and no --partition analyses the store's
// default partition: a second such instance is refused at start (the
// partition's lease).
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
		fmt.Fprintln(stderr, "cmd/api serves the results. Several instances share a store: in one Kafka consumer group")
		fmt.Fprintln(stderr, "with --otlp-grpc off --otlp-http off (each analyses the partitions it is assigned), or")
		fmt.Fprintln(stderr, "each with its own --partition behind a collector routing by trace id.")
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
	if cfg.OTLP.DisableGRPC && cfg.OTLP.DisableHTTP && len(cfg.Kafka.Brokers) == 0 && cfg.Source.DSN == "" {
		fmt.Fprintln(stderr, "ingest: nothing to ingest: the OTLP receivers are off (--otlp-grpc off --otlp-http off), and no --kafka-brokers nor --source")
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
