// Package app wires the service: a store, the pipeline, the OTLP and Kafka
// receivers and the HTTP server (health, readiness, metrics, and the routes
// a binary adds), with a graceful shutdown that flushes everything. Both
// `stormradius serve` and cmd/ingest run it; it holds no logic of its own.
package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/health"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// Config is a whole service.
type Config struct {
	// Store says where data lives.
	Store storeurl.Options
	// OpenStore, when not nil, opens the store instead (tests wrap one).
	OpenStore func(context.Context) (store.Store, error)
	// Pipeline configures the analysis (its window is the store's).
	Pipeline pipeline.Config
	// LeaseTimeout is how long the store's analysis lease outlives a
	// crashed instance (DefaultLeaseTimeout when zero): one instance
	// analyses a store, another is refused at start while the lease is
	// held.
	LeaseTimeout time.Duration
	// OTLP configures the receivers; Disable both to run without them.
	OTLP otlp.Config
	// Kafka, when Brokers are set, adds a Kafka consumer.
	Kafka kafka.Config
	// KafkaPartitioned analyses each Kafka partition on its own (a
	// partitioned store is needed): any number of instances in one
	// consumer group then share the topic. Traces must be partitioned by
	// trace id (the kafka exporter's partition_traces_by_id).
	KafkaPartitioned bool
	// Source, when its DSN is set, follows a table of spans (the
	// collector's clickhouseexporter's) into a partition of its own (a
	// partitioned store is needed).
	Source SourceConfig
	// Partition, when set, makes this instance the analyser of one named
	// partition of a partitioned store (store.Partitioned): what its OTLP
	// receivers get. Several instances, each with its own partition,
	// share a store when every trace reaches one of them (the collector's
	// loadbalancing exporter routing by trace id).
	Partition string
	// HTTPAddr serves /healthz, /readyz, /metrics and, with Web, the REST
	// API and the UI ("" for none).
	HTTPAddr string
	// HTTPTLS, when not nil, serves HTTPAddr over TLS.
	HTTPTLS *tls.Config
	// Web, when not nil, serves the REST API and the UI on HTTPAddr and
	// exports per-API figures on /metrics.
	Web *web.Config
	// Logger is the service's logger.
	Logger *slog.Logger
	// Ready, when not nil, is called once the service accepts data, with
	// the addresses it listens on.
	Ready func(Addrs)
}

// Addrs are the bound addresses of a running service, and its store and
// pipeline for callers in the same process (the demo reads its results
// back through them).
type Addrs struct {
	OTLPGRPC, OTLPHTTP, HTTP net.Addr
	Store                    store.Store
	Pipeline                 *pipeline.Pipeline
}

