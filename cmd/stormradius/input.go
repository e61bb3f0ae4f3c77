package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
)

// progressThreshold: inputs larger than this get a progress line on a
// terminal.
const progressThreshold = 32 << 20

// loaded is what readInputs read from the trace files.
type loaded struct {
	traces   graph.Grouper
	bad      int // bad lines or messages, reported
	failed   int // files that could not be read (wholly or from some point)
	files    int
	requests int
}

// readInputs reads OTLP trace files ("-" is stdin), reporting bad lines and
// unreadable files on stderr and carrying on with the rest.
func readInputs(ctx context.Context, names []string, claimHeader string, stdin io.Reader, stderr io.Writer) loaded {
	var out loaded
	dec := ingest.NewDecoder(ingest.DecoderConfig{ClaimHeader: claimHeader})
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
		st, err := dec.ReadFile(r, name,
			func(spans []graph.Span) error {
				out.traces.Add(spans)
				return ctx.Err()
			},
			func(err error) {
				out.bad++
				prog.clear()
				fmt.Fprintf(stderr, "stormradius: %v\n", err)
			})
		if f != nil {
			f.Close() // read-only: nothing to lose; closed now, not when all files are done
		}
		prog.done(st.Bytes)
		out.files++
		out.requests += st.Requests
		if err != nil {
			out.failed++
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
