package query

import (
	"cmp"
	"context"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
)

// Reader is what reports read.
type Reader interface {
	store.Rollups
	Summaries(ctx context.Context, lo, hi int64) ([]*analysis.WindowSummary, error)
}

// Document returns the docs/SPEC.md §5.2 document of the traces q selects, from
// rollups and window summaries alone: per-trace figures from the rollups
// of the minutes in range, edges and potential radius from the summaries
// of the windows those minutes belong to, and the incidents of the range
// (DocumentIncidents). cfg must carry the window length the data was
// analysed with.
//
// Its three reads (rollups, summaries, incidents) run side by side: each
// is a round trip a server spends most of on one core.
func Document(ctx context.Context, r Reader, q store.Query, cfg analysis.Config) (*analysis.Document, error) {
	var d *analysis.Document
	var inc []analysis.IncidentDoc
	err := sideBySide(func() (err error) {
		d, err = DocumentWithout(ctx, r, q, cfg)
		return err
	}, func() (err error) {
		inc, err = DocumentIncidents(ctx, r, q, cfg)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.Incidents = inc
	return d, nil
}

// DocumentWithout is Document without its incidents (an empty list), for
// answers that show the rest of it.
func DocumentWithout(ctx context.Context, r Reader, q store.Query, cfg analysis.Config) (*analysis.Document, error) {
	var rep *analysis.Report
	var sums []*analysis.WindowSummary
	err := sideBySide(func() (err error) {
		rep, err = r.Report(ctx, q)
		return err
	}, func() (err error) {
		if lo, hi := store.WindowRange(q, cfg.Window); lo <= hi {
			sums, err = r.Summaries(ctx, lo, hi)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return rep.Document(sums, cfg), nil
}

// sideBySide runs f and g at the same time and returns f's error, else
// g's.
func sideBySide(f, g func() error) error {
	var gErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		gErr = g()
	}()
	fErr := f()
	<-done
	return cmp.Or(fErr, gErr)
}
