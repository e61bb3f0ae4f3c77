package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/stormradius/stormradius/ingest"
)

// Defaults of Config.
const (
	// DefaultTopic is the kafka exporter's default traces topic.
	DefaultTopic = "otlp_spans"
	// DefaultGroupID is the consumer group the ingesters share.
	DefaultGroupID = "stormradius"
	// DefaultMaxBatchMessages bounds the records of one batch. A batch is
	// one span write (a ClickHouse part per table), and a record of an
	// exporter fed by SDKs holds a service's spans of one trace (~3): at
	// 1,000 a backlog was written in inserts of ~3,000 spans, ten times as
	// many as the OTLP path's (docs/PERFORMANCE.md, "One Kafka consumer
	// against the OTLP path").
	DefaultMaxBatchMessages = 10000
	// DefaultMaxBatchBytes bounds the record bytes of one batch (the
	// exporter's records are up to 1 MB by default).
	DefaultMaxBatchBytes = 16 << 20
	// DefaultMaxBatchSpans bounds the spans of one batch: a span write as
	// large as the pipeline's largest (pipeline.Config.MaxWriteSpans's
	// default), whatever the records hold.
	DefaultMaxBatchSpans = 50000
	// DefaultMaxBatchWait is how long a batch waits for more records after
	// its first one.
	DefaultMaxBatchWait = 250 * time.Millisecond
	// DefaultFetchMaxWait is how long the broker holds a fetch open when it
	// has no new record.
	DefaultFetchMaxWait = time.Second
	// DefaultFetchMaxBytes bounds the bytes the broker returns per fetch.
	DefaultFetchMaxBytes = 10 << 20
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a batch
	// the store refused is offered again.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	// DefaultConnMinBackoff and DefaultConnMaxBackoff bound the wait
	// before the brokers are checked again while they refuse the
	// connection.
	DefaultConnMinBackoff = time.Second
	DefaultConnMaxBackoff = 30 * time.Second
	// DefaultCommitTimeout bounds one offset commit.
	DefaultCommitTimeout = 10 * time.Second
	// DefaultLagInterval is how often the lag per partition is measured.
	DefaultLagInterval = 15 * time.Second
)

// Encoding is the payload encoding the kafka exporter was configured with
// (its traces::encoding setting).
type Encoding string

// Encodings read.
const (
	// EncodingProto: OTLP protobuf, the exporter's default.
	EncodingProto Encoding = "otlp_proto"
	// EncodingJSON: OTLP JSON.
	EncodingJSON Encoding = "otlp_json"
)

