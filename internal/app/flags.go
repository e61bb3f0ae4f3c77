package app

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/ingest"
	"github.com/stormradius/stormradius/ingest/chsource"
	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/ingest/otlp"
	"github.com/stormradius/stormradius/internal/certs"
	"github.com/stormradius/stormradius/pipeline"
	"github.com/stormradius/stormradius/query/timerange"
	"github.com/stormradius/stormradius/web"
)

// Role is the command a service's flags are for: what it runs decides
// which flags it has and what they say.
type Role int

const (
	// Serve is `stormradius serve`: the embedded store (--data) or a store
	// URL, with the REST API and the UI on --http (WebFlags adds theirs).
	Serve Role = iota
	// Ingest is cmd/ingest: a store URL only (--store, required), and only
	// /healthz, /readyz and /metrics on --http; cmd/api serves the rest.
	Ingest
)

// Flags registers the service's flags for role on fs and returns a
// function that, after fs.Parse (and ApplyEnv), builds the Config
// they describe.
func Flags(fs *flag.FlagSet, role Role) func() (Config, error) {
	data := new(string)
	storeHelp := "store URL (required): clickhouse://host:9000/db"
	httpHelp := `/healthz, /readyz and /metrics listen address ("off" to disable); cmd/api serves the REST API and the UI`
	if role != Ingest {
		data = fs.String("data", "./data", "directory of the embedded store (used when --store is empty)")
		storeHelp = "store URL instead of the embedded store: clickhouse://host:9000/db"
		httpHelp = `API, UI, /healthz, /readyz and /metrics listen address ("off" to disable)`
	}
	storeURL := fs.String("store", "", storeHelp)
	cluster := ClickHouseClusterFlag(fs)
	httpPort := ":8080"
	if role == Ingest {
		httpPort = ":8081" // beside cmd/api's :8080 on one host
	}
	httpAddr := fs.String("http", httpPort, httpHelp)
	httpTLS := HTTPTLSFlags(fs)
	receivers := otlpFlags(fs)
	claimHeader := fs.String("claim-header", "x-error-claim", "header (and gRPC metadata key) that carries the error claim")
	sampling := inputSamplingFlags(fs)
	kafkaCfg := kafkaFlags(fs, role)
	sourceCfg := sourceFlags(fs)
	partition := fs.String("partition", "", "analyse one named partition of the store (letters, digits, ._-/:): "+
		"several instances share a store when each has its own and every trace reaches one of them (a collector's loadbalancing exporter routing by trace id; docs/ARCHITECTURE.md \"Scaling out\")")
	idle := fs.Duration("trace-idle", 5*time.Second, "analyse a trace once no span of it arrived for this long")
	maxAge := fs.Duration("max-trace-age", time.Minute, "analyse a trace at the latest this long after its first span")
	inflight := fs.Int("max-inflight-spans", 1_000_000, "spans held in memory before the receivers answer 503")
	window := fs.Duration("window", 0, "analysis window (docs/SPEC.md §4.3; default 1h; data keeps the window it was analysed with)")
	retention := daysFlag(fs, "retention", 7*24*time.Hour, "delete data older than this, e.g. 7d or 168h (0: keep everything)")
	leaseTimeout := fs.Duration("lease-timeout", DefaultLeaseTimeout, "one instance analyses a store: it holds the store's lease, renewed every third of this; "+
		"another instance is refused at start until the holder stops, or this long after it crashed")
	limits := LimitFlags(fs)
	logger := logFlags(fs)

	return func() (Config, error) {
		var errs []error
		c := Config{}
		c.Store.Data, c.Store.URL, c.Store.Window, c.Store.Cluster = *data, *storeURL, *window, *cluster
		if *window < 0 {
			errs = append(errs, fmt.Errorf("--window %v is negative", *window))
		}
		var err error
		c.OTLP, err = receivers()
		if err != nil {
			errs = append(errs, err)
		}
		c.OTLP.ClaimHeader = *claimHeader
		otlpSampling, kafkaSampling, baseSampling, err := sampling()
		if err != nil {
			errs = append(errs, err)
		}
		c.OTLP.Sampling = otlpSampling
		if !off(*httpAddr) {
			c.HTTPAddr = *httpAddr
		}
		if c.HTTPTLS, err = httpTLS(); err != nil {
			errs = append(errs, err)
		}
		if c.Kafka, c.KafkaPartitioned, err = kafkaCfg(*claimHeader, kafkaSampling); err != nil {
			errs = append(errs, err)
		}
		if c.Source, err = sourceCfg(*claimHeader, baseSampling); err != nil {
			errs = append(errs, err)
		}
		if *idle <= 0 || *maxAge <= 0 || *inflight <= 0 {
			errs = append(errs, errors.New("--trace-idle, --max-trace-age and --max-inflight-spans must be positive"))
		}
		ret := *retention
		switch {
		case ret < 0:
			errs = append(errs, fmt.Errorf("--retention %v is negative", ret))
		case ret == 0:
			ret = -1 // keep everything
		}
		c.Pipeline = pipelineOf(*idle, *maxAge, *inflight, ret)
		c.LeaseTimeout = *leaseTimeout
		c.Partition = *partition
		if *leaseTimeout < time.Second {
			errs = append(errs, fmt.Errorf("--lease-timeout %v: want at least 1s", *leaseTimeout))
		}
		lim, err := limits()
		if err != nil {
			errs = append(errs, err)
		}
		c.Pipeline.Analysis = analysis.Config{Window: *window, Limits: lim}
		if c.Logger, err = logger(); err != nil {
			errs = append(errs, err)
		}
		return c, errors.Join(errs...)
	}
}

