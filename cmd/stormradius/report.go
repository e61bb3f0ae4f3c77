package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/internal/app"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/query/timerange"
	"github.com/stormradius/stormradius/store"
)

func runReport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", stderr)
	data := fs.String("data", "./data", "directory of the embedded store")
	storeURL := fs.String("store", "", "store URL instead of --data: clickhouse://host:9000/db")
	from := fs.String("from", "", "start of the range: RFC 3339, unix seconds or now-DURATION (default: everything)")
	to := fs.String("to", "", "end of the range, exclusive (default: everything)")
	api := fs.String("api", "", `only this root API ("service operation") in apis`)
	format := fs.String("format", "json", "output format: json (docs/SPEC.md §5.2) or table")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: stormradius report [--data DIR | --store URL] [--from T] [--to T] [--api API] [--format json|table]")
		fmt.Fprintln(stderr, "\nPrints the docs/SPEC.md §5.2 document of the stored traces whose start minute is in [from, to),")
		fmt.Fprintln(stderr, "from rollups: once ingestion is quiet it equals `analyze` of the same traces.")
		fmt.Fprintln(stderr, "Times are RFC 3339, unix seconds or now±DURATION, within "+timerange.RangeText+".")
		fs.PrintDefaults()
	}
	if _, err := parseArgs(fs, args); err != nil {
		return exitUsage
	}
	if err := app.ApplyEnv(fs); err != nil {
		fmt.Fprintf(stderr, "stormradius report: %v\n", err)
		return exitUsage
	}
	if *format != "json" && *format != "table" {
		fmt.Fprintf(stderr, "stormradius report: unknown --format %q (want json or table)\n", *format)
		return exitUsage
	}
	q, err := parseRange(*from, *to)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius report: %v\n", err)
		return exitUsage
	}
	q.API = *api
	st, err := storeurl.Open(ctx, storeurl.Options{Data: *data, URL: *storeURL, Existing: true})
	if err != nil {
		fmt.Fprintf(stderr, "stormradius report: %v\n", err)
		return exitFail
	}
	defer st.Close()
	cfg := analysis.Config{Window: st.Window()}
	doc, err := query.Document(ctx, st, q, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "stormradius report: %v\n", err)
		return exitFail
	}
	if *api != "" {
		kept := doc.APIs[:0]
		for _, a := range doc.APIs {
			if a.API == *api {
				kept = append(kept, a)
			}
		}
		doc.APIs = kept
		if len(kept) == 0 {
			fmt.Fprintf(stderr, "stormradius report: no traces of root API %q in the range\n", *api)
			return exitFail
		}
	}
	if err := writeDocument(stdout, doc, *format); err != nil {
		fmt.Fprintf(stderr, "stormradius report: write output: %v\n", err)
		return exitFail
	}
	return exitOK
}

// parseRange parses --from and --to into a query (not given: open).
func parseRange(from, to string) (store.Query, error) {
	var q store.Query
	now := time.Now()
	for _, f := range []struct {
		name, val string
		dst       *int64
	}{{"from", from, &q.From}, {"to", to, &q.To}} {
		if f.val == "" {
			continue
		}
		t, err := timerange.Parse(f.val, now)
		if err != nil {
			return q, fmt.Errorf("--%s: %w", f.name, err)
		}
		*f.dst = store.Bound(t) // an explicit epoch is not "open"
	}
	if from != "" && to != "" && q.To <= q.From {
		return q, fmt.Errorf("--to must be after --from")
	}
	return q, nil
}
