package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/store"
)

// errNoSpans: the source's range held no span.
var errNoSpans = errors.New("no spans")

// readSource reads, for analyze --source, the spans of the table dsn names
// that start in the analysis windows rng touches (a trace's figures
// depend on its whole window, docs/SPEC.md §4.3: analyze of a file reads
// them all too), widened by slack on both sides (a trace crossing a
// window's ends is read whole, and counted by its start), calling emit
// with them.
func readSource(ctx context.Context, dsn string, window, slack time.Duration, rng store.Query, cfg ingest.DecoderConfig,
	log *slog.Logger, emit func([]graph.Span) error) (*loaded, error) {
	src, err := chsource.Open(ctx, dsn, os.Getenv(chsource.PasswordEnv), log)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	end := time.Now().UnixNano()
	if rng.To != 0 {
		end = rng.To
	}
	w := int64(window)
	from := time.Unix(0, analysis.WindowOf(rng.From, window)*w).Add(-slack)
	to := time.Unix(0, (analysis.WindowOf(end-1, window)+1)*w).Add(slack)
	st, err := src.Read(ctx, from, to, ingest.NewDecoder(cfg), emit)
	if err != nil {
		return nil, err
	}
	if st.Spans == 0 {
		return nil, fmt.Errorf("%w in %s with a Timestamp from %s to %s (the range's --window widened by --source-slack %v)", errNoSpans, src.Name(),
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), slack)
	}
	return &loaded{spans: int(st.Spans), requests: 1, bad: int(st.Bad)}, nil
}