// Run runs the service until ctx ends, then shuts it down in order:
// receivers stop taking data (in-flight requests finish), the Kafka
// consumer stops, the pipeline analyses every pending trace, the store is
// closed and its analysis lease released.
//
// Run takes the analysis lease of what it analyses before anything else:
// the store's, or its partition's (Partition). While another instance
// holds it, Run returns the refusal (errors.Is store.ErrLeaseHeld) at
// once. If the lease is lost while running, Run stops the service with an
// error wrapping store.ErrLeaseLost: the store refuses further writes,
// pending traces are left to the instance that holds the lease (their
// spans are stored; it recovers them).
//
// Over a partitioned store (store.Partitioned) the Kafka consumer analyses
// each partition the group assigns to this instance on its own, under the
// partition's lease (docs/ARCHITECTURE.md, "Scaling out"); the OTLP
// receivers feed the store's default partition, or Partition. With Kafka
// and no OTLP receiver, Run analyses only the Kafka partitions: any number
// of such instances share a topic and a store.
func Run(ctx context.Context, cfg Config) (err error) {
	log := cmp.Or(cfg.Logger, slog.Default())
	reg := newRegistry()
	conn := newStoreConn(reg, log)
	st, err := openStore(ctx, cfg.Store, cfg.OpenStore, log, conn)
	if err != nil {
		return err
	}
	defer closeStore(st, &err)
	ttl := cmp.Or(cfg.LeaseTimeout, DefaultLeaseTimeout)
	plan, err := planOf(cfg, st)
	if err != nil {
		return err
	}
	pcfg := cfg.Pipeline
	pcfg.Logger, pcfg.Registerer = log, reg
	if plan.partitioned {
		pcfg.PeerRefresh = cmp.Or(pcfg.PeerRefresh, DefaultPeerRefresh)
	}
	tctx, stopTasks := context.WithCancel(context.Background())
	defer stopTasks()
	svc := &service{log: log, reg: reg, stopPipeline: func() {}, stopTasks: stopTasks,
		perr: make(chan error, 1), httpErr: make(chan error, 1), kafkaErr: make(chan error, 1), sourceErr: make(chan error, 1),
		partLost: make(chan error, 1)}
	split := &splitWatch{log: log, health: &svc.health}
	conn.attach(&svc.health)
	var p *pipeline.Pipeline
	var leaseLost <-chan error
	if plan.main == nil {
		svc.perr = nil // no pipeline of its own: only Kafka partitions
		log.Info("analysing only the partitions of Kafka or the source table (no OTLP receiver)")
		svc.tasks.Go(func() { pipeline.Maintain(tctx, st, cfg.Pipeline.Retention, time.Now, log) })
	} else {
		if plan.view != nil {
			defer closeStore(plan.view, &err)
		}
		// Before recovery: the pipeline owns the window states, the
		// checkpoint and the pending traces, which a second analyser
		// would corrupt.
		lease, err := takeLease(ctx, plan.main, "the store", ttl, log)
		if err != nil {
			svc.stopTasks()
			svc.tasks.Wait()
			return leaseHint(err, cfg)
		}
		defer lease.stop() // before closeStore, which releases the lease
		leaseLost = lease.lost
		if plan.labelled {
			// Next to the partitions' pipelines, whose metrics carry
			// their partition.
			pcfg.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"partition": cfg.Partition}, reg)
		}
		// From here on every way out goes through svc.shutdown.
		mcfg := pcfg
		mcfg.OnSplit = split.observer(cfg.Partition)
		p = pipeline.New(plan.main, mcfg)
		pctx, stopPipeline := context.WithCancel(context.Background())
		defer stopPipeline()
		svc.stopPipeline = stopPipeline
		go func() { svc.perr <- p.Run(pctx) }()
		select {
		case <-p.Started():
		case err := <-svc.perr:
			svc.perr <- err // read again by shutdown
			return svc.shutdown(nil)
		case <-ctx.Done():
			return svc.shutdown(ctx.Err())
		case err := <-lease.lost:
			return svc.shutdown(err)
		}
	}
	if plan.kafkaParts || plan.source {
		pcfg.Registerer = reg
		svc.parts = &partitions{st: plan.store, cfg: pcfg, ttl: ttl, log: log, lost: svc.partLost, split: split}
	}

	acfg := pcfg.Analysis
	acfg.Window = st.Window()
	addrs, err := svc.start(ctx, tctx, cfg, p, st, acfg)
	if err != nil {
		return svc.shutdown(err)
	}
	svc.health.SetReady(true)
	log.Info("stormradius is running", "otlp_grpc", addrs.OTLPGRPC, "otlp_http", addrs.OTLPHTTP, "http", addrs.HTTP,
		"kafka", cfg.Kafka.Brokers, "window", st.Window(), "partition", cfg.Partition)
	if cfg.Ready != nil {
		cfg.Ready(addrs)
	}

	runErr := svc.wait(ctx, leaseLost)
	svc.health.SetReady(false)
	if errors.Is(runErr, store.ErrLeaseLost) {
		// The store refuses the pipeline's writes now: what is pending is
		// in the stored spans, which the lease's holder recovers.
		log.Info("shutting down: receivers stop, pending traces are left to the instance that holds the lease")
	} else {
		log.Info("shutting down: receivers stop, pending traces are analysed")
	}
	return svc.shutdown(runErr)
}

// plan is what a service analyses, from its configuration and store.
type plan struct {
	// store is the store's partitions (nil when it has none).
	store store.Partitioned
	// partitioned: analysis is split (Kafka partitions, or Partition):
	// every pipeline reads the other partitions' window states.
	partitioned bool
	// kafkaParts: the Kafka consumer analyses each partition on its own.
	kafkaParts bool
	// source: a source table is followed, into a partition of its own.
	source bool
	// main is what the OTLP receivers' pipeline analyses (the store, or
	// the view of Partition); nil when there is none (only Kafka).
	main store.Store
	view store.PartitionStore // Partition's view, closed by Run
	// labelled: the main pipeline's metrics carry its partition, as the
	// Kafka partitions' do.
	labelled bool
}

