// Command stormradius measures how far retry storms travel through a
// service mesh, from OpenTelemetry traces.
//
//	stormradius analyze [--format json|table] FILE...
//	stormradius whatif --chain A,B,C --fail C --retries 1 --budget 0.1 --policy naive
//	stormradius whatif --traces FILE... --api "svc op" --fail SERVICE
//	stormradius plan [--format table|json] FILE... | --data DIR | --store URL
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // bad input, or a gate that failed
	exitUsage = 2 // bad command line, an error that prevented an answer, or an undecided gate
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = []command{
	{"demo", "run a mesh through an incident, naive retries then error ownership, and show the difference", runDemo},
	{"analyze", "analyse OTLP trace files and print the storm radius report", runAnalyze},
	{"whatif", "requests each node serves under a retry policy while a node fails", runWhatIf},
	{"plan", "order the services to move to error ownership first, from trace files or the store", runPlan},
	{"serve", "receive OTLP (gRPC, HTTP, Kafka), store, analyse continuously, serve the results", runServe},
	{"report", "print the storm radius report of stored traces (from rollups)", runReport},
	{"gate", "decide whether a rollout may proceed on its storm radius (exit 0 pass, 1 fail, 2 undecided or error)", runGate},
	{"migrate", "apply (or, with --dry-run, print) the store's schema migrations", runMigrate},
	{"healthcheck", "ask a running service's /healthz or /readyz (exit 0 when it answers 2xx): the image's probe", runHealthcheck},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "stormradius: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: stormradius COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'stormradius COMMAND -h' for a command's flags. Every flag can also be set")
	fmt.Fprintln(w, "with STORMRADIUS_<FLAG> (upper case, '-' as '_').")
}

// parseArgs parses args with fs, accepting flags after positional arguments
// too ("analyze FILE --format table"), as users type them. It returns the
// positional arguments in order. "--" ends the flags: everything after it is
// positional; a lone "-" (stdin) is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("stormradius "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
