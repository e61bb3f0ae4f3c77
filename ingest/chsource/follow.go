package chsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
)

// Defaults of FollowConfig.
const (
	DefaultLag  = 2 * time.Minute
	DefaultPoll = 5 * time.Second
	DefaultStep = time.Minute
)

// FollowConfig configures Follow.
type FollowConfig struct {
	// Lag: rows whose Timestamp (their span's start) is older than now −
	// Lag are taken to be all inserted. It must cover a span's duration
	// and the collector's batching and queue (default 2 min): a row
	// inserted later than that behind the position is not read.
	Lag time.Duration
	// Poll is how often the table is read (default 5 s); Step the most
	// one read covers (default 1 min): a backlog is read step by step,
	// each stored and its position kept before the next.
	Poll, Step time.Duration
	// Start is where a partition without a position starts (zero: now −
	// Lag, the new rows alone).
	Start time.Time
	// Shard and Shards: this follower reads the traces whose
	// cityHash64(TraceId) % Shards is Shard (Shards 0 or 1: every trace).
	Shard, Shards int
	// Decoder configures the span conventions.
	Decoder ingest.DecoderConfig
	// Health, when set, hears of a failing read (Fail "source") and of its
	// end (Clear).
	Health interface {
		Fail(key, msg string)
		Clear(key string)
	}
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// HealthKey is the key of the source's problems in /readyz.
const HealthKey = "source"

// PartitionName is the store partition that follows shard of shards of
// the table: a name per table and shard, the shard count in it (a
// different count reads other traces).
func (s *Source) PartitionName(shard, shards int) string {
	if shards <= 1 {
		return "source:" + s.Name()
	}
	return fmt.Sprintf("source:%s:%d/%d", s.Name(), shards, shard)
}

// Follow reads the table until ctx ends: from the partition's position
// (pos; cfg.Start without one) up to now − Lag, step by step, every Poll.
// Each step's spans go to consume — the pipeline's Consume, which returns
// once they are stored; its backpressure is waited out — and only then is
// the position set to the step's end: a restart reads again from it, and
// what it reads again is stored once per (trace, span id). Failing reads
// are retried with backoff (1 s, doubling to 30 s), said once in the log
// and in Health. It returns nil when ctx ends.
func (s *Source) Follow(ctx context.Context, cfg FollowConfig, pos store.SourcePositions,
	consume func(context.Context, []graph.Span) error) error {
	f, err := s.newFollower(ctx, cfg, pos, consume)
	if err != nil {
		return err
	}
	return f.run(ctx)
}

type follower struct {
	s       *Source
	cfg     FollowConfig
	pos     store.SourcePositions
	consume func(context.Context, []graph.Span) error
	dec     *ingest.Decoder
	at      time.Time    // the position
	atNanos atomic.Int64 // at, for the metric (read by the scrape's goroutine)
	failing string       // the failure said, "" when none
	m       followMetrics
	// read are the steps read in this run, to be counted again once
	// another lag has passed: rows inserted since were late.
	read     []step
	lateSaid bool
}

// step is a range of the table read, when (by the follower's clock), and
// how many rows it held then.
type step struct {
	from, to, readAt time.Time
	rows             int64
}

type followMetrics struct {
	rows, spans, bad, errors, late prometheus.Counter
}

func (s *Source) newFollower(ctx context.Context, cfg FollowConfig, pos store.SourcePositions,
	consume func(context.Context, []graph.Span) error) (*follower, error) {
	if cfg.Lag <= 0 {
		cfg.Lag = DefaultLag
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Step <= 0 {
		cfg.Step = DefaultStep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = s.log
	}
	if cfg.Shards > 1 && (cfg.Shard < 0 || cfg.Shard >= cfg.Shards) {
		return nil, fmt.Errorf("source: shard %d of %d: want 0 to %d", cfg.Shard, cfg.Shards, cfg.Shards-1)
	}
	f := &follower{s: s, cfg: cfg, pos: pos, consume: consume, dec: ingest.NewDecoder(cfg.Decoder)}
	labels := prometheus.Labels{"table": s.Name()}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		if cfg.Registerer != nil {
			cfg.Registerer.MustRegister(c)
		}
		return c
	}
	f.m = followMetrics{
		rows:   counter("stormradius_source_rows_total", "Rows read from the source table (rows read again after a restart count again)."),
		spans:  counter("stormradius_source_spans_total", "Spans read from the source table and handed to the pipeline."),
		bad:    counter("stormradius_source_bad_rows_total", "Source rows skipped: a trace or span id that is not hex of its length."),
		errors: counter("stormradius_source_read_errors_total", "Reads of the source table that failed (retried with backoff)."),
		late: counter("stormradius_source_late_rows_total", "Rows inserted into the source table after the position passed them "+
			"(later than --source-lag after their span started): not read. Counted by counting each range read again once another lag has passed."),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stormradius_source_position_seconds",
			Help: "How far the source table was read and stored (unix seconds of its rows' Timestamp).", ConstLabels: labels},
			func() float64 { return float64(f.atNanos.Load()) / 1e9 }))
	}
	v, ok, err := pos.SourcePosition(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("source: %s: reading its position: %w", s.Name(), err)
	case ok:
		f.at = time.Unix(0, v)
	case !cfg.Start.IsZero():
		f.at = cfg.Start
	default:
		f.at = cfg.Now().Add(-cfg.Lag)
	}
	f.atNanos.Store(f.at.UnixNano())
	cfg.Logger.Info("source: following", "table", s.Name(), "from", f.at.UTC(), "resumed", ok, "lag", cfg.Lag,
		"shard", cfg.Shard, "shards", max(cfg.Shards, 1))
	return f, nil
}