func planOf(cfg Config, st store.Store) (plan, error) {
	var pl plan
	ps, ok := st.(store.Partitioned)
	if ok {
		pl.store = ps
	}
	pl.kafkaParts = len(cfg.Kafka.Brokers) > 0 && cfg.KafkaPartitioned
	pl.source = cfg.Source.DSN != ""
	otlpOn := !cfg.OTLP.DisableGRPC || !cfg.OTLP.DisableHTTP
	// Nothing else feeds a pipeline of the store's own.
	partsOnly := !otlpOn && (pl.kafkaParts || pl.source) && (len(cfg.Kafka.Brokers) == 0 || pl.kafkaParts)
	switch {
	case pl.kafkaParts && !ok:
		return pl, fmt.Errorf("--kafka-partitioned: the store (%T) cannot be analysed in partitions", st)
	case pl.source && !ok:
		return pl, fmt.Errorf("--source: the store (%T) cannot be analysed in partitions", st)
	case cfg.Partition != "" && !ok:
		return pl, fmt.Errorf("--partition %q: the store (%T) cannot be analysed in partitions", cfg.Partition, st)
	case cfg.Partition != "":
		if err := store.CheckPartition(cfg.Partition); err != nil {
			return pl, fmt.Errorf("--partition: %w", err)
		}
		view, err := ps.Partition(cfg.Partition)
		if err != nil {
			return pl, err
		}
		pl.main, pl.view = view, view
	case partsOnly:
		// Only Kafka partitions, or the source's.
	default:
		pl.main = st
	}
	pl.partitioned = pl.kafkaParts || pl.source || cfg.Partition != ""
	pl.labelled = (pl.kafkaParts || pl.source) && pl.main != nil
	return pl, nil
}

// leaseHint adds to a refused lease what to do when several instances
// were meant to share the work.
func leaseHint(err error, cfg Config) error {
	if !errors.Is(err, store.ErrLeaseHeld) {
		return err
	}
	hint := "to run several instances over one store, consume Kafka with --kafka-partitioned and the OTLP receivers off " +
		"(--otlp-grpc off --otlp-http off): the consumer group shares the partitions out; or give each OTLP instance a --partition " +
		"of its own behind a collector routing by trace id (docs/ARCHITECTURE.md, \"Scaling out\")"
	if cfg.Partition != "" {
		return fmt.Errorf("partition %s: %w (%s)", cfg.Partition, err, hint)
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// service is what Run starts once it holds the store's lease, as far as
// it got: shutdown stops it, in one order whatever ended it.
type service struct {
	log    *slog.Logger
	reg    *prometheus.Registry
	health health.Status // /readyz

	recv         *otlp.Server // nil when not started
	srv          *httpServer  // nil when not started
	stopTasks    context.CancelFunc
	tasks        sync.WaitGroup // the Kafka consumer and the incident watch, on stopTasks's context
	stopPipeline context.CancelFunc
	parts        *partitions // the Kafka partitions' pipelines, over a partitioned store

	// How each part ends: the pipeline (read once more by shutdown; nil
	// without one), the HTTP server, the Kafka consumer, a Kafka
	// partition's lease.
	perr, httpErr, kafkaErr, sourceErr, partLost chan error
}

// start starts, around the running pipeline p (nil: only Kafka
// partitions), the HTTP server, the OTLP receivers, and on tctx the Kafka
// consumer and the incident watch, each if configured; it returns their
// addresses, or the error of the first that could not start (what started
// is left to shutdown).
func (s *service) start(ctx, tctx context.Context, cfg Config, p *pipeline.Pipeline, st store.Store, acfg analysis.Config) (Addrs, error) {
	addrs := Addrs{Store: st, Pipeline: p}
	var err error
	if s.srv, err = startHTTP(cfg.HTTPAddr, cfg.HTTPTLS, st, acfg, cfg.Web, s.reg, &s.health, s.log, s.httpErr); err != nil {
		return addrs, err
	}
	if s.srv != nil {
		addrs.HTTP = s.srv.addr
	}
	if p != nil && (!cfg.OTLP.DisableGRPC || !cfg.OTLP.DisableHTTP) {
		ocfg := cfg.OTLP
		ocfg.Logger, ocfg.Registerer = s.log, s.reg
		recv, err := otlp.New(ocfg, p)
		if err == nil {
			err = recv.Start(ctx) // which stops what it started when it fails
		}
		if err != nil {
			return addrs, err
		}
		s.recv = recv
		addrs.OTLPGRPC, addrs.OTLPHTTP = recv.GRPCAddr(), recv.HTTPAddr()
	}
	if len(cfg.Kafka.Brokers) > 0 {
		kcfg := cfg.Kafka
		kcfg.Logger, kcfg.Registerer = s.log, s.reg
		kcfg.Health = &s.health // /readyz: not ready while the brokers refuse the connection, saying why
		var kr *kafka.Receiver
		if s.parts != nil {
			kr, err = kafka.NewPartitionedReceiver(kcfg, s.parts)
		} else {
			kr, err = kafka.NewReceiver(kcfg, p)
		}
		if err != nil {
			return addrs, err
		}
		s.tasks.Go(func() { s.kafkaErr <- kr.Run(tctx) })
	}
	if cfg.Source.DSN != "" {
		if err := s.startSource(ctx, tctx, cfg.Source); err != nil {
			return addrs, err
		}
	}
	if cfg.Web != nil {
		s.tasks.Go(func() { watchIncidents(tctx, &query.Service{Store: st, Config: acfg}, s.log) })
	}
	return addrs, nil
}

// wait waits until ctx ends (nil), a part of the service fails, or a
// lease is lost, and says which.
func (s *service) wait(ctx context.Context, leaseLost <-chan error) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.httpErr:
		return fmt.Errorf("http: %w", err)
	case err := <-s.kafkaErr:
		return fmt.Errorf("kafka: %w", err)
	case err := <-s.sourceErr:
		return err
	case err := <-s.perr:
		s.perr <- err // read again by shutdown
		return fmt.Errorf("pipeline stopped: %w", err)
	case err := <-leaseLost:
		return err
	case err := <-s.partLost:
		return err
	}
}

