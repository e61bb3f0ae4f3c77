package kafka

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/pipeline"
)

// Receiver consumes a topic the kafka exporter writes as one member of a
// consumer group, and feeds the spans to a pipeline.Consumer, committing
// offsets only for what the store accepted.
type Receiver struct {
	cfg   Config
	next  pipeline.Consumer // one consumer for every partition; or
	parts Partitions        // one per partition (partitioned.go)
	log   *slog.Logger
	m     *metrics
	watch *connWatch // whether the brokers accept our connection

	running atomic.Bool
}

// worker consumes records into batches for one consumer: the group's
// (Receiver.next) or one partition's. Its fields are its goroutine's.
type worker struct {
	r    *Receiver
	next pipeline.Consumer
	log  *slog.Logger
	dec  *ingest.Decoder

	// Bad and empty records are logged at most once a second: a topic
	// full of another encoding would otherwise log every record.
	badLogged time.Time
	badQuiet  int

	spanHint int // spans in the last batch: the next batch's capacity
}

func (r *Receiver) newWorker(next pipeline.Consumer, log *slog.Logger) *worker {
	return &worker{r: r, next: next, log: log, dec: ingest.NewDecoder(ingest.DecoderConfig{ClaimHeader: r.cfg.ClaimHeader, SamplingConfig: r.cfg.Sampling})}
}

// source is where a worker reads records and commits their offsets: the
// group's reader, or one partition's reader and its generation.
type source interface {
	FetchMessage(ctx context.Context) (kafkago.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafkago.Message) error
}

// NewReceiver returns a Receiver that reads the topic cfg names and feeds
// next. It checks cfg and registers the metrics; it does not connect (Run
// does).
func NewReceiver(cfg Config, next pipeline.Consumer) (*Receiver, error) {
	if next == nil {
		return nil, errors.New("kafka: no consumer to feed")
	}
	return newReceiver(cfg, next, nil)
}

func newReceiver(cfg Config, next pipeline.Consumer, parts Partitions) (*Receiver, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rc := cfg.readerConfig()
	if err := rc.Validate(); err != nil { // kafka-go panics on what Validate rejects
		return nil, fmt.Errorf("kafka: config: %w", err)
	}
	m, err := newMetrics(cfg.Topic, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	if d := cfg.Dialer; d != nil && d.TLS != nil && d.TLS.InsecureSkipVerify {
		m.insecure.Set(1)
		cfg.Logger.Warn("kafka: the brokers' TLS certificates are not verified (--kafka-tls-insecure-skip-verify): anyone on the path can read and change the traces")
	}
	r := &Receiver{
		cfg:   cfg,
		next:  next,
		parts: parts,
		log:   cfg.Logger.With("topic", cfg.Topic, "group", cfg.GroupID),
		m:     m,
	}
	r.watch = newConnWatch(r)
	r.cfg.clientError = r.watch.clientError
	return r, nil
}

// Run joins the group and consumes until ctx ends, then leaves the group and
// returns nil. It starts the client once a broker accepts the connection
// (TCP, TLS, Kafka, SASL, a metadata request): until then, and whenever
// the client reports an error later, it checks the brokers; while they
// refuse, it logs why once, counts each failed check in
// stormradius_kafka_connection_errors_total, tells Config.Health what to
// fix, and checks again with backoff (ConnMinBackoff doubling to
// ConnMaxBackoff). Nothing is fetched or committed before a broker accepts
// the connection. A batch that was fetched but not yet accepted by the
// store when ctx ends is not committed: it is read again after a restart
// (by this or another member). Run returns an error only when the store
// fails in a way it does not say is temporary (not ErrBackpressure,
// ErrUnavailable or a timeout); that batch is not committed either. Run
// may be called once.
func (r *Receiver) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("kafka: Run called more than once")
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { r.watch.run(watchCtx) })
	defer func() {
		stopWatch()
		watching.Wait()
	}()
	if !r.watch.waitOK(ctx) {
		return nil
	}
	if r.parts != nil {
		return r.runPartitions(ctx)
	}
	rd := kafkago.NewReader(r.cfg.readerConfig())
	probeCtx, stopProbe := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.probe(probeCtx, func() int64 { return rd.Stats().Rebalances }) })
	defer func() {
		stopProbe()
		wg.Wait()
		// Close leaves the group, so that the partitions move to the
		// other members at once rather than after the session timeout.
		_ = rd.Close() // kafka-go's Close never fails
	}()
	r.log.Info("kafka: consuming", "brokers", strings.Join(r.cfg.Brokers, ","), "encoding", string(r.cfg.Encoding))
	return r.newWorker(r.next, r.log).consume(ctx, rd)
}

// consume delivers batches of src's records until ctx ends (nil) or the
// consumer refuses a batch for good (its error).
func (w *worker) consume(ctx context.Context, src source) error {
	for {
		b := w.newBatch()
		err := w.fill(ctx, src, b)
		if err == nil {
			err = w.deliver(ctx, b)
		}
		if err != nil {
			if ctx.Err() != nil {
				if b.n > 0 {
					w.log.Info("kafka: stopping; the last batch was not committed and will be read again",
						"records", b.n, "offsets", b.offsets())
				}
				return nil
			}
			return err
		}
		w.commit(ctx, src, b)
	}
}

