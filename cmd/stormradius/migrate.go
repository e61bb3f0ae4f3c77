package main

import (
	"context"
	"fmt"
	"io"

	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
)

func runMigrate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("migrate", stderr)
	data := fs.String("data", "./data", "directory of the embedded store")
	storeURL := fs.String("store", "", "store URL instead of --data: clickhouse://host:9000/db")
	cluster := app.ClickHouseClusterFlag(fs)
	dry := fs.Bool("dry-run", false, "print the migrations that would be applied, apply nothing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius migrate [--data DIR | --store URL [--clickhouse-cluster NAME]] [--dry-run]")
		fmt.Fprintln(stderr, "\nApplies the store's schema migrations (serve and ingest apply them at start too);")
		fmt.Fprintln(stderr, "--dry-run prints each one that would be applied, with its SQL.")
		fs.PrintDefaults()
	}
	if rest, err := parseArgs(fs, args); err != nil {
		return exitUsage
	} else if len(rest) > 0 {
		fmt.Fprintf(stderr, "stormradius migrate: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius migrate: %v\n", err)
		return exitUsage
	}
	opts := storeurl.Options{Data: *data, URL: *storeURL, Cluster: *cluster}
	ms, err := storeurl.Migrations(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius migrate: %v\n", err)
		return exitFail
	}
	if len(ms) == 0 {
		fmt.Fprintln(stdout, "schema is up to date")
		return exitOK
	}
	for _, m := range ms {
		fmt.Fprintf(stdout, "-- migration %04d %s\n", m.Version, m.Name)
		if *dry {
			for _, st := range m.Statements() {
				fmt.Fprintf(stdout, "%s;\n", st)
			}
			fmt.Fprintln(stdout)
		}
	}
	if *dry {
		fmt.Fprintf(stdout, "%d migration(s) would be applied (dry run: nothing changed)\n", len(ms))
		return exitOK
	}
	st, err := storeurl.Open(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius migrate: %v\n", err)
		return exitFail
	}
	if err := st.Close(); err != nil {
		fmt.Fprintf(stderr, "stormradius migrate: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%d migration(s) applied\n", len(ms))
	return exitOK
}
