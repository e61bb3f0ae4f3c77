package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/store"
)

// SourcePasswordEnv holds the source's ClickHouse password when its DSN
// has none (nor a password_file): never a flag.
const SourcePasswordEnv = "STORMRADIUS_SOURCE_PASSWORD"

// errNoSpans: the source's range held no span.
var errNoSpans = errors.New("no spans")

// readSource reads, for analyze --source, the spans of the table dsn names
// whose start is in rng widened by slack on both sides (a trace that
// starts in the range has spans before its root's start only by clock
// skew, and spans after the range's end; one that starts before it must
// be read whole to be told apart), calling emit with them.
func readSource(ctx context.Context, dsn string, slack time.Duration, rng store.Query, cfg ingest.DecoderConfig,
	log *slog.Logger, emit func([]graph.Span) error) (*loaded, error) {
	src, err := chsource.Open(ctx, dsn, os.Getenv(SourcePasswordEnv), log)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	from, to := time.Unix(0, rng.From).Add(-slack), time.Now().Add(slack)
	if rng.To != 0 {
		to = time.Unix(0, rng.To).Add(slack)
	}
	st, err := src.Read(ctx, from, to, ingest.NewDecoder(cfg), emit)
	if err != nil {
		return nil, err
	}
	if st.Spans == 0 {
		return nil, fmt.Errorf("%w in %s with a Timestamp from %s to %s (the range widened by --source-slack %v)", errNoSpans, src.Name(),
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), slack)
	}
	return &loaded{spans: int(st.Spans), requests: 1, bad: int(st.Bad)}, nil
}