// off reports whether a listen address is "off" (or empty).
func off(addr string) bool { return addr == "" || addr == "off" }

// kafkaFlags registers the Kafka consumer's flags on fs and returns what
// reads its configuration (none without --kafka-brokers) and whether it
// analyses each partition on its own.
func kafkaFlags(fs *flag.FlagSet, role Role) func(claimHeader string, sampling ingest.SamplingConfig) (kafka.Config, bool, error) {
	brokers := fs.String("kafka-brokers", "", "Kafka brokers to consume OTLP from, comma-separated (none: no Kafka)")
	topic := fs.String("kafka-topic", kafka.DefaultTopic, "Kafka topic the collector's kafka exporter writes")
	group := fs.String("kafka-group", kafka.DefaultGroupID, "Kafka consumer group")
	session := fs.Duration("kafka-session-timeout", 30*time.Second, "how long the consumer group waits for a silent member before it moves its partitions to the others "+
		"(a member that stops cleanly leaves at once); heartbeats every tenth of it")
	parts := fs.Bool("kafka-partitioned", role == Ingest, "analyse each Kafka partition on its own, so that any number of instances in one consumer group share a topic "+
		"(the collector's kafka exporter must write with partition_traces_by_id: a trace split over partitions is analysed in parts)")
	encoding := fs.String("kafka-encoding", string(kafka.EncodingProto), "how to read Kafka records: otlp_proto or otlp_json (a record starting with '{' is read as OTLP JSON either way)")
	security := kafkaSecurityFlags(fs)
	return func(claimHeader string, sampling ingest.SamplingConfig) (kafka.Config, bool, error) {
		if *brokers == "" {
			return kafka.Config{}, false, nil
		}
		var errs []error
		enc := kafka.Encoding(*encoding)
		if enc != kafka.EncodingProto && enc != kafka.EncodingJSON {
			errs = append(errs, fmt.Errorf("--kafka-encoding %q: want otlp_proto or otlp_json", *encoding))
		}
		c := kafka.Config{Brokers: splitComma(*brokers), Topic: *topic, GroupID: *group, Encoding: enc, ClaimHeader: claimHeader, Sampling: sampling}
		var err error
		if c.Security, err = security(); err != nil {
			errs = append(errs, err)
		}
		if *session < 2*time.Second {
			errs = append(errs, fmt.Errorf("--kafka-session-timeout %v: want at least 2s", *session))
		}
		c.SessionTimeout, c.RebalanceTimeout, c.HeartbeatInterval = *session, *session, *session/10
		return c, *parts, errors.Join(errs...)
	}
}