// shutdown stops the service in order: the OTLP receivers stop taking
// data (their in-flight requests finish), the Kafka consumer (which
// closes its partitions' pipelines, analysing what they have pending) and
// the incident watch stop, the pipeline analyses every pending trace (or,
// with the lease lost, leaves them to the lease's holder), and the HTTP
// server (/readyz, /metrics) stops last. It returns cause joined with the
// pipeline's error. Run's defers then stop the lease and close the store.
func (s *service) shutdown(cause error) error {
	if s.recv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		s.recv.Shutdown(ctx)
		cancel()
	}
	s.stopTasks()
	s.tasks.Wait()
	s.stopPipeline()
	if s.perr == nil {
		// No pipeline of its own (only Kafka partitions, stopped above).
	} else if err := <-s.perr; err != nil {
		cause = errors.Join(cause, fmt.Errorf("pipeline: %w", err))
	}
	s.srv.shutdown()
	return cause
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// openStore opens the configured store (or calls open, when set), its
// connection's problems reported to conn.
func openStore(ctx context.Context, opts storeurl.Options, open func(context.Context) (store.Store, error), log *slog.Logger,
	conn *storeConn) (store.Store, error) {
	if open != nil {
		return open(ctx)
	}
	opts.Logger, opts.ConnProblem = log, conn.report
	return storeurl.Open(ctx, opts)
}

// closeStore closes st, adding its error to *err.
func closeStore(st store.Store, err *error) {
	if cerr := st.Close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("close store: %w", cerr))
	}
}

// watchIncidents logs incidents as they open, grow and close (docs/SPEC.md §4.8),
// checking the rollups every 30 seconds until ctx ends.
func watchIncidents(ctx context.Context, svc *query.Service, log *slog.Logger) {
	w := query.NewIncidentWatch(svc)
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changes, err := w.Check(ctx, time.Now())
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("incidents: check failed", "err", err)
			}
			continue
		}
		for _, c := range changes {
			d := c.Incident
			level := slog.LevelInfo
			if c.Change == "opened" {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "incident "+c.Change, "id", d.ID, "owner", d.Service+" "+d.Operation,
				"start", d.Start, "end", d.End, "peak_owned_failure_rate", d.PeakRate, "max_radius", d.MaxRadius,
				"max_amplification", d.MaxAmplification, "affected_apis", d.AffectedAPIs)
		}
	}
}

