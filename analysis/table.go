package analysis

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes a readable summary of the document: the fleet, one row
// per root API, the top owners, the claim integrity of services and the
// fail-open edges.
func (d *Document) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "%d spans, %d traces, %d fragments, %d root APIs (%d with failures)\n",
		d.Spans, d.Traces, d.Fragments, d.Fleet.APIs, d.Fleet.FailedAPIs)
	fmt.Fprintf(ew, "fleet: max radius %d, mean radius %.2f; potential radius max %d (without ownership %d); spurious requests prevented %d\n\n",
		d.Fleet.MaxRadius, d.Fleet.MeanRadius, d.Fleet.MaxPotentialRadius, d.Fleet.MaxPotentialWithout, d.Fleet.SpuriousRequestsPrevented)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "API\tTRACES\tFAILED\tMAX R\tMEAN R\tPOTENTIAL R\tMAX AMP\tSUPPRESSED\tSPURIOUS\tMISATTR\tTOP OWNER\t")
	for _, a := range d.APIs {
		owner := "-"
		if len(a.Owners) > 0 {
			o := a.Owners[0]
			owner = fmt.Sprintf("%s %s (%d)", o.Service, o.Operation, o.OwnedFailures)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%d/%d\t%.1f\t%d\t%d\t%d\t%s\t\n",
			a.API, a.Traces, a.FailedTraces, a.MaxRadius, a.MeanRadius, a.PotentialRadius, a.PotentialWithout,
			a.MaxAmplification, a.SuppressedRetries, a.SpuriousRequestsPrevented, a.MisattributedErrors, owner)
	}
	tw.Flush()

	if len(d.Services) > 0 {
		fmt.Fprintln(ew, "\nclaim integrity (failed hops):")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "SERVICE\tCORRECT\tFALSE CLAIM\tFALSE UNCLAIM\tMISSING\tINVALID\tMISATTR\tCTX DROPS\tOWNED\tLOAD AVOIDED\t")
		for _, s := range d.Services {
			if s.Virtual {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.Service,
				s.Claims.Correct, s.Claims.FalseClaim, s.Claims.FalseUnclaim, s.Claims.Missing, s.Claims.Invalid,
				s.MisattributedErrors, s.ContextDrops, s.OwnedFailures, percent(s.LoadIncreaseAvoided))
		}
		tw.Flush()
	}

	var open []string
	for _, e := range d.Edges {
		if e.FailOpen {
			open = append(open, fmt.Sprintf("%s -> %s (%s)", e.Caller, e.Callee, e.FailOpenSource))
		}
	}
	if len(open) > 0 {
		fmt.Fprintf(ew, "\nfail-open edges: %s\n", strings.Join(open, ", "))
	}
	return ew.err
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