// otlpFlags registers the OTLP receivers' flags on fs (addresses, tokens,
// TLS, request bounds) and returns what reads their configuration (all
// but the claim header).
func otlpFlags(fs *flag.FlagSet) func() (otlp.Config, error) {
	grpcAddr := fs.String("otlp-grpc", otlp.DefaultGRPCAddr, `OTLP/gRPC listen address ("off" to disable)`)
	httpOTLP := fs.String("otlp-http", otlp.DefaultHTTPAddr, `OTLP/HTTP listen address ("off" to disable)`)
	var tokens listValue
	fs.Var(&tokens, "ingest-token", "bearer token OTLP clients must send (repeatable, or comma-separated; none: no auth)")
	tlsCert := fs.String("tls-cert", "", "PEM certificate for the OTLP receivers (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "PEM key for the OTLP receivers (both files are read again when they change)")
	clientCA := fs.String("otlp-tls-client-ca", "", "PEM file of the CAs whose client certificates the OTLP receivers require (mutual TLS; needs --tls-cert)")
	maxBody := fs.Int64("max-body-bytes", otlp.DefaultMaxBodyBytes, "largest OTLP request, as sent and decompressed")
	maxReqs := fs.Int("max-inflight-requests", otlp.DefaultMaxInflightRequests, "OTLP requests decoded and stored at once, both protocols (more wait up to 1 s, then get 503)")
	minRate := fs.Int64("min-body-rate", otlp.DefaultMinBodyRate, "slowest an OTLP/HTTP body may arrive, bytes/s over 5 s (slower: 408, disconnected; -1: no check)")
	bodyTimeout := fs.Duration("body-timeout", otlp.DefaultBodyTimeout, "longest an OTLP/HTTP body may take to arrive")
	bodyBuffer := fs.Int64("body-buffer-bytes", 0, "memory for OTLP/HTTP bodies being received, all requests (beyond: 503; default 8 × --max-body-bytes)")
	return func() (otlp.Config, error) {
		c := otlp.Config{GRPCAddr: *grpcAddr, HTTPAddr: *httpOTLP, DisableGRPC: off(*grpcAddr), DisableHTTP: off(*httpOTLP),
			BearerTokens: tokens, TLSCertFile: *tlsCert, TLSKeyFile: *tlsKey, TLSClientCAFile: *clientCA, MaxBodyBytes: *maxBody,
			MaxInflightRequests: *maxReqs, MinBodyRate: *minRate, BodyTimeout: *bodyTimeout, BodyBufferBytes: *bodyBuffer}
		if *maxReqs <= 0 || *bodyTimeout <= 0 || *bodyBuffer < 0 || *minRate == 0 {
			return c, errors.New("--max-inflight-requests and --body-timeout must be positive, --body-buffer-bytes not negative, --min-body-rate not 0")
		}
		return c, nil
	}
}

// logFlags registers --log-level and --log-format on fs and returns what
// makes the logger they ask for.
func logFlags(fs *flag.FlagSet) func() (*slog.Logger, error) {
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	return func() (*slog.Logger, error) {
		var lvl slog.Level
		var errs []error
		if err := lvl.UnmarshalText([]byte(*level)); err != nil {
			errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", *level))
		}
		opts := &slog.HandlerOptions{Level: lvl}
		switch *logFormat {
		case "text":
			return slog.New(slog.NewTextHandler(os.Stderr, opts)), errors.Join(errs...)
		case "json":
			return slog.New(slog.NewJSONHandler(os.Stderr, opts)), errors.Join(errs...)
		}
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", *logFormat))
		return nil, errors.Join(errs...)
	}
}

// ClickHouseClusterFlag registers --clickhouse-cluster on fs (env
// STORMRADIUS_CLICKHOUSE_CLUSTER): the ClickHouse cluster a new store is
// sharded over (storeurl.Options.Cluster).
func ClickHouseClusterFlag(fs *flag.FlagSet) *string {
	return fs.String("clickhouse-cluster", "", "shard a new ClickHouse store over this cluster of the servers' remote_servers, "+
		"replicated by ZooKeeper (the URL's cluster=NAME says it too; an existing store keeps what it was created as)")
}

// LimitFlags registers the flags of the caps on the distinct names one
// analysis window admits (analysis.Limits) on fs — `serve`, cmd/ingest and
// `analyze` take the same, so that they fold the same names — and returns
// a function that, after parsing, gives the limits.
func LimitFlags(fs *flag.FlagSet) func() (analysis.Limits, error) {
	const past = "; the traces of further ones count under "
	apis := fs.Int("max-apis", analysis.DefaultMaxAPIs, "distinct root APIs one analysis window admits"+past+graph.OtherAPI)
	services := fs.Int("max-services", analysis.DefaultMaxServices, "distinct services (uninstrumented callees included) one analysis window admits"+past+graph.OtherService)
	ops := fs.Int("max-operations", analysis.DefaultMaxOperations, "distinct (service, operation) pairs one analysis window admits"+past+graph.OtherOperation)
	versions := fs.Int("max-versions", analysis.DefaultMaxVersions, "distinct (service, service.version) pairs one analysis window admits"+past+graph.OtherVersion)
	return func() (analysis.Limits, error) {
		for _, f := range []struct {
			name string
			v    int
		}{{"max-apis", *apis}, {"max-services", *services}, {"max-operations", *ops}, {"max-versions", *versions}} {
			if f.v <= 0 {
				return analysis.Limits{}, fmt.Errorf("--%s %d must be positive", f.name, f.v)
			}
		}
		return analysis.Limits{APIs: *apis, Services: *services, Operations: *ops, Versions: *versions}, nil
	}
}

// listValue is a repeatable flag whose values may also be comma-separated
// (so that one STORMRADIUS_INGEST_TOKEN can carry several).
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }

