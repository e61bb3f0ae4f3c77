package analysis

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
)

// WriteTable writes a readable summary of the document: the fleet, one row
// per root API, the top owners, the claim integrity of services and the
// fail-open edges. Names come from traces, that is from anyone who can send
// spans: they are printed through Printable, so that no name can move the
// cursor, recolour the terminal or break the table.
func (d *Document) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "%d spans, %d traces, %d fragments, %d root APIs (%d with failures)\n",
		d.Spans, d.Traces, d.Fragments, d.Fleet.APIs, d.Fleet.FailedAPIs)
	// The fleet's mean is of the APIs' max radius (MeanMaxRadius), not over
	// traces as an API's MEAN R/TRACE: the labels keep them apart.
	fmt.Fprintf(ew, "fleet: max radius %d, mean of the APIs' max radius %.2f; potential radius max %d (without ownership %d); spurious requests prevented %d\n\n",
		d.Fleet.MaxRadius, d.Fleet.MeanMaxRadius, d.Fleet.MaxPotentialRadius, d.Fleet.MaxPotentialWithout, d.Fleet.SpuriousRequestsPrevented)

	if d.Sampling.Estimated {
		// Estimates, not counts (docs/SPEC.md §4.9): said first, and the
		// APIs' table gets what was received and the failed-trace rate
		// with its interval.
		fmt.Fprintf(ew, "sampled traffic: %d traces received stand for an estimated %d (effective sample size %.0f); every count is an estimate, rates with 95%% intervals\n\n",
			d.Sampling.TracesReceived, d.Sampling.TracesEstimated, d.Sampling.EffectiveSampleSize)
	}

	d.writeAPIs(ew)

	if len(d.Services) > 0 {
		fmt.Fprintln(ew, "\nclaim integrity (failed hops):")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "SERVICE\tCORRECT\tFALSE CLAIM\tFALSE UNCLAIM\tMISSING\tINVALID\tMISATTR\tCTX DROPS\tOWNED\tLOAD AVOIDED\t")
		for _, s := range d.Services {
			if s.Virtual {
				// Uninstrumented (a database, a cache): it owns failures
				// but speaks no claims, so it has no audit.
				fmt.Fprintf(tw, "%s (virtual)\t-\t-\t-\t-\t-\t-\t-\t%d\t%s\t\n", Printable(s.Service),
					s.OwnedFailures, percent(s.LoadIncreaseAvoided))
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", Printable(s.Service),
				s.Claims.Correct, s.Claims.FalseClaim, s.Claims.FalseUnclaim, s.Claims.Missing, s.Claims.Invalid,
				s.MisattributedErrors, s.ContextDrops, s.OwnedFailures, percent(s.LoadIncreaseAvoided))
		}
		tw.Flush()
	}

	var open []string
	for _, e := range d.Edges {
		if e.FailOpen {
			open = append(open, fmt.Sprintf("%s -> %s (%s)", Printable(e.Caller), Printable(e.Callee), e.FailOpenSource))
		}
	}
	if len(open) > 0 {
		fmt.Fprintf(ew, "\nfail-open edges: %s\n", strings.Join(open, ", "))
	}

	if len(d.Sampling.Warnings) > 0 {
		fmt.Fprintln(ew)
		for _, w := range d.Sampling.Warnings {
			fmt.Fprintf(ew, "warning: %s\n", w)
		}
	}

	if len(d.Incidents) > 0 {
		fmt.Fprintln(ew, "\nincidents (an owner's failures ≥ 5% of its requests and ≥ 10 in a minute; 5 quiet minutes close one):")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "OWNER\tSTART (UTC)\tEND\tSTATE\tPEAK RATE\tOWNED\tMAX R\tMEAN R/EVENT\tMAX AMP\tSUPPRESSED\tSPURIOUS\tAPIS\t")
		for _, in := range d.Incidents {
			state := "closed"
			if in.Open {
				state = "open"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%.2f\t%.1f\t%d\t%d\t%d\t\n",
				Printable(in.Service+" "+in.Operation), in.Start.Format("2006-01-02 15:04"), in.End.Format("15:04"), state,
				percent(in.PeakRate), in.OwnedFailures, in.MaxRadius, in.MeanRadius, in.MaxAmplification,
				in.SuppressedRetries, in.SpuriousRequestsPrevented, len(in.AffectedAPIs))
		}
		tw.Flush()
	}
	return ew.err
}

// writeAPIs writes the table of root APIs and its legend; on sampled
// traffic, with what each received and its failed-trace share.
func (d *Document) writeAPIs(ew *errWriter) {
	sampled := d.Sampling.Estimated
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "API\tTRACES\tROOT ERRORS\tW/ FAILURE\tMAX R\tMEAN R/TRACE\tPOTENTIAL R\tMAX AMP\tSUPPRESSED\tSPURIOUS\tMISATTR\tTOP OWNER\t"
	if sampled {
		head += "RECEIVED\tW/ FAILURE % (95% CI)\t"
	}
	fmt.Fprintln(tw, head)
	var remote int64
	for _, a := range d.APIs {
		owner := "-"
		if len(a.Owners) > 0 {
			o := a.Owners[0]
			owner = fmt.Sprintf("%s (%d)", Printable(o.Service+" "+o.Operation), o.OwnedFailures)
		}
		remote += a.RemoteParentTraces
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\t%d/%d\t%.1f\t%d\t%d\t%d\t%s\t",
			Printable(a.API), a.Traces, a.RootErrors, a.FailedTraces, a.MaxRadius, a.MeanRadius, a.PotentialRadius, a.PotentialWithout,
			a.MaxAmplification, a.SuppressedRetries, a.SpuriousRequestsPrevented, a.MisattributedErrors, owner)
		if sampled {
			r := a.Sampling.FailedTraceRate
			fmt.Fprintf(tw, "%d\t%.1f (%.1f–%.1f)\t", a.Sampling.TracesReceived, 100*r.Estimate, 100*r.Low, 100*r.High)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(d.APIs) > 0 {
		fmt.Fprintln(ew, "ROOT ERRORS: requests that failed at the root API (what its callers saw).")
		fmt.Fprintln(ew, "W/ FAILURE: traces with a failure event anywhere, including errors absorbed on the way up.")
		fmt.Fprintln(ew, "MAX R, MEAN R/TRACE: the largest and the mean radius over those traces.")
		fmt.Fprintln(ew, "POTENTIAL R: with ownership / without.")
		if remote > 0 {
			fmt.Fprintf(ew, "%d trace(s) entered from a caller outside the trace (remote parent: a load balancer, a browser, an unsampled client).\n", remote)
		}
	}
}

// Printable returns s unchanged when it is valid UTF-8 made of printable
// characters and plain spaces; otherwise it returns s quoted as a Go string
// ("\x1b[31m", "a\x00b", "\xff"), so that control characters, escape
// sequences, invisible format characters (bidirectional overrides) and
// invalid bytes — tabwriter's escape byte 0xff among them — are shown, not
// acted on.
func Printable(s string) string {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
		i += n
	}
	return s
}

func percent(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

// errWriter remembers the first write error so that a table's many writes
// need one check.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	if _, err := e.w.Write(p); err != nil {
		e.err = err
	}
	return len(p), nil
}
