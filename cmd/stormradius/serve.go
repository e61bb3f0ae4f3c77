package main

import (
	"context"
	"fmt"
	"io"

	"github.com/stormradius/stormradius/internal/app"
)

func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", stderr)
	build := app.Flags(fs, app.Serve)
	buildWeb := app.WebFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius serve [--data DIR | --store URL] [--otlp-grpc :4317] [--otlp-http :4318] [--http :8080] [flags]")
		fmt.Fprintln(stderr, "\nReceives OTLP traces (gRPC, HTTP, optionally Kafka), stores them, analyses them continuously")
		fmt.Fprintln(stderr, "and serves the results. SIGINT/SIGTERM stop it after analysing every pending trace.")
		fs.PrintDefaults()
	}
	if rest, err := parseArgs(fs, args); err != nil {
		return exitUsage
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "stormradius serve: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius serve: %v\n", err)
		return exitUsage
	}
	cfg, err := build()
	if err != nil {
		fmt.Fprintf(stderr, "stormradius serve: %v\n", err)
		return exitUsage
	}
	wcfg, err := buildWeb()
	if err != nil {
		fmt.Fprintf(stderr, "stormradius serve: %v\n", err)
		return exitUsage
	}
	if cfg.HTTPAddr != "" {
		cfg.Web = &wcfg
	}
	if err := app.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "stormradius serve: %v\n", err)
		return exitFail
	}
	return exitOK
}