func (l *listValue) Set(v string) error {
	for _, s := range splitComma(v) {
		*l = append(*l, s)
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func pipelineOf(idle, maxAge time.Duration, inflight int, retention time.Duration) pipeline.Config {
	return pipeline.Config{TraceIdle: idle, MaxTraceAge: maxAge, MaxInflightSpans: inflight, Retention: retention}
}

// WebFlags registers the REST API's and UI's flags on fs and returns a
// function that, after parsing, builds their config.
func WebFlags(fs *flag.FlagSet) func() (web.Config, error) {
	var tokens, origins listValue
	fs.Var(&tokens, "api-token", "bearer token the REST API requires (repeatable, or comma-separated; none: no auth). /healthz, /readyz and /metrics stay open")
	fs.Var(&origins, "cors-origin", "origin allowed to call the API from a browser (repeatable; none: CORS off)")
	timeout := fs.Duration("request-timeout", 30*time.Second, "longest an API request may take")
	link := fs.String("trace-link-template", "", "link from a trace to your trace viewer, {trace_id} replaced (e.g. https://jaeger.example/trace/{trace_id})")
	metricsAPIs := fs.Int("metrics-max-apis", web.DefaultMetricsMaxAPIs, "root APIs with /metrics series of their own; the others are summed in the series labelled api=\""+graph.OtherAPI+"\"")
	cacheBytes := fs.Int64("api-cache-bytes", web.DefaultCacheBytes, "memory the REST API's cache of answers may hold, in bytes (0: no cache)")
	return func() (web.Config, error) {
		c := web.Config{Tokens: tokens, CORSOrigins: origins, Timeout: *timeout, TraceLinkTemplate: *link, MetricsMaxAPIs: *metricsAPIs,
			CacheBytes: *cacheBytes}
		if *cacheBytes < 0 {
			return c, fmt.Errorf("--api-cache-bytes %d must not be negative", *cacheBytes)
		}
		if *cacheBytes == 0 {
			c.CacheBytes = -1 // web.Config's "no cache"
		}
		if *timeout <= 0 {
			return c, fmt.Errorf("--request-timeout %v must be positive", *timeout)
		}
		if *metricsAPIs <= 0 {
			return c, fmt.Errorf("--metrics-max-apis %d must be positive", *metricsAPIs)
		}
		if *link != "" && !strings.Contains(*link, "{trace_id}") {
			return c, fmt.Errorf("--trace-link-template %q lacks {trace_id}", *link)
		}
		if *link != "" && !strings.HasPrefix(*link, "https://") && !strings.HasPrefix(*link, "http://") {
			return c, fmt.Errorf("--trace-link-template %q: want an http(s) URL", *link)
		}
		return c, nil
	}
}

// KafkaPasswordEnv is the environment variable of the Kafka SASL password
// (never a flag: argv is readable by every user of the machine).
const KafkaPasswordEnv = "STORMRADIUS_KAFKA_SASL_PASSWORD"

// kafkaSecurityFlags defines the Kafka TLS and SASL flags (the collector's
// and kafka-go's names); any --kafka-tls-* turns TLS on. The password
// comes from --kafka-sasl-password-file or KafkaPasswordEnv.
func kafkaSecurityFlags(fs *flag.FlagSet) func() (kafka.Security, error) {
	var s kafka.Security
	fs.BoolVar(&s.TLS, "kafka-tls", false, "connect to the Kafka brokers over TLS (system roots; any --kafka-tls-* setting turns TLS on too)")
	fs.StringVar(&s.TLSCA, "kafka-tls-ca", "", "PEM file of the CAs that sign the Kafka brokers' certificates")
	fs.StringVar(&s.TLSCert, "kafka-tls-cert", "", "PEM file of a client certificate for the Kafka brokers (with --kafka-tls-key)")
	fs.StringVar(&s.TLSKey, "kafka-tls-key", "", "PEM file of the client certificate's key")
	fs.StringVar(&s.TLSServerName, "kafka-tls-server-name", "", "name the Kafka brokers' certificates must hold (default: the broker's host)")
	fs.BoolVar(&s.TLSInsecureSkipVerify, "kafka-tls-insecure-skip-verify", false,
		"do not verify the Kafka brokers' certificates (tests only: warned at start and in /metrics)")
	fs.StringVar(&s.SASLMechanism, "kafka-sasl-mechanism", "", "Kafka SASL mechanism: plain, scram-sha-256 or scram-sha-512 (default: no SASL)")
	fs.StringVar(&s.SASLUsername, "kafka-sasl-username", "", "Kafka SASL username")
	passFile := fs.String("kafka-sasl-password-file", "", "file holding the Kafka SASL password (or set "+KafkaPasswordEnv+"; never on the command line)")
	return func() (kafka.Security, error) {
		if s.SASLMechanism != "" {
			s.SASLPassword = os.Getenv(KafkaPasswordEnv)
			if *passFile != "" {
				b, err := os.ReadFile(*passFile)
				if err != nil {
					return s, fmt.Errorf("--kafka-sasl-password-file: %w", err)
				}
				s.SASLPassword = strings.TrimRight(string(b), "\r\n")
			}
			if s.SASLUsername == "" || s.SASLPassword == "" {
				return s, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-username and a password (--kafka-sasl-password-file or %s)",
					s.SASLMechanism, KafkaPasswordEnv)
			}
		}
		if !s.Enabled() {
			return s, nil
		}
		_, err := s.Dialer() // the mechanism and the TLS files, checked at start
		return s, err
	}
}

// HTTPTLSFlags defines --http-tls-cert and --http-tls-key: the API, the
// UI, /healthz, /readyz and /metrics over TLS, the files read again when
// they change (certificates rotate without a restart).
func HTTPTLSFlags(fs *flag.FlagSet) func() (*tls.Config, error) {
	cert := fs.String("http-tls-cert", "", "PEM certificate for --http (with --http-tls-key; read again when it changes)")
	key := fs.String("http-tls-key", "", "PEM key for --http")
	return func() (*tls.Config, error) {
		if *cert == "" && *key == "" {
			return nil, nil
		}
		cfg, err := certs.ServerConfig(*cert, *key, "")
		if err != nil {
			return nil, fmt.Errorf("--http-tls-cert, --http-tls-key: %w", err)
		}
		return cfg, nil
	}
}

// days is a duration flag that also takes whole days ("7d").
type days struct{ d *time.Duration }

func (v days) String() string {
	if v.d == nil {
		return ""
	}
	if *v.d > 0 && *v.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*v.d/(24*time.Hour)), 10) + "d"
	}
	return v.d.String()
}