// batch is what one Consume call and one commit cover.
type batch struct {
	spans []graph.Span
	n     int // records
	bytes int // record value bytes
	// last holds, per partition, the batch's last record (without its
	// value): committing it commits every record before it.
	last []kafkago.Message
	// first holds the offset of the batch's first record of each
	// partition in last, for logs.
	first []int64
}

func (w *worker) newBatch() *batch {
	return &batch{spans: make([]graph.Span, 0, w.spanHint)}
}

// mark records m as the last record of its partition in the batch. Records
// of one partition arrive in offset order.
func (b *batch) mark(m kafkago.Message) {
	m.Key, m.Value, m.Headers = nil, nil, nil // the batch keeps offsets, not payloads
	for i := range b.last {
		if b.last[i].Partition == m.Partition && b.last[i].Topic == m.Topic {
			b.last[i] = m
			return
		}
	}
	b.last = append(b.last, m)
	b.first = append(b.first, m.Offset)
}

// offsets describes the batch's offsets, "partition:first-last,...".
func (b *batch) offsets() string {
	var s strings.Builder
	for i, m := range b.last {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(strconv.Itoa(m.Partition))
		s.WriteByte(':')
		s.WriteString(strconv.FormatInt(b.first[i], 10))
		if m.Offset != b.first[i] {
			s.WriteByte('-')
			s.WriteString(strconv.FormatInt(m.Offset, 10))
		}
	}
	return s.String()
}

// fill fetches records into b until it is full (records, bytes or spans)
// or MaxBatchWait has passed since its first record. It waits for the first
// record as long as it takes (an idle topic is not an error) and returns an
// error only when ctx ends.
func (w *worker) fill(ctx context.Context, rd source, b *batch) error {
	r := w.r
	m, err := w.fetchFirst(ctx, rd)
	if err != nil {
		return err
	}
	w.add(b, m)
	bctx, cancel := context.WithTimeout(ctx, r.cfg.MaxBatchWait)
	defer cancel()
	for b.n < r.cfg.MaxBatchMessages && b.bytes < r.cfg.MaxBatchBytes && len(b.spans) < r.cfg.MaxBatchSpans {
		m, err := rd.FetchMessage(bctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if bctx.Err() == nil {
				// A failed fetch, not the batch's deadline: deliver
				// what we have; the next fetchFirst retries.
				w.fetchFailed(err)
			}
			return nil
		}
		w.add(b, m)
	}
	return nil
}

// fetchFirst returns the next record, retrying failed fetches with backoff
// (the broker or the group coordinator may be away: the client reconnects
// and rejoins by itself) until ctx ends.
func (w *worker) fetchFirst(ctx context.Context, rd source) (kafkago.Message, error) {
	r := w.r
	backoff := r.cfg.MinBackoff
	for {
		m, err := rd.FetchMessage(ctx)
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return m, ctx.Err()
		}
		if errors.Is(err, io.EOF) {
			return m, fmt.Errorf("kafka: fetch: reader closed: %w", err)
		}
		w.fetchFailed(err)
		if !sleep(ctx, jitter(backoff)) {
			return m, ctx.Err()
		}
		backoff = min(2*backoff, r.cfg.MaxBackoff)
	}
}

func (w *worker) fetchFailed(err error) {
	w.r.m.fetchErrors.Inc()
	level := slog.LevelWarn
	if w.r.watch.clientError() {
		level = slog.LevelDebug // the connection failure is reported, once
	}
	w.log.Log(context.Background(), level, "kafka: fetch failed; retrying", "err", err)
}

// add decodes m into b. A record that does not decode is counted, logged and
// kept in the batch's offsets: it is committed with the batch, because it
// will never decode, and holding the partition back for it would stop it.
func (w *worker) add(b *batch, m kafkago.Message) {
	r := w.r
	r.m.messages.Inc()
	r.m.bytes.Add(float64(len(m.Value)))
	b.n++
	b.bytes += len(m.Value)
	json := r.cfg.Encoding == EncodingJSON || (len(m.Value) > 0 && m.Value[0] == '{')
	spans, err := w.dec.AppendRequest(b.spans, m.Value, json)
	switch {
	case err != nil:
		r.m.bad.Inc()
		w.logRecord(m, json, "kafka: skipping a record that is not an OTLP trace request", err)
	case len(spans) == len(b.spans):
		// Valid but empty. The exporter never writes an empty export, so
		// this is most likely another payload that happens to parse (a
		// Jaeger JSON span has no OTLP field): say so, once in a while.
		r.m.empty.Inc()
		w.logRecord(m, json, "kafka: a record holds no span; is the topic written with another encoding or signal?", nil)
	default:
		b.spans = spans
	}
	b.mark(m)
}

