// Package pipeline owns the stream and all its concurrency: it admits the
// spans receivers decoded, writes them durably (group commit) before they
// are acknowledged, holds them per trace until the trace is idle, assembles
// and evaluates each trace against its window, keeps the window states,
// re-evaluates the stored records a window change made stale, and stores
// records, rollups, states and summaries through a store.Store. See
// docs/ARCHITECTURE.md.
//
// Three goroutines do the work: the writer (span writes), the analyser
// (flushes, evaluation, store batches: it alone owns the window states) and
// a retention loop; each store batch is applied on a goroutine of its own
// while the analyser computes the next (one in flight), and on a store
// whose span writes can overlap each is committed on a goroutine of its
// own while the writer starts the next (SpanWritesInFlight), and finished
// in order by a goroutine of the writer's. Receivers call Consume from any
// number of goroutines.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// Config configures a Pipeline. Zero fields take the documented defaults.
type Config struct {
	// Analysis holds the analysis rules, including the window length
	// (default 1 h).
	Analysis analysis.Config
	// TraceIdle: a trace is analysed once no span of it arrived for this
	// long (default 5 s).
	TraceIdle time.Duration
	// MaxTraceAge: a trace is analysed at the latest this long after its
	// first span arrived, even if spans keep coming (default 1 min).
	MaxTraceAge time.Duration
	// MaxInflightSpans bounds the spans held in memory: being written plus
	// waiting for their trace to be analysed (default 1,000,000). Past 80%
	// of it, the oldest traces are analysed early; past it, Consume
	// refuses with ErrBackpressure.
	MaxInflightSpans int
	// MaxWriteSpans bounds one group-committed span write (default 50,000).
	MaxWriteSpans int
	// SpanWritesInFlight is how many group-committed span writes may be
	// in flight at once (default 2): requests arriving while they are
	// being made durable form the next. A store whose writes cannot
	// overlap (not a store.SpanWriteStarter: the embedded store, one
	// writer connection) writes one at a time whatever it says.
	SpanWritesInFlight int
	// Tick is how often idle traces are looked for (default TraceIdle/10,
	// at least 10 ms, at most 1 s).
	Tick time.Duration
	// SummaryInterval is how often changed windows' summaries are stored
	// (default 1 s).
	SummaryInterval time.Duration
	// Retention: data that started longer ago is deleted, checked hourly
	// (default 7 days; negative keeps everything).
	Retention time.Duration
	// PeerRefresh, when positive, makes the pipeline one partition's
	// analyser (its store a store.PartitionStore view): every PeerRefresh
	// it reads the window states the other partitions stored, adds them
	// to its own, and evaluates again its records that a changed edge
	// class made stale (docs/ARCHITECTURE.md, "Scaling out").
	PeerRefresh time.Duration
	// OnSplit, when set, is told of every trace a partition's analyser
	// (PeerRefresh) set aside because another partition wrote spans of it
	// too (store.Routing), with that partition's name, once the record
	// that sets it aside is stored.
	OnSplit func(id graph.TraceID, other string)
	// SkipMaintenance: retention and compaction are run by someone else
	// (a process analysing several partitions runs them once).
	SkipMaintenance bool
	// Logger (slog.Default() when nil) and Registerer (no metrics when nil).
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now returns the current time (time.Now when nil); tests move it.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Analysis.Window <= 0 {
		c.Analysis.Window = analysis.DefaultWindow
	}
	if c.TraceIdle <= 0 {
		c.TraceIdle = 5 * time.Second
	}
	if c.MaxTraceAge <= 0 {
		c.MaxTraceAge = time.Minute
	}
	if c.MaxInflightSpans <= 0 {
		c.MaxInflightSpans = 1_000_000
	}
	if c.MaxWriteSpans <= 0 {
		c.MaxWriteSpans = 50_000
	}
	if c.SpanWritesInFlight <= 0 {
		c.SpanWritesInFlight = 2
	}
	if c.Tick <= 0 {
		c.Tick = min(max(c.TraceIdle/10, 10*time.Millisecond), time.Second)
	}
	if c.SummaryInterval <= 0 {
		c.SummaryInterval = time.Second
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// DefaultRetention is how long data is kept unless Config.Retention says.
const DefaultRetention = 7 * 24 * time.Hour

// Pipeline is the streaming analysis. Create it with New, start it with
// Run, feed it with Consume.
type Pipeline struct {
	cfg   Config
	st    store.Store
	peers store.Peers // nil unless PeerRefresh is set
	// routing finds the traces other partitions wrote spans of too: nil
	// unless PeerRefresh is set (one partition's analyser).
	routing store.Routing
	log     *slog.Logger
	m       *metrics

	inflight atomic.Int64 // spans admitted and not yet analysed
	writes   chan *writeReq

	mu      sync.Mutex // guards pending
	pending pendingSet

	flushReq chan flushReq // Flush asks the analyser to flush everything
	an       *analyser     // owned by the analyser goroutine

	closed   atomic.Bool
	handover atomic.Bool // see HandOver
	started  chan struct{}
	done     chan struct{}
}

type flushReq struct {
	done chan error
}

// New returns a pipeline over st. Call Run to start it.
func New(st store.Store, cfg Config) *Pipeline {
	// The store knows the window its data was analysed with (it refused
	// to open with another one): figures only mean something in it.
	cfg.Analysis.Window = st.Window()
	cfg.defaults()
	p := &Pipeline{
		cfg:      cfg,
		st:       st,
		log:      cfg.Logger,
		m:        newMetrics(cfg.Registerer),
		writes:   make(chan *writeReq, 1024),
		flushReq: make(chan flushReq),
		started:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	if pr, ok := st.(store.Peers); ok && cfg.PeerRefresh > 0 {
		p.peers = pr
		p.routing, _ = st.(store.Routing)
	}
	p.pending.init()
	p.an = newAnalyser(p)
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stormradius_write_queue_requests",
			Help: "Receiver requests waiting for the group-committed span write."}, func() float64 { return float64(len(p.writes)) }))
		cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stormradius_spans_inflight",
			Help: "Spans admitted and not yet analysed (write queue and pending traces); past --max-inflight-spans receivers answer 503."},
			func() float64 { return float64(p.inflight.Load()) }))
	}
	return p
}