// Config configures a Receiver. Zero fields take the documented defaults;
// only Brokers is required.
type Config struct {
	// Brokers are the bootstrap brokers, "host:port".
	Brokers []string
	// Topic is the topic the exporter writes traces to (DefaultTopic).
	Topic string
	// GroupID is the consumer group (DefaultGroupID). Ingesters that share
	// it share the topic's partitions.
	GroupID string
	// StartAtLatest makes a group without committed offsets start at the
	// end of each partition instead of its beginning (which reads
	// everything the topic retains: nothing is missed).
	StartAtLatest bool

	// Encoding is the exporter's encoding (EncodingProto when empty). With
	// EncodingProto a record starting with '{' is still read as JSON.
	Encoding Encoding
	// ClaimHeader is the error-claim header name the decoder looks for
	// (ingest.DecoderConfig.ClaimHeader; empty: ingest.DefaultClaimHeader).
	ClaimHeader string
	// Sampling says where the decoder reads each span's sampling
	// probability, and what it assumes for spans that record none
	// (ingest.SamplingConfig; docs/SPEC.md §2, "sampling").
	Sampling ingest.SamplingConfig

	// MaxBatchMessages, MaxBatchBytes, MaxBatchSpans and MaxBatchWait
	// close a batch: at that many records, at that many record bytes, at
	// that many spans decoded, or that long after its first record,
	// whichever comes first. One batch is one Consume call and one commit.
	MaxBatchMessages int
	MaxBatchBytes    int
	MaxBatchSpans    int
	MaxBatchWait     time.Duration
	// FetchMaxWait and FetchMaxBytes tune the client's fetches (kafka-go's
	// MaxWait and MaxBytes; defaults DefaultFetchMaxWait and
	// DefaultFetchMaxBytes). A record larger than FetchMaxBytes is still
	// fetched (brokers return at least one record batch).
	FetchMaxWait  time.Duration
	FetchMaxBytes int
	// QueueCapacity is how many records the client prefetches (kafka-go's
	// default, 100, when zero).
	QueueCapacity int

	// MinBackoff and MaxBackoff bound the exponential backoff before a
	// refused batch is offered again, and before a failed fetch is retried.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// CommitTimeout bounds one offset commit (DefaultCommitTimeout).
	CommitTimeout time.Duration
	// ConnMinBackoff and ConnMaxBackoff bound the exponential backoff
	// between checks of the brokers while they refuse the connection
	// (DefaultConnMinBackoff, DefaultConnMaxBackoff).
	ConnMinBackoff time.Duration
	ConnMaxBackoff time.Duration

	// Consumer-group timing, passed to kafka-go (its defaults when zero:
	// 30 s, 3 s, 30 s, 5 s). Tests shorten them; production rarely needs to.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	JoinGroupBackoff  time.Duration
	// ReadBackoffMin and ReadBackoffMax are kafka-go's poll backoff on an
	// empty or failed fetch (its defaults when zero: 100 ms, 1 s).
	ReadBackoffMin time.Duration
	ReadBackoffMax time.Duration

	// Security is the TLS and SASL settings of every connection (the
	// group's, the lag probe's): a plaintext one when zero.
	Security Security
	// Dialer, when not nil, is how the client connects instead (client id,
	// a custom TLS config); the lag probe uses its TLS and SASL settings.
	Dialer *kafkago.Dialer

	// LagInterval is how often the group's lag per partition is measured
	// (DefaultLagInterval); negative disables the lag metric.
	LagInterval time.Duration

	// Logger receives bad-record, retry and client error logs
	// (slog.Default() when nil).
	Logger *slog.Logger
	// Registerer, when not nil, registers the stormradius_kafka_* metrics.
	Registerer prometheus.Registerer
	// Health, when not nil, is told (under HealthKey) while the brokers
	// refuse the connection, with what to fix, and when they accept it
	// again.
	Health Health

	// clientError, set by the Receiver, is told of each error the client
	// logs; it reports whether the failure is already reported (the
	// client's own line is then logged at debug level).
	clientError func() bool
}

// withDefaults returns c with its zero fields set, or an error naming the
// first field that is wrong.
func (c Config) withDefaults() (Config, error) {
	if len(c.Brokers) == 0 {
		return c, errors.New("kafka: config: no brokers")
	}
	for _, b := range c.Brokers {
		if b == "" {
			return c, errors.New("kafka: config: empty broker address")
		}
	}
	c.Topic = cmp.Or(c.Topic, DefaultTopic)
	c.GroupID = cmp.Or(c.GroupID, DefaultGroupID)
	switch c.Encoding {
	case "":
		c.Encoding = EncodingProto
	case EncodingProto, EncodingJSON:
	default:
		return c, fmt.Errorf("kafka: config: encoding %q: want %s or %s", c.Encoding, EncodingProto, EncodingJSON)
	}
	if err := c.Sampling.Validate(); err != nil {
		return c, fmt.Errorf("kafka: config: %w", err)
	}
	c.MaxBatchMessages = cmp.Or(c.MaxBatchMessages, DefaultMaxBatchMessages)
	c.MaxBatchBytes = cmp.Or(c.MaxBatchBytes, DefaultMaxBatchBytes)
	c.MaxBatchSpans = cmp.Or(c.MaxBatchSpans, DefaultMaxBatchSpans)
	c.MaxBatchWait = cmp.Or(c.MaxBatchWait, DefaultMaxBatchWait)
	c.FetchMaxWait = cmp.Or(c.FetchMaxWait, DefaultFetchMaxWait)
	c.FetchMaxBytes = cmp.Or(c.FetchMaxBytes, DefaultFetchMaxBytes)
	c.MinBackoff = cmp.Or(c.MinBackoff, DefaultMinBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.CommitTimeout = cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	c.ConnMinBackoff = cmp.Or(c.ConnMinBackoff, DefaultConnMinBackoff)
	c.ConnMaxBackoff = cmp.Or(c.ConnMaxBackoff, max(DefaultConnMaxBackoff, c.ConnMinBackoff))
	c.LagInterval = cmp.Or(c.LagInterval, DefaultLagInterval)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Dialer == nil && c.Security.Enabled() {
		d, err := c.Security.Dialer()
		if err != nil {
			return c, err
		}
		c.Dialer = d
	}
	// kafka-go panics when its poll backoff maximum is below its minimum,
	// also when one of them is its default (100 ms, 1 s).
	if c.ReadBackoffMin < 0 || c.ReadBackoffMax < 0 {
		return c, errors.New("kafka: config: read backoff out of range")
	}
	if c.ReadBackoffMax == 0 && c.ReadBackoffMin > time.Second {
		c.ReadBackoffMax = c.ReadBackoffMin
	}
	if c.ReadBackoffMin == 0 && c.ReadBackoffMax > 0 && c.ReadBackoffMax < 100*time.Millisecond {
		c.ReadBackoffMin = c.ReadBackoffMax
	}
	if c.ReadBackoffMax > 0 && c.ReadBackoffMax < c.ReadBackoffMin {
		return c, errors.New("kafka: config: read backoff max below min")
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"max batch messages", c.MaxBatchMessages < 0},
		{"max batch bytes", c.MaxBatchBytes < 0},
		{"max batch spans", c.MaxBatchSpans < 0},
		{"max batch wait", c.MaxBatchWait < 0},
		{"fetch max wait", c.FetchMaxWait < 0},
		{"fetch max bytes", c.FetchMaxBytes < 0},
		{"queue capacity", c.QueueCapacity < 0},
		{"min backoff", c.MinBackoff < 0},
		{"max backoff", c.MaxBackoff < c.MinBackoff},
		{"commit timeout", c.CommitTimeout < 0},
		{"connection min backoff", c.ConnMinBackoff < 0},
		{"connection max backoff", c.ConnMaxBackoff < c.ConnMinBackoff},
	} {
		if f.bad {
			return c, fmt.Errorf("kafka: config: %s out of range", f.name)
		}
	}
	return c, nil
}