func (v days) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if k, err := strconv.ParseUint(n, 10, 31); err == nil {
			*v.d = time.Duration(k) * 24 * time.Hour
			return nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 7d, 168h or 30m")
	}
	*v.d = d
	return nil
}

// daysFlag defines a duration flag that also takes whole days.
func daysFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var(days{&d}, name, usage)
	return &d
}

// sourceFlags registers the source table's flags on fs and returns what
// reads its configuration (none without --source).
func sourceFlags(fs *flag.FlagSet) func(claimHeader string, sampling ingest.SamplingConfig) (SourceConfig, error) {
	dsn := fs.String("source", "", "follow the OpenTelemetry Collector's clickhouseexporter table: clickhouse://host:9000/DB?table=otel_traces "+
		"(the store's TLS and password_file parameters; the password also from "+chsource.PasswordEnv+"; docs/operations.md \"Already on ClickHouse?\")")
	lag := fs.Duration("source-lag", chsource.DefaultLag, "with --source: rows whose span started longer ago than this are taken to be all inserted (cover span durations and the collector's queue)")
	poll := fs.Duration("source-poll", chsource.DefaultPoll, "with --source: how often the table is read")
	start := fs.String("source-start", "", "with --source: where to start when nothing was read yet (RFC 3339, unix seconds or now-DURATION; default now minus --source-lag: new rows only)")
	shard := fs.String("source-shard", "", "with --source: K/N reads the traces whose cityHash64(TraceId) % N is K, so that N instances share the table (default: every trace)")
	return func(claimHeader string, sampling ingest.SamplingConfig) (SourceConfig, error) {
		c := SourceConfig{DSN: *dsn}
		if c.DSN == "" {
			return c, nil
		}
		c.Follow = chsource.FollowConfig{Lag: *lag, Poll: *poll, Decoder: ingest.DecoderConfig{ClaimHeader: claimHeader, SamplingConfig: sampling}}
		var errs []error
		if *lag <= 0 || *poll <= 0 {
			errs = append(errs, errors.New("--source-lag and --source-poll must be positive"))
		}
		if *start != "" {
			t, err := timerange.Parse(*start, time.Now())
			if err != nil {
				errs = append(errs, fmt.Errorf("--source-start: %w", err))
			}
			c.Follow.Start = time.Unix(0, t)
		}
		if *shard != "" {
			k, n, ok := strings.Cut(*shard, "/")
			var err1, err2 error
			c.Follow.Shard, err1 = strconv.Atoi(k)
			c.Follow.Shards, err2 = strconv.Atoi(n)
			if !ok || err1 != nil || err2 != nil || c.Follow.Shards < 1 || c.Follow.Shard < 0 || c.Follow.Shard >= c.Follow.Shards {
				errs = append(errs, fmt.Errorf("--source-shard %q: want K/N with 0 <= K < N", *shard))
			}
		}
		return c, errors.Join(errs...)
	}
}
