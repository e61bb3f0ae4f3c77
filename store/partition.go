package store

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// Partitions. The analysis of a store can be split into partitions, each
// owned by one analyser at a time (docs/ARCHITECTURE.md, "Scaling out"):
// a Kafka partition of the topic the collector's kafka exporter writes
// with partition_traces_by_id, or an OTLP instance that a collector's
// loadbalancing exporter routes traces to by trace id. Every trace's spans
// reach one partition, so a partition's pending traces, span log,
// checkpoint, records and the part of each window state its records make
// are its own: the analyser that owns it keeps them as the single
// analyser keeps a whole store, and hands them over (through the store) on
// a rebalance. What depends on more than one trace — a window's state,
// against which every trace is evaluated — is the sum of the partitions'
// states: each analyser reads the others' (Peers) and evaluates its own
// records against the sum.
//
// The store itself is the default partition, "": a store analysed by one
// instance, as before partitions existed, is that partition alone.

// ErrBadPartition: a partition name the store does not accept.
var ErrBadPartition = errors.New("bad partition name")

// Partitioned is a store whose analysis can be split into partitions.
type Partitioned interface {
	// Partition returns the view of the store that partition p's analyser
	// uses. It shares the store's connections; the store must stay open
	// while it is used, and the view's Close releases the view's lease
	// only. p is a name CheckPartition accepts; "" is the store itself.
	//
	// Through the view:
	//   - WriteSpans writes p's spans, with sequences that increase from
	//     one write of p to the next; SpansAfter reads p's writes only;
	//     TraceSpans reads a trace's spans whichever partition wrote them.
	//   - Records reads any partition's records; WindowRecords only p's;
	//     Apply stores its records as p's (a record that was another
	//     partition's becomes p's), its states as p's part of the windows,
	//     its watermark as p's checkpoint; Watermark and State read p's.
	//   - Report, Summaries, PutSummaries and StaleSummaries are the
	//     store's, shared by every partition (a window's summary is
	//     computed from the sum of the partitions' states).
	//   - The lease is p's own: one analyser per partition.
	//   - DeleteBefore is the store's (whole days of every partition).
	Partition(p string) (PartitionStore, error)
}

// PartitionStore is one partition's view of a partitioned store.
type PartitionStore interface {
	Store
	Peers
}

// Peers reads what the other partitions stored: a partition's analyser
// evaluates its traces against its own window states plus theirs.
type Peers interface {
	// PeerState returns the sum of the states of window w that every
	// other partition stored (an empty state when none did).
	PeerState(ctx context.Context, w int64) (*analysis.State, error)
	// PeerWindows returns the windows whose state another partition
	// stored at or after since (unix nanoseconds, as the writer's clock
	// read it: callers look back further than the clocks may disagree).
	PeerWindows(ctx context.Context, since int64) ([]int64, error)
}

// Routing finds the traces a partition shares with others: a collector
// that does not route by trace id (a kafka exporter without
// partition_traces_by_id, a loadbalancing exporter routing by service)
// sends one trace's spans to several partitions, each of which would
// analyse its part. Partition views implement it.
type Routing interface {
	// SharedTraces returns, of ids (traces the partition wrote spans of),
	// those whose spans another partition wrote too, each with the least
	// name of those partitions.
	SharedTraces(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]string, error)
	// PartitionName is the view's partition.
	PartitionName() string
}

// SourcePositions keeps how far a partition read an outside source — the time
// up to which a source table's rows were read and their spans stored
// (ingest/chsource): written once what was read is stored, read at start
// to resume. Every store view (the default partition's too) implements it.
type SourcePositions interface {
	// SourcePosition returns the partition's position, and false when
	// it has none yet.
	SourcePosition(ctx context.Context) (int64, bool, error)
	// SetSourcePosition stores the partition's position (under its
	// lease).
	SetSourcePosition(ctx context.Context, v int64) error
}

// MaxPartitionName bounds a partition's name.
const MaxPartitionName = 300 // a Kafka topic name is at most 249 bytes

// CheckPartition returns an error wrapping ErrBadPartition unless p is a
// partition name: at most MaxPartitionName bytes of letters, digits and
// "._-/:". "" (the store itself) is one.
func CheckPartition(p string) error {
	if len(p) > MaxPartitionName {
		return &partitionError{p, "longer than " + strconv.Itoa(MaxPartitionName) + " bytes"}
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/:", c)) {
			return &partitionError{p, "only letters, digits and ._-/: are allowed"}
		}
	}
	return nil
}

type partitionError struct{ p, why string }

func (e *partitionError) Error() string { return "partition " + quoteName(e.p) + ": " + e.why }
func (e *partitionError) Unwrap() error { return ErrBadPartition }

// quoteName quotes a name for an error, cut to the bound.
func quoteName(p string) string {
	if len(p) > MaxPartitionName {
		p = p[:MaxPartitionName] + "…"
	}
	return `"` + strings.ToValidUTF8(p, "?") + `"`
}

// KafkaPartition names the analysis partition of a Kafka topic's
// partition: "kafka:<topic>/<partition>".
func KafkaPartition(topic string, partition int) string {
	return "kafka:" + topic + "/" + strconv.Itoa(partition)
}
