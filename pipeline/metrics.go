package pipeline

import "github.com/prometheus/client_golang/prometheus"

// metrics are the pipeline's Prometheus metrics (docs/SPEC.md §6: every drop or
// partial trace is counted).
type metrics struct {
	stored        prometheus.Counter
	rejected      *prometheus.CounterVec // by reason: backpressure, store
	pendingTraces prometheus.Gauge
	pendingSpans  prometheus.Gauge
	flushed       *prometheus.CounterVec // by reason: idle, age, early, flush, shutdown
	reopened      prometheus.Counter
	reevaluated   prometheus.Counter
	analysed      prometheus.Counter
	duplicates    prometheus.Counter
	recovered     prometheus.Counter
	writeSeconds  prometheus.Histogram
	applySeconds  prometheus.Histogram
	storeErrors   *prometheus.CounterVec // by operation
	skewed        prometheus.Counter
	idReused      prometheus.Counter
	truncated     prometheus.Counter
	sampInvalid   prometheus.Counter     // Span.Sampling invalid
	sampConfig    prometheus.Counter     // Span.Sampling configured
	split         prometheus.Counter     // traces set aside: spans in another partition too
	foldedVec     *prometheus.CounterVec // by kind: foldKinds
	folded        [4]prometheus.Counter  // its series, in analysis.Folded's bit order
}

// foldKinds are the kind labels of stormradius_traces_folded_total, in the
// bit order of analysis.Folded (FoldedAPI first).
var foldKinds = [4]string{"api", "service", "operation", "version"}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := func(c prometheus.Collector) {
		if reg != nil {
			reg.MustRegister(c)
		}
	}
	m := &metrics{
		stored: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_spans_stored_total",
			Help: "Spans durably written (acknowledged to their sender)."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stormradius_spans_refused_total",
			Help: "Spans refused before storage, by reason: backpressure (too many in flight) or store (write failed); the sender was told to retry."}, []string{"reason"}),
		pendingTraces: prometheus.NewGauge(prometheus.GaugeOpts{Name: "stormradius_traces_pending",
			Help: "Traces stored and waiting to be analysed (until idle)."}),
		pendingSpans: prometheus.NewGauge(prometheus.GaugeOpts{Name: "stormradius_spans_pending",
			Help: "Spans of pending traces held in memory."}),
		flushed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stormradius_traces_flushed_total",
			Help: "Pending traces analysed, by reason: idle, age (max trace age), early (buffer over its share), flush, shutdown."}, []string{"reason"}),
		reopened: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_traces_reopened_total",
			Help: "Traces analysed again because spans arrived after their analysis."}),
		reevaluated: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_records_reevaluated_total",
			Help: "Stored trace results replaced because their window's state changed an edge they use."}),
		analysed: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_traces_analysed_total",
			Help: "Trace analyses stored (re-opened traces count again)."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_spans_duplicate_total",
			Help: "Spans dropped at assembly as duplicates of a span id already in their trace."}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_spans_recovered_total",
			Help: "Stored spans beyond the checkpoint read back at start (after a crash) and analysed."}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "stormradius_span_write_seconds",
			Help: "Latency of group-committed span writes.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "stormradius_analysis_batch_seconds",
			Help: "Latency of one analysis step: assembly, evaluation and the store batch.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stormradius_store_errors_total",
			Help: "Store operations that failed, by operation."}, []string{"op"}),
		skewed: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_spans_clock_skew_total",
			Help: "Spans stored whose start is more than an hour away from the time they arrived (clock skew, or replayed data): they count in the window of their own timestamps."}),
		idReused: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_trace_id_reused_total",
			Help: "Re-opened traces whose new spans start more than a window after the trace: a client reusing trace ids; the spans are merged into the earlier trace."}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_spans_name_truncated_total",
			Help: "Spans stored with a name (service, version, span name, operation or peer) cut to 256 bytes."}),
		sampInvalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_spans_sampling_invalid_total",
			Help: "Spans stored whose recorded sampling probability was unusable (a malformed tracestate ot=th, a probability of 0 or above 1, an adjusted count below 1, not a number): each counts as one span."}),
		sampConfig: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_spans_sampling_configured_total",
			Help: "Spans stored that recorded no sampling probability and were given the one configured for their service or input (--sampling-service-probability, --sampling-probability)."}),
		split: prometheus.NewCounter(prometheus.CounterOpts{Name: "stormradius_traces_split_total",
			Help: "Traces set aside because another partition (Kafka partition, or ingest --partition) wrote spans of them too: the collector does not route by trace id (kafka exporter: partition_traces_by_id: true). Their figures are left out; each partition that held spans of one counts it."}),
		foldedVec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stormradius_traces_folded_total",
			Help: "Trace analyses in which names past their window's caps were counted under the reserved buckets, by kind: api (root API under ⟨other APIs⟩), service, operation, version (re-opened traces count again)."}, []string{"kind"}),
	}
	for i, kind := range foldKinds {
		m.folded[i] = m.foldedVec.WithLabelValues(kind) // listed at 0 from the start
	}
	for _, c := range []prometheus.Collector{m.stored, m.rejected, m.pendingTraces, m.pendingSpans, m.flushed, m.reopened,
		m.reevaluated, m.analysed, m.duplicates, m.recovered, m.writeSeconds, m.applySeconds, m.storeErrors, m.skewed, m.idReused,
		m.truncated, m.sampInvalid, m.sampConfig, m.split, m.foldedVec} {
		f(c)
	}
	return m
}