func (f *follower) run(ctx context.Context) error {
	backoff := time.Second
	for {
		err := f.catchUp(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := f.cfg.Poll
		if err != nil {
			f.m.errors.Inc()
			f.fail(err)
			wait, backoff = backoff, min(2*backoff, 30*time.Second)
		} else {
			f.ok()
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// catchUp reads, step by step, up to now − Lag, and counts the steps
// read a lag ago again.
func (f *follower) catchUp(ctx context.Context) error {
	if err := f.countLate(ctx); err != nil {
		return err
	}
	for {
		end := f.cfg.Now().Add(-f.cfg.Lag)
		if !f.at.Before(end) {
			return nil
		}
		to := f.at.Add(f.cfg.Step)
		if to.After(end) {
			to = end
		}
		st, err := f.s.read(ctx, f.at, to, f.cfg.Shard, f.cfg.Shards, f.dec, func(spans []graph.Span) error {
			return f.store(ctx, spans)
		})
		f.m.rows.Add(float64(st.Rows))
		f.m.spans.Add(float64(st.Spans))
		f.m.bad.Add(float64(st.Bad))
		if err != nil {
			return err
		}
		if err := f.pos.SetSourcePosition(ctx, to.UnixNano()); err != nil {
			return fmt.Errorf("storing the position: %w", err)
		}
		f.read = append(f.read, step{from: f.at, to: to, readAt: f.cfg.Now(), rows: st.Rows})
		f.at = to
		f.atNanos.Store(to.UnixNano())
	}
}

// maxRecount bounds the steps kept to be counted again (a backlog read in
// one go is counted again in its last steps only).
const maxRecount = 64

// countLate counts again the steps read at least a lag ago: rows they
// hold now that they did not were inserted later than the lag, and are
// not read (a row inserted later still is not counted). Said once in the
// log (with the fix), counted always.
func (f *follower) countLate(ctx context.Context) error {
	if len(f.read) > maxRecount {
		f.read = f.read[len(f.read)-maxRecount:]
	}
	due := f.cfg.Now().Add(-f.cfg.Lag)
	for len(f.read) > 0 && !f.read[0].readAt.After(due) {
		s := f.read[0]
		n, err := f.s.count(ctx, s.from, s.to, f.cfg.Shard, f.cfg.Shards)
		if err != nil {
			return err
		}
		if late := n - s.rows; late > 0 {
			f.m.late.Add(float64(late))
			if !f.lateSaid {
				f.lateSaid = true
				f.cfg.Logger.Warn("source: rows arrived later than --source-lag behind the position and were not read: raise --source-lag",
					"table", f.s.Name(), "late_rows", late, "from", s.from.UTC(), "to", s.to.UTC(), "lag", f.cfg.Lag)
			}
		}
		f.read = f.read[1:]
	}
	return nil
}

// store hands spans to consume, waiting out its backpressure.
func (f *follower) store(ctx context.Context, spans []graph.Span) error {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := f.consume(ctx, spans)
		if !errors.Is(err, pipeline.ErrBackpressure) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (f *follower) fail(err error) {
	msg := fmt.Sprintf("reading %s failed (%v): retrying with backoff; nothing past %s is lost", f.s.Name(), err,
		f.at.UTC().Format(time.RFC3339))
	if f.cfg.Health != nil {
		f.cfg.Health.Fail(HealthKey, msg)
	}
	if e := err.Error(); e != f.failing {
		f.failing = e
		f.cfg.Logger.Warn("source: reading the table failed; retrying with backoff (1 s doubling to 30 s)", "table", f.s.Name(),
			"err", err, "position", f.at.UTC())
	}
}

func (f *follower) ok() {
	if f.failing == "" {
		return
	}
	f.failing = ""
	if f.cfg.Health != nil {
		f.cfg.Health.Clear(HealthKey)
	}
	f.cfg.Logger.Info("source: reading the table works again", "table", f.s.Name(), "position", f.at.UTC())
}
