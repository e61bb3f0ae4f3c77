package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
)

// progressThreshold: inputs larger than this get a progress line on a
// terminal.
const progressThreshold = 32 << 20

// maxBadShown is how many bad lines or messages are reported per file; the
// rest are counted and summed up once the file is done.
const maxBadShown = 5

// loaded is what readInputs read from the trace files.
type loaded struct {
	bad       int // bad lines or messages, reported
	failed    int // files that could not be read at all
	partial   int // files read only up to some point (truncated, corrupt tail)
	files     int
	requests  int
	spans     int
	notTraces int // bad requests that were another signal or format
}

// summary says, after a report, what part of the input it does not cover;
// "" when everything was read.
func (in *loaded) summary() string {
	var parts []string
	if in.bad > 0 {
		parts = append(parts, plural(in.bad, "bad line or message", "bad lines or messages"))
	}
	if in.partial > 0 {
		parts = append(parts, plural(in.partial, "file read only in part", "files read only in part"))
	}
	if in.failed > 0 {
		parts = append(parts, plural(in.failed, "unreadable file", "unreadable files"))
	}
	if len(parts) == 0 {
		return ""
	}
	return "the report covers what could be read; skipped: " + strings.Join(parts, ", ")
}

// empty says why there is nothing to analyse, "" when there is.
func (in *loaded) empty() string {
	switch {
	case in.spans > 0:
		return ""
	case in.requests > 0:
		return fmt.Sprintf("no spans in input: %s held no spans", plural(in.requests, "request", "requests"))
	case in.notTraces > 0 && in.notTraces == in.bad && in.failed+in.partial == 0:
		return "no traces in input: it holds other OTLP signals or another trace format (see above)"
	case in.failed+in.partial > 0 || in.bad > 0:
		return "no input could be read"
	}
	return "no spans in input: the input is empty"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// readInputs reads OTLP trace files ("-" is stdin), calling emit with the
// spans of every request, reporting bad lines and unreadable files on
// stderr and carrying on with the rest: a file that breaks part-way keeps
// what was read before the break. An error from emit stops the reading.
func readInputs(ctx context.Context, names []string, cfg ingest.DecoderConfig, stdin io.Reader, stderr io.Writer, emit func([]graph.Span) error) *loaded {
	out := &loaded{}
	dec := ingest.NewDecoder(cfg)
	// Decoding dominates: every core decodes requests (the analysis does
	// not depend on their order).
	dec.Workers = runtime.GOMAXPROCS(0)
	prog := newProgress(names, stderr)
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		var r io.Reader
		var f *os.File
		if name == "-" {
			r, name = stdin, "(stdin)"
		} else {
			var err error
			if f, err = os.Open(name); err != nil {
				fmt.Fprintf(stderr, "stormradius: %v\n", err)
				out.failed++
				continue
			}
			r = f
		}
		dec.Progress = prog.update
		badHere := 0
		st, err := dec.ReadFile(r, name,
			func(spans []graph.Span) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				return emit(spans)
			},
			func(err error) {
				out.bad++
				if badHere++; badHere <= maxBadShown {
					prog.clear()
					fmt.Fprintf(stderr, "stormradius: %v\n", err)
				}
			})
		if f != nil {
			f.Close() // read-only: nothing to lose; closed now, not when all files are done
		}
		prog.done(st.Bytes)
		out.files++
		out.requests += st.Requests
		out.spans += st.Spans
		out.notTraces += st.NotTraces
		if badHere > maxBadShown {
			prog.clear()
			fmt.Fprintf(stderr, "stormradius: %s: %d more bad lines or messages not shown (%d in all)\n", name, badHere-maxBadShown, badHere)
		}
		if err != nil && ctx.Err() == nil {
			if st.Requests > 0 {
				out.partial++
			} else {
				out.failed++
			}
			prog.clear()
			fmt.Fprintf(stderr, "stormradius: %v\n", err)
		}
	}
	prog.clear()
	return out
}

// progress prints "read N MiB, M spans" on stderr when it is a terminal and
// the input is large.
type progress struct {
	w        io.Writer
	on       bool
	base     int64 // bytes of files already done
	last     time.Time
	shown    bool
	start    time.Time
	expected int64
}

func newProgress(names []string, stderr io.Writer) *progress {
	p := &progress{w: stderr, start: time.Now()}
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return p
	}
	for _, n := range names {
		if n == "-" {
			p.on = true // unknown size: assume large
			continue
		}
		if st, err := os.Stat(n); err == nil {
			p.expected += st.Size()
		}
	}
	p.on = p.on || p.expected >= progressThreshold
	return p
}

func (p *progress) update(n int64) {
	if !p.on || time.Since(p.last) < 250*time.Millisecond {
		return
	}
	p.last = time.Now()
	done := p.base + n
	if p.expected > 0 {
		fmt.Fprintf(p.w, "\rreading: %d/%d MiB (%.0f%%) ", done>>20, p.expected>>20, 100*float64(done)/float64(p.expected))
	} else {
		fmt.Fprintf(p.w, "\rreading: %d MiB ", done>>20)
	}
	p.shown = true
}

func (p *progress) done(n int64) { p.base += n }

func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
