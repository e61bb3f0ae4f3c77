package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/stormradius/stormradius/pipeline"
)

// Partitions starts and stops the analysis of a topic's partitions as the
// consumer group assigns them to this member (docs/ARCHITECTURE.md,
// "Scaling out"): each partition is analysed on its own — its pending
// traces, checkpoint, records and part of every window state — so that any
// number of members share a topic and the figures stay those of one
// analyser. internal/app implements it over a store.Partitioned.
type Partitions interface {
	// Open starts the analysis of partition `partition` of topic and
	// returns once it accepts spans: its lease taken, what its last owner
	// left recovered. While the last owner still holds the partition (it
	// is handing it over, or crashed and its lease has not expired) Open
	// returns an error; the receiver tries again.
	Open(ctx context.Context, topic string, partition int) (Partition, error)
}

// Partition is the analysis of one partition.
type Partition interface {
	pipeline.Consumer
	// Close stops the partition's analysis and releases it. With flush,
	// its pending traces are analysed first (the process is stopping);
	// without, they are left in the store for its next owner, which
	// recovers them (a rebalance: the partition moves at once).
	Close(flush bool) error
}

// NewPartitionedReceiver returns a Receiver that consumes the partitions
// the group assigns to it each into its own analysis, opened through
// parts. It checks cfg and registers the metrics; it does not connect (Run
// does).
func NewPartitionedReceiver(cfg Config, parts Partitions) (*Receiver, error) {
	if parts == nil {
		return nil, errors.New("kafka: no partitions to feed")
	}
	return newReceiver(cfg, nil, parts)
}