// httpServer serves /healthz, /readyz, /metrics and, with a web config,
// the REST API and the UI.
type httpServer struct {
	srv  *http.Server
	addr net.Addr
}

// startHTTP starts the HTTP server on addr (nil for ""); errors of Serve
// go to errc.
func startHTTP(addr string, tlsCfg *tls.Config, st store.Store, acfg analysis.Config, wcfg *web.Config, reg *prometheus.Registry,
	ready *health.Status, log *slog.Logger, errc chan<- error) (*httpServer, error) {
	if addr == "" {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /readyz", ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if wcfg != nil {
		svc := &query.Service{Store: st, Config: acfg}
		wc := *wcfg
		wc.Logger = log
		mux.Handle("/", web.Handler(svc, wc))
		col := web.NewCollector(svc, time.Now(), wc.Now, log)
		col.MaxAPIs = wc.MetricsMaxAPIs
		reg.MustRegister(col)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	h := &httpServer{addr: ln.Addr(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	go func() { errc <- h.srv.Serve(ln) }()
	return h, nil
}

func (h *httpServer) shutdown() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.srv.Shutdown(ctx)
}

// APIConfig is the read side alone (cmd/api): the REST API, the UI and
// /metrics over a store that others write.
type APIConfig struct {
	// Store says where the data is; RunAPI opens it read-only (whatever
	// Store.ReadOnly says): it must exist and be migrated.
	Store     storeurl.Options
	OpenStore func(context.Context) (store.Store, error)
	HTTPAddr  string
	HTTPTLS   *tls.Config // see Config.HTTPTLS
	Web       web.Config
	Analysis  analysis.Config
	Logger    *slog.Logger
	Ready     func(net.Addr)
}

// RunAPI serves the API until ctx ends.
func RunAPI(ctx context.Context, cfg APIConfig) (err error) {
	log := cmp.Or(cfg.Logger, slog.Default())
	reg := newRegistry()
	opts := cfg.Store
	opts.ReadOnly = true // the read side writes nothing, migrations included
	conn := newStoreConn(reg, log)
	st, err := openStore(ctx, opts, cfg.OpenStore, log, conn)
	if err != nil {
		return err
	}
	defer closeStore(st, &err)
	var ready health.Status
	conn.attach(&ready)
	errc := make(chan error, 1)
	acfg := cfg.Analysis
	acfg.Window = st.Window()
	srv, err := startHTTP(cfg.HTTPAddr, cfg.HTTPTLS, st, acfg, &cfg.Web, reg, &ready, log, errc)
	if err != nil {
		return err
	}
	if srv == nil {
		return errors.New("--http is required")
	}
	ready.SetReady(true)
	log.Info("stormradius api is running", "http", srv.addr, "window", st.Window())
	if cfg.Ready != nil {
		cfg.Ready(srv.addr)
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("http: %w", err)
	}
	ready.SetReady(false)
	srv.shutdown()
	return err
}

// SourceConfig is a source table followed (ingest/chsource): none when DSN
// is empty.
type SourceConfig struct {
	DSN    string
	Follow chsource.FollowConfig
}

// startSource opens the source table and its partition (under the
// partition's lease), and follows the table on tctx into the partition's
// pipeline; when tctx ends, the pipeline analyses what it holds and the
// partition is closed.
func (s *service) startSource(ctx, tctx context.Context, sc SourceConfig) error {
	src, err := chsource.Open(ctx, sc.DSN, os.Getenv(chsource.PasswordEnv), s.log)
	if err != nil {
		return err
	}
	name := src.PartitionName(sc.Follow.Shard, sc.Follow.Shards)
	run, err := s.parts.open(ctx, name)
	if err != nil {
		src.Close()
		return fmt.Errorf("source %s: %w", src.Name(), err)
	}
	fcfg := sc.Follow
	fcfg.Logger, fcfg.Registerer, fcfg.Health = s.log.With("partition", name), s.reg, &s.health
	pos, ok := run.view.(store.SourcePositions)
	if !ok {
		src.Close()
		return errors.Join(fmt.Errorf("source: the store (%T) keeps no source position", run.view), run.Close(false))
	}
	s.tasks.Go(func() {
		err := src.Follow(tctx, fcfg, pos, run.Consume)
		if err = errors.Join(err, run.Close(true), src.Close()); err != nil {
			s.sourceErr <- fmt.Errorf("source %s: %w", src.Name(), err)
		}
	})
	return nil
}
