package kafka

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a batch is offered to the store again (the reason label of
// stormradius_kafka_consume_retries_total).
const (
	reasonBackpressure = "backpressure"
	reasonUnavailable  = "unavailable"
	reasonTimeout      = "timeout"
)

// metrics are a Receiver's counters. Each carries the topic as a constant
// label, so that receivers of several topics can share a registry.
type metrics struct {
	messages      prometheus.Counter
	bytes         prometheus.Counter
	bad           prometheus.Counter
	empty         prometheus.Counter
	spans         prometheus.Counter
	batches       prometheus.Counter
	retries       *prometheus.CounterVec
	commitErrors  prometheus.Counter
	fetchErrors   prometheus.Counter
	pausedSeconds prometheus.Counter
	paused        prometheus.Gauge
	lag           *prometheus.GaugeVec
	rebalances    prometheus.Counter
	insecure      prometheus.Gauge
	connErrors    *prometheus.CounterVec
	connFailing   prometheus.Gauge
}

func newMetrics(topic string, reg prometheus.Registerer) (*metrics, error) {
	labels := prometheus.Labels{"topic": topic}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stormradius_kafka_" + name, Help: help, ConstLabels: labels,
		})
	}
	m := &metrics{
		messages: counter("messages_total",
			"Records fetched from Kafka (a record read again after a restart or rebalance counts again)."),
		bytes: counter("message_bytes_total",
			"Bytes of record values fetched from Kafka, after Kafka-level decompression."),
		bad: counter("bad_messages_total",
			"Records that did not decode as OTLP traces: logged, skipped and committed."),
		empty: counter("empty_messages_total",
			"Records that decoded to no span (the exporter never writes one: another encoding or signal on the topic?)."),
		spans: counter("spans_total",
			"Spans the store accepted (durably stored) from Kafka records."),
		batches: counter("batches_total",
			"Batches the store accepted; each is one offset commit."),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "stormradius_kafka_consume_retries_total",
			Help:        "Times the store refused a batch and it was offered again after a backoff, by reason.",
			ConstLabels: labels,
		}, []string{"reason"}),
		commitErrors: counter("commit_errors_total",
			"Offset commits that failed after the store accepted the batch (its records may be read again)."),
		fetchErrors: counter("fetch_errors_total",
			"Fetches that failed (the client retries; a broker or coordinator may be unreachable)."),
		pausedSeconds: counter("paused_seconds_total",
			"Seconds consumption was paused because the store refused a batch (backpressure or outage)."),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "stormradius_kafka_paused",
			Help:        "1 while consumption is paused because the store refuses a batch, else 0.",
			ConstLabels: labels,
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stormradius_kafka_lag",
			Help: "Records in the partition after the consumer group's committed offset, as of the last probe " +
				"(the group's lag, the same from every member).",
			ConstLabels: labels,
		}, []string{"partition"}),
		rebalances: counter("rebalances_total",
			"Consumer-group generations this member joined."),
		insecure: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "stormradius_kafka_tls_insecure_skip_verify",
			Help:        "1 when the brokers' TLS certificates are not verified (--kafka-tls-insecure-skip-verify: tests only), else 0.",
			ConstLabels: labels,
		}),
		connErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stormradius_kafka_connection_errors_total",
			Help: "Checks of the brokers that found them refusing our connection, by reason (auth, tls_unknown_ca, tls_expired, " +
				"tls_name, tls_client_cert, tls_mismatch, tls, unreachable, connect); while they refuse, a check every 1 s doubling to 30 s (by default). " +
				"The log and /readyz say what to fix.",
			ConstLabels: labels,
		}, []string{"reason"}),
		connFailing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "stormradius_kafka_connection_failing",
			Help:        "1 while the brokers refuse our connection (/readyz is not ready and says why), else 0.",
			ConstLabels: labels,
		}),
	}
	for _, r := range []string{reasonBackpressure, reasonUnavailable, reasonTimeout} {
		m.retries.WithLabelValues(r) // export zeros, so rate() works from the start
	}
	for _, r := range connReasons {
		m.connErrors.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{
		m.messages, m.bytes, m.bad, m.empty, m.spans, m.batches, m.retries, m.commitErrors,
		m.fetchErrors, m.pausedSeconds, m.paused, m.lag, m.rebalances, m.insecure, m.connErrors, m.connFailing,
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done) // all or nothing: a retry with another topic can register
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("kafka: register metrics: a receiver of topic %q is already registered: %w", topic, err)
			}
			return nil, fmt.Errorf("kafka: register metrics: %w", err)
		}
	}
	return m, nil
}