// groupConfig is the kafka-go consumer group configuration of a
// partitioned Receiver: the group's membership and assignments, with
// partition readers of its own (readerConfig without a group).
func (c Config) groupConfig() kafkago.ConsumerGroupConfig {
	rc := c.readerConfig()
	return kafkago.ConsumerGroupConfig{
		ID:                    c.GroupID,
		Brokers:               c.Brokers,
		Dialer:                c.Dialer,
		Topics:                []string{c.Topic},
		WatchPartitionChanges: true, // partitions added to the topic are assigned
		HeartbeatInterval:     c.HeartbeatInterval,
		SessionTimeout:        c.SessionTimeout,
		RebalanceTimeout:      c.RebalanceTimeout,
		JoinGroupBackoff:      c.JoinGroupBackoff,
		StartOffset:           rc.StartOffset,
		Logger:                rc.Logger,
		ErrorLogger:           rc.ErrorLogger,
	}
}

// readerConfig is the kafka-go reader configuration: a consumer-group member
// that never commits by itself (FetchMessage, explicit synchronous commits).
func (c Config) readerConfig() kafkago.ReaderConfig {
	start := kafkago.FirstOffset
	if c.StartAtLatest {
		start = kafkago.LastOffset
	}
	log := c.Logger
	return kafkago.ReaderConfig{
		Brokers:           c.Brokers,
		GroupID:           c.GroupID,
		Topic:             c.Topic,
		Dialer:            c.Dialer,
		QueueCapacity:     c.QueueCapacity,
		MinBytes:          1,
		MaxBytes:          c.FetchMaxBytes,
		MaxWait:           c.FetchMaxWait,
		ReadLagInterval:   -1, // kafka-go measures lag only without a group; the lag probe does it
		HeartbeatInterval: c.HeartbeatInterval,
		CommitInterval:    0, // synchronous: CommitMessages returns once the broker answered
		SessionTimeout:    c.SessionTimeout,
		RebalanceTimeout:  c.RebalanceTimeout,
		JoinGroupBackoff:  c.JoinGroupBackoff,
		StartOffset:       start,
		ReadBackoffMin:    c.ReadBackoffMin,
		ReadBackoffMax:    c.ReadBackoffMax,
		// kafka-go's info log is a line per fetch cycle and rebalance step:
		// debug. Its error log is what an operator needs (coordinator
		// lost, broker unreachable): warn, since it retries by itself.
		Logger: kafkago.LoggerFunc(func(format string, args ...any) {
			if log.Enabled(context.Background(), slog.LevelDebug) {
				log.Debug("kafka client: " + fmt.Sprintf(format, args...))
			}
		}),
		ErrorLogger: kafkago.LoggerFunc(func(format string, args ...any) {
			level := slog.LevelWarn
			if c.clientError != nil && c.clientError() {
				level = slog.LevelDebug // the connection failure is reported, once
			}
			log.Log(context.Background(), level, "kafka client: "+fmt.Sprintf(format, args...))
		}),
	}
}