// Consume stores spans durably and queues them for analysis (Consumer).
// It returns an error wrapping ErrBackpressure when too many spans
// are in flight, store.ErrUnavailable when the store failed, and ctx's
// error when the caller gave up (the spans may still be stored and
// analysed: at least once).
func (p *Pipeline) Consume(ctx context.Context, spans []graph.Span) error {
	if len(spans) == 0 {
		return nil
	}
	if p.closed.Load() {
		return fmt.Errorf("pipeline: %w", store.ErrClosed)
	}
	n := int64(len(spans))
	// A request larger than the whole budget is let in when nothing else
	// is in flight, so that it can ever be accepted.
	if cur := p.inflight.Add(n); cur > int64(p.cfg.MaxInflightSpans) && cur != n {
		p.inflight.Add(-n)
		p.m.rejected.WithLabelValues("backpressure").Add(float64(n))
		return fmt.Errorf("pipeline: %d spans in flight: %w", cur-n, ErrBackpressure)
	}
	req := &writeReq{spans: spans, done: make(chan error, 1)}
	select {
	case p.writes <- req:
	case <-ctx.Done():
		p.inflight.Add(-n)
		return ctx.Err()
	case <-p.done:
		p.inflight.Add(-n)
		return fmt.Errorf("pipeline: %w", store.ErrClosed)
	}
	// Once queued, the write is waited for even if the caller gives up:
	// the writer reads the caller's slice, which must not be reused before
	// Consume returns (Consumer). Writes are bounded (30 s).
	err := <-req.done
	if err == nil && ctx.Err() != nil {
		return ctx.Err() // stored, but the caller asked to stop waiting
	}
	return err
}