// logRecord logs a record that gave no span, at most once a second.
func (w *worker) logRecord(m kafkago.Message, json bool, msg string, err error) {
	now := time.Now()
	if now.Sub(w.badLogged) < time.Second {
		w.badQuiet++
		return
	}
	enc := EncodingProto
	if json {
		enc = EncodingJSON
	}
	args := []any{"partition", m.Partition, "offset", m.Offset, "bytes", len(m.Value), "read_as", string(enc)}
	if err != nil {
		args = append(args, "err", err)
	}
	if len(m.Key) > 0 {
		args = append(args, "key", printableKey(m.Key))
	}
	if w.badQuiet > 0 {
		args = append(args, "records_not_logged", w.badQuiet)
	}
	w.log.Warn(msg, args...)
	w.badLogged, w.badQuiet = now, 0
}

// printableKey returns a record key for a log: as it is when it is short
// text (the exporter's keys are trace ids in hex), else its first bytes in
// hex.
func printableKey(k []byte) string {
	if len(k) <= 64 && utf8.Valid(k) {
		return string(k)
	}
	if len(k) > 32 {
		return hex.EncodeToString(k[:32]) + "…"
	}
	return hex.EncodeToString(k)
}

// deliver offers b's spans to the store until it accepts them. A refusal it
// says is temporary (backpressure, an outage, a timeout) pauses
// consumption: the same spans are offered again after a capped exponential
// backoff, and nothing more is fetched meanwhile, so Kafka holds the backlog.
// It returns ctx's error when ctx ends, and a refusal that is not temporary.
func (w *worker) deliver(ctx context.Context, b *batch) error {
	r := w.r
	defer func() { w.spanHint = len(b.spans) }()
	if len(b.spans) == 0 {
		return nil // only bad or empty records: nothing to store, commit them
	}
	backoff := r.cfg.MinBackoff
	var pausedAt, counted time.Time // counted: paused time up to here is in the metric
	var logged time.Time            // the last pause log
	refusals := 0
	defer func() {
		if !pausedAt.IsZero() {
			r.m.pausedSeconds.Add(time.Since(counted).Seconds())
			r.m.paused.Set(0)
		}
	}()
	for {
		err := w.next.Consume(ctx, b.spans)
		if err == nil {
			r.m.spans.Add(float64(len(b.spans)))
			r.m.batches.Inc()
			if !pausedAt.IsZero() {
				w.log.Info("kafka: resuming consumption: the store accepted the batch",
					"paused", time.Since(pausedAt).Round(time.Millisecond).String(), "refusals", refusals)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		reason := retryReason(err)
		if reason == "" {
			return fmt.Errorf("kafka: store refused a batch of %d records (offsets %s): %w", b.n, b.offsets(), err)
		}
		r.m.retries.WithLabelValues(reason).Inc()
		refusals++
		switch {
		case pausedAt.IsZero():
			pausedAt = time.Now()
			counted, logged = pausedAt, pausedAt
			r.m.paused.Set(1)
			w.log.Warn("kafka: pausing consumption: the store refused a batch; offering it again with backoff",
				"reason", reason, "err", err, "records", b.n, "spans", len(b.spans), "offsets", b.offsets())
		case time.Since(logged) >= stillPausedLogInterval:
			logged = time.Now()
			w.log.Warn("kafka: consumption still paused: the store keeps refusing the batch",
				"reason", reason, "err", err, "refusals", refusals,
				"paused", time.Since(pausedAt).Round(time.Second).String(), "offsets", b.offsets())
		}
		if !sleep(ctx, jitter(backoff)) {
			return ctx.Err()
		}
		// Count the pause as it goes, so that a scrape during a long
		// outage sees it grow.
		now := time.Now()
		r.m.pausedSeconds.Add(now.Sub(counted).Seconds())
		counted = now
		backoff = min(2*backoff, r.cfg.MaxBackoff)
	}
}

// stillPausedLogInterval spaces the logs of a long pause.
const stillPausedLogInterval = 30 * time.Second

// retryReason returns why err is worth retrying the same batch for, or ""
// when it is not. It is called only while Run's ctx is alive, so a deadline
// error is the store's own timeout, not ours.
func retryReason(err error) string {
	switch {
	case errors.Is(err, pipeline.ErrBackpressure):
		return reasonBackpressure
	case errors.Is(err, pipeline.ErrUnavailable):
		return reasonUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return reasonTimeout
	}
	return ""
}

// commit commits b's offsets. The spans are durable by now, so the commit
// is made even when ctx has just ended (bounded by CommitTimeout): it saves
// reading the batch again. A failed commit is counted and logged, not
// retried: a later commit of the same partition covers these offsets too,
// and at worst the records are read again (the store keeps each span once).
func (w *worker) commit(ctx context.Context, rd source, b *batch) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.r.cfg.CommitTimeout)
	defer cancel()
	if err := rd.CommitMessages(cctx, b.last...); err != nil {
		w.r.m.commitErrors.Inc()
		w.log.Warn("kafka: commit failed; these records will be read again after a restart or rebalance",
			"err", err, "offsets", b.offsets())
	}
}

// jitter spreads d by ±20%, so that ingesters refused at the same moment do
// not all come back at the same moment.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// sleep waits d or until ctx ends; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
