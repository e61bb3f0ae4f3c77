package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/store"
)

// DefaultPeerRefresh is how often a partition's analyser reads the other
// partitions' window states (docs/ARCHITECTURE.md, "Scaling out").
const DefaultPeerRefresh = time.Second

// partitions opens a pipeline per Kafka partition over a partitioned store
// (kafka.Partitions): each takes its partition's lease, recovers what the
// partition's last owner left beyond its checkpoint, and evaluates its
// traces against its part of each window plus the other partitions'.
type partitions struct {
	st  store.Partitioned
	cfg pipeline.Config // Logger and Registerer are the process's
	ttl time.Duration
	log *slog.Logger
	// lost reports a partition whose lease was lost: the service stops,
	// as when the store's lease is lost.
	lost chan error
	// split hears of the traces the partitions set aside as split.
	split *splitWatch
}

// Open implements kafka.Partitions.
func (ps *partitions) Open(ctx context.Context, topic string, partition int) (kafka.Partition, error) {
	return ps.open(ctx, store.KafkaPartition(topic, partition))
}

// open starts the analysis of partition name.
func (ps *partitions) open(ctx context.Context, name string) (*partitionRun, error) {
	view, err := ps.st.Partition(name)
	if err != nil {
		return nil, err
	}
	log := ps.log.With("partition", name)
	lease, err := takeLease(ctx, view, fmt.Sprintf("partition %q (others may analyse the rest)", name), ps.ttl, log)
	if err != nil {
		_ = view.Close()
		return nil, err
	}
	reg := &scopedRegisterer{}
	if ps.cfg.Registerer != nil {
		reg.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"partition": name}, ps.cfg.Registerer)
	}
	pcfg := ps.cfg
	pcfg.Logger, pcfg.Registerer = log, reg
	pcfg.SkipMaintenance = true // the process runs retention once (maintain)
	pcfg.OnSplit = ps.split.observer(name)
	p := pipeline.New(view, pcfg)
	pctx, cancel := context.WithCancel(context.Background())
	run := &partitionRun{Pipeline: p, name: name, view: view, lease: lease, reg: reg, stop: cancel,
		done: make(chan error, 1), quit: make(chan struct{})}
	go func() { run.done <- p.Run(pctx) }()
	select {
	case <-p.Started():
	case err := <-run.done:
		run.done <- err
		return nil, errors.Join(fmt.Errorf("partition %s: %w", name, err), run.Close(false))
	case <-ctx.Done():
		p.HandOver()
		return nil, errors.Join(ctx.Err(), run.Close(false))
	}
	go func() {
		select {
		case err := <-lease.lost:
			select {
			case ps.lost <- fmt.Errorf("partition %s: %w", name, err):
			default:
			}
		case <-run.quit:
		}
	}()
	return run, nil
}

// partitionRun is one partition's running analysis.
type partitionRun struct {
	*pipeline.Pipeline
	name  string
	view  store.PartitionStore
	lease *leaseKeeper
	reg   *scopedRegisterer
	stop  context.CancelFunc
	done  chan error
	quit  chan struct{}
	once  sync.Once
	err   error
}

// Close implements kafka.Partition: the pipeline stops (with flush, after
// analysing what is pending), the lease is released (the view's Close),
// the partition's metrics are unregistered.
func (r *partitionRun) Close(flush bool) error {
	r.once.Do(func() {
		if !flush {
			r.HandOver()
		}
		r.stop()
		err := <-r.done
		close(r.quit)
		r.lease.stop()
		r.err = errors.Join(err, r.view.Close())
		r.reg.unregisterAll()
	})
	return r.err
}

// scopedRegisterer registers a partition's metrics (labelled with it) and
// unregisters them all when the partition moves to another instance: it
// may come back.
type scopedRegisterer struct {
	prometheus.Registerer
	mu sync.Mutex
	cs []prometheus.Collector
}

func (s *scopedRegisterer) Register(c prometheus.Collector) error {
	if s.Registerer == nil {
		return nil
	}
	if err := s.Registerer.Register(c); err != nil {
		return err
	}
	s.mu.Lock()
	s.cs = append(s.cs, c)
	s.mu.Unlock()
	return nil
}

func (s *scopedRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := s.Register(c); err != nil {
			panic(err)
		}
	}
}

func (s *scopedRegisterer) unregisterAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cs {
		s.Registerer.Unregister(c)
	}
	s.cs = nil
}