// runPartitions is Run for a partitioned Receiver. It joins the group and,
// for every generation, consumes each partition assigned to it on a
// goroutine of its own, from the group's committed offset, into that
// partition's analysis, committing each batch's offsets once the analysis
// accepted it (the spans are stored). A partition's analysis outlives the
// generation when the next one assigns the partition here again: a
// rebalance moves only the partitions that change owner. Those assigned
// elsewhere are closed as soon as the new assignment is known, leaving
// their pending traces to their new owner, which waits for them (Open).
func (r *Receiver) runPartitions(ctx context.Context) error {
	cg, err := kafkago.NewConsumerGroup(r.cfg.groupConfig())
	if err != nil {
		return fmt.Errorf("kafka: consumer group: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { r.probe(runCtx, nil) })
	o := &owned{parts: map[int]Partition{}}
	var fatal error
	var fatalOnce sync.Once
	fail := func(err error) { fatalOnce.Do(func() { fatal = err; stop() }) }
	defer func() {
		stop()
		// Close leaves the group (its generation's goroutines return
		// first), so that the partitions move to the other members at once.
		_ = cg.Close()
		wg.Wait()
		o.keepOnly(r, nil, true)
	}()
	r.log.Info("kafka: consuming, one analysis per partition", "brokers", r.cfg.Brokers, "encoding", string(r.cfg.Encoding))
	backoff := r.cfg.MinBackoff
	for gens := 0; ; {
		gen, err := cg.Next(runCtx)
		if err != nil {
			if runCtx.Err() != nil {
				return fatal
			}
			r.m.fetchErrors.Inc()
			level := slog.LevelWarn
			if r.watch.clientError() {
				level = slog.LevelDebug // the connection failure is reported, once
			}
			r.log.Log(runCtx, level, "kafka: joining the consumer group failed; retrying", "err", err)
			if !sleep(runCtx, jitter(backoff)) {
				return fatal
			}
			backoff = min(2*backoff, r.cfg.MaxBackoff)
			continue
		}
		backoff = r.cfg.MinBackoff
		if gens++; gens > 1 {
			r.m.rebalances.Inc()
		}
		mine := gen.Assignments[r.cfg.Topic]
		ids := make([]int, len(mine))
		for i, a := range mine {
			ids[i] = a.ID
		}
		slices.Sort(ids)
		o.keepOnly(r, ids, false)
		r.log.Info("kafka: partitions assigned", "generation", gen.ID, "partitions", ids)
		for _, a := range mine {
			gen.Start(func(gctx context.Context) {
				if err := r.consumePartition(runCtx, gctx, gen, a, o); err != nil {
					fail(err)
				}
			})
		}
	}
}

// consumePartition consumes partition a until the generation ends (nil)
// or its analysis refuses a batch for good.
func (r *Receiver) consumePartition(ctx, gctx context.Context, gen *kafkago.Generation, a kafkago.PartitionAssignment, o *owned) error {
	log := r.log.With("partition", a.ID)
	p := o.get(a.ID)
	if p == nil {
		var err error
		if p, err = r.openPartition(ctx, gctx, a.ID, log); p == nil {
			return err
		}
		o.put(a.ID, p)
	}
	rc := r.cfg.readerConfig()
	rc.GroupID, rc.Partition = "", a.ID
	rc.HeartbeatInterval, rc.SessionTimeout, rc.RebalanceTimeout, rc.JoinGroupBackoff = 0, 0, 0, 0
	rd := kafkago.NewReader(rc)
	defer rd.Close()
	if err := rd.SetOffset(a.Offset); err != nil {
		return fmt.Errorf("kafka: partition %d: offset %d: %w", a.ID, a.Offset, err)
	}
	src := &partitionSource{Reader: rd, gen: gen, topic: r.cfg.Topic, partition: a.ID}
	return r.newWorker(p, log).consume(gctx, src)
}

// openPartition opens partition id's analysis, trying again while its last
// owner still holds it, until the generation ends (nil, nil).
func (r *Receiver) openPartition(ctx, gctx context.Context, id int, log *slog.Logger) (Partition, error) {
	backoff := r.cfg.MinBackoff
	start := time.Now()
	for tries := 0; ; tries++ {
		// The analysis is opened on the receiver's context: a generation
		// ending half-way must not leave it half open.
		p, err := r.parts.Open(ctx, r.cfg.Topic, id)
		if err == nil {
			if tries > 0 {
				log.Info("kafka: partition's analysis started", "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if tries == 0 || tries%10 == 0 {
			log.Warn("kafka: cannot start the partition's analysis yet (its last owner may still hold it); retrying", "err", err)
		}
		if !sleep(gctx, jitter(backoff)) {
			return nil, nil
		}
		backoff = min(2*backoff, r.cfg.MaxBackoff)
	}
}

// partitionSource reads one partition and commits through the group's
// generation (a reader without a group cannot commit).
type partitionSource struct {
	*kafkago.Reader
	gen       *kafkago.Generation
	topic     string
	partition int
}

// CommitMessages commits the offset after the last of msgs.
func (s *partitionSource) CommitMessages(_ context.Context, msgs ...kafkago.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	next := msgs[len(msgs)-1].Offset + 1
	return s.gen.CommitOffsets(map[string]map[int]int64{s.topic: {s.partition: next}})
}

// owned are the partitions analysed here, across generations.
type owned struct {
	mu    sync.Mutex
	parts map[int]Partition
}

func (o *owned) get(id int) Partition {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.parts[id]
}

func (o *owned) put(id int, p Partition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.parts[id] = p
}

// keepOnly closes the partitions not in ids: handing them over, or with
// flush analysing their pending traces first.
func (o *owned) keepOnly(r *Receiver, ids []int, flush bool) {
	o.mu.Lock()
	var gone []int
	for id := range o.parts {
		if !slices.Contains(ids, id) {
			gone = append(gone, id)
		}
	}
	o.mu.Unlock()
	for _, id := range gone {
		o.close(r, id, flush)
	}
}

func (o *owned) close(r *Receiver, id int, flush bool) {
	o.mu.Lock()
	p := o.parts[id]
	delete(o.parts, id)
	o.mu.Unlock()
	if p == nil {
		return
	}
	start := time.Now()
	if err := p.Close(flush); err != nil {
		r.log.Warn("kafka: closing a partition's analysis", "partition", id, "err", err)
		return
	}
	r.log.Info("kafka: partition released", "partition", id, "analysed_pending", flush,
		"in", time.Since(start).Round(time.Millisecond).String())
}