// Saturated reports whether Consume would refuse any spans now
// (Saturated): the spans in flight already fill the budget.
func (p *Pipeline) Saturated() bool {
	return p.inflight.Load() >= int64(p.cfg.MaxInflightSpans)
}

// Run starts the pipeline: it recovers what the store holds beyond its
// checkpoint, then writes, analyses and applies retention until ctx ends;
// then it stops accepting spans, analyses every pending trace, stores the
// summaries and returns. The store is not closed.
func (p *Pipeline) Run(ctx context.Context) error {
	defer close(p.done)
	if err := p.recover(ctx); err != nil {
		return err
	}
	close(p.started)
	var wg sync.WaitGroup
	wctx, stopWriter := context.WithCancel(context.Background())
	wg.Add(1)
	go func() { defer wg.Done(); p.writer(wctx) }()
	rctx, stopRetention := context.WithCancel(ctx)
	wg.Add(1)
	go func() { defer wg.Done(); p.retention(rctx) }()

	err := p.an.run(ctx)

	// Shut down: refuse new spans, let the writer finish what it accepted,
	// then analyse everything pending.
	p.closed.Store(true)
	stopRetention()
	stopWriter()
	wg.Wait()
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p.handover.Load() {
		// The batch in flight is stored and the summaries with it; what
		// is pending stays in the store, beyond the checkpoint.
		if ferr := errors.Join(p.an.finish(fctx), p.an.storeSummaries(fctx)); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return err
	}
	if ferr := p.an.flushAll(fctx, fctx, "shutdown"); ferr != nil {
		err = errors.Join(err, ferr)
	}
	return err
}

// HandOver makes the pipeline, when its Run's context ends, leave the
// traces still pending in the store for the partition's next owner (which
// recovers them from the checkpoint) instead of analysing them: a
// rebalance then hands a partition over at once. Nothing is lost: their
// spans are stored. Call it before ending Run's context.
func (p *Pipeline) HandOver() { p.handover.Store(true) }

// Started is closed once recovery is done and the pipeline accepts spans.
func (p *Pipeline) Started() <-chan struct{} { return p.started }

// Flush analyses every pending trace now and stores the window summaries:
// once it returns, the store answers for every span consumed before it was
// called. One partition's pipeline (PeerRefresh) also reads the other
// partitions' window states first: once every partition is quiet and has
// been flushed twice, in turn, every stored result is a single analyser's. Tests and `report` after a load use it; idle traces are flushed
// on their own.
func (p *Pipeline) Flush(ctx context.Context) error {
	req := flushReq{done: make(chan error, 1)}
	select {
	case p.flushReq <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return fmt.Errorf("pipeline: %w", store.ErrClosed)
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// compactAfter is how long after a UTC day ends it is compacted.
const compactAfter = 2 * time.Hour

// retention runs Maintain unless someone else does.
func (p *Pipeline) retention(ctx context.Context) {
	if p.cfg.SkipMaintenance {
		return
	}
	Maintain(ctx, p.st, p.cfg.Retention, p.cfg.Now, p.log)
}

// Maintain deletes data older than retention (0: DefaultRetention) every
// hour (unless retention is negative: kept forever), and settles the days that closed
// (store.Compactor), until ctx ends. A pipeline runs it over its store; a
// process that analyses only partitions runs it once over the store.
func Maintain(ctx context.Context, st store.Store, retention time.Duration, now func() time.Time, log *slog.Logger) {
	if retention == 0 {
		retention = DefaultRetention
	}
	c, compacts := st.(store.Compactor)
	if retention < 0 && !compacts {
		return
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		now := now()
		if retention >= 0 {
			if err := st.DeleteBefore(ctx, now.Add(-retention).UnixNano()); err != nil && ctx.Err() == nil {
				log.Warn("retention", "err", err)
			}
		}
		// Days that closed a while ago (late spans are rare by then).
		if compacts {
			if err := c.Compact(ctx, now.Add(-compactAfter).UnixNano()); err != nil && ctx.Err() == nil {
				log.Warn("compact", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
