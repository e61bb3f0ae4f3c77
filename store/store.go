// Package store defines what stormradius needs from storage: durable spans,
// per-trace records (results and the facts to re-evaluate them), rollups
// that answer reports without reading spans, window summaries and states,
// and the pipeline's checkpoint. Implementations live in sub-packages named
// after their database (store/sqlite, store/clickhouse) and are checked by
// one conformance suite (store/storetest).
//
// Errors are sentinels, wrapped with context: receivers and the REST layer
// map them to statuses with errors.Is.
package store

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// Sentinel errors.
var (
	// ErrNotFound: no such trace, record or window.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the database cannot be reached or refused the write;
	// nothing was stored, the client should retry later.
	ErrUnavailable = errors.New("store unavailable")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrCorrupt: stored data could not be decoded.
	ErrCorrupt = errors.New("stored data is corrupt")
	// ErrReadOnly: the store was opened read-only (a reader such as
	// cmd/api); nothing was written.
	ErrReadOnly = errors.New("store opened read-only")
	// ErrNotMigrated: the stored schema is older than this release's, and
	// the store was opened read-only, which migrates nothing.
	ErrNotMigrated = errors.New("store schema not migrated")
)

// Record is what is stored about one analysed trace: its result, evaluated
// against its window, and its facts (the assembled trace without spans),
// so that it can be evaluated again when the window changes.
type Record struct {
	TraceID graph.TraceID
	// Start is the trace's start (unix nanoseconds); Window the index of
	// its window.
	Start  int64
	Window int64
	// API is the root API, "" for a trace of fragments only.
	API string
	// Seq is the highest span write sequence the record covers.
	Seq uint64
	// Result is the trace's result.
	Result *analysis.TraceResult
	// Facts is graph.Trace.AppendBinary of the assembled trace.
	Facts []byte
	// Edges are the EdgeKeys of the dependencies the trace's calls use,
	// sorted, without repeats: a record goes stale when one of their
	// classes changes.
	Edges []uint64
}

// Minute returns the unix minute of the record's start: its rollup bucket.
func (r *Record) Minute() int64 { return analysis.MinuteOf(r.Start) }

// EdgeKey hashes a dependency for Record.Edges. A collision only makes a
// record be re-evaluated for nothing.
func EdgeKey(e graph.Edge) uint64 {
	h := fnv.New64a()
	h.Write([]byte(e.Caller))
	h.Write([]byte{0})
	h.Write([]byte(e.Callee.Service))
	h.Write([]byte{0})
	h.Write([]byte(e.Callee.Operation))
	return h.Sum64()
}

// Change replaces the record of one trace: Old is the record as the store
// holds it (nil when it holds none), New the record that replaces it (nil
// deletes it). Rollups move from Old to New.
type Change struct {
	Old, New *Record
}

// ID returns the trace id the change is about.
func (c Change) ID() graph.TraceID {
	if c.New != nil {
		return c.New.TraceID
	}
	if c.Old != nil {
		return c.Old.TraceID
	}
	return graph.TraceID{}
}

// Query selects traces by the minute of their start: a trace is in
// [From, To) when its start minute's first instant is. Zero From and To mean
// unbounded. API, when set, restricts the per-API aggregates to that API.
type Query struct {
	From, To int64 // unix nanoseconds
	API      string
}

// MinuteRange returns the minutes the query covers: [lo, hi). From and To
// may be anything to the ends of int64, where a partial minute starts
// beyond what an int64 holds: rounding up reads the remainder instead of
// multiplying the minute back.
func (q Query) MinuteRange() (lo, hi int64) {
	lo, hi = -1<<62, 1<<62
	if q.From != 0 {
		lo = analysis.MinuteOf(q.From)
		if q.From%int64(time.Minute) != 0 {
			lo++ // a minute starting before From is not in the range
		}
	}
	if q.To != 0 {
		hi = analysis.MinuteOf(q.To)
		if q.To%int64(time.Minute) != 0 {
			hi++ // a minute starting before To is in the range
		}
	}
	return lo, hi
}

// Bound returns the instant t (unix nanoseconds) as a Query's From or To.
// Zero there means unbounded, so the epoch itself becomes the nanosecond
// before it, which bounds the same minutes: a range ending at the epoch
// holds nothing rather than everything.
func Bound(t int64) int64 {
	if t == 0 {
		return -1
	}
	return t
}

// MinuteStart returns the first instant of minute m in unix nanoseconds,
// held to the ends of int64 for the minutes that start beyond them (as a
// Query's From or To it then bounds the same minutes); never 0, which a
// Query reads as unbounded (see Bound).
func MinuteStart(m int64) int64 {
	const perMinute = int64(time.Minute)
	switch {
	case m > math.MaxInt64/perMinute:
		return math.MaxInt64
	case m < math.MinInt64/perMinute:
		return math.MinInt64
	}
	return Bound(m * perMinute)
}

// WindowRange returns the windows (inclusive) that hold the minutes q
// selects; lo > hi when it selects none.
func WindowRange(q Query, window time.Duration) (lo, hi int64) {
	mlo, mhi := q.MinuteRange()
	if mlo >= mhi {
		return 1, 0
	}
	lo, hi = math.MinInt64, math.MaxInt64
	m := int64(time.Minute)
	if q.From != 0 {
		// From's minute starts at or after From: it is an int64.
		lo = analysis.WindowOf(mlo*m, window)
	}
	if q.To != 0 {
		// The last nanosecond of the last minute, which for the last
		// minute of int64 is past its end.
		last := int64(math.MaxInt64)
		if mhi-1 < math.MaxInt64/m {
			last = mhi*m - 1
		}
		hi = analysis.WindowOf(last, window)
	}
	return lo, hi
}

// Contains reports whether a trace starting at unixNano is in the range.
func (q Query) Contains(unixNano int64) bool {
	lo, hi := q.MinuteRange()
	m := analysis.MinuteOf(unixNano)
	return m >= lo && m < hi
}

// SpanWriter stores spans.
type SpanWriter interface {
	// WriteSpans stores spans durably: once it returns nil they survive a
	// crash. A span sent again (same trace id and span id) is read back
	// once by TraceSpans. It returns the write's sequence number,
	// increasing from one write to the next; spans of one write share it.
	WriteSpans(ctx context.Context, spans []graph.Span) (seq uint64, err error)
}

// TraceStamper is a store that tells cheaply when what it returns for a
// trace (TraceSpans, Records) may have changed, so that a reader can keep
// what it derived from them (the read API's trace view,
// docs/ARCHITECTURE.md "The read API's cache"). TraceStamp returns a
// number that changes after every span write to trace id, every change of
// its record and every retention: this process's writes change it before
// they return; another process's within the same interval as Position.
// It may also change for nothing (a write of another trace). Stamps
// compare only with stamps the same store returned for the same trace. ok
// is false when the store cannot tell (the reader reads the trace each
// time).
type TraceStamper interface {
	TraceStamp(ctx context.Context, id graph.TraceID) (stamp uint64, ok bool, err error)
}

// SpanWriteStarter is a SpanWriter whose writes may overlap: the pipeline
// starts a write while earlier ones are still being made durable, so that
// the clients of each wait for one write's latency, not for the writes
// queued before theirs (docs/ARCHITECTURE.md, "Durable write"). A store
// whose writes cannot overlap (one writer connection) does not implement
// it; the pipeline then writes one at a time.
type SpanWriteStarter interface {
	SpanWriter
	// StartSpans takes the write's sequence number and prepares the
	// write of spans; commit makes it durable, as WriteSpans does, and
	// may run while later writes are started and committed. A write
	// started later gets a higher sequence, whichever is committed
	// first; a sequence is not reused, even when its commit fails. The
	// caller must call commit exactly once (the store's Close waits for
	// the commits of the writes started), and must not change spans
	// until commit returns. WriteSpans is StartSpans then commit.
	StartSpans(ctx context.Context, spans []graph.Span) (seq uint64, commit func(context.Context) error, err error)
}

// SpanReader reads stored spans.
type SpanReader interface {
	// TraceSpans appends the stored spans of a trace to dst.
	TraceSpans(ctx context.Context, id graph.TraceID, dst []graph.Span) ([]graph.Span, error)
	// SpansAfter calls fn, in write order, with the spans of every write
	// whose sequence is above seq (as they were written: a span sent again
	// may be in several), and the sequence of each.
	SpansAfter(ctx context.Context, seq uint64, fn func(seq uint64, spans []graph.Span) error) error
}

// Batch is one atomic step of the pipeline: records replaced, the states
// of the windows they touch after the change, and the checkpoint.
type Batch struct {
	Changes []Change
	// States are the full states of the windows the changes touch, as they
	// are once the changes are applied: each the sum of the facts of the
	// window's records.
	States map[int64]*analysis.State
	// Watermark: every span write up to this sequence is covered by stored
	// records (0 leaves the checkpoint unchanged).
	Watermark uint64
}

// Records stores one record per trace.
type Records interface {
	// Records returns the stored records of the given traces; traces
	// without one are absent from the map.
	Records(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]*Record, error)
	// WindowRecords calls fn with every record of window w; with edges not
	// empty, only those using at least one of them (their EdgeKeys).
	WindowRecords(ctx context.Context, w int64, edges []uint64, fn func(*Record) error) error
	// Apply stores a batch: records replaced, rollups kept the exact sum of
	// the stored records' results, window states (their summaries marked
	// stale) and the checkpoint. It is atomic where the database allows
	// (see State for where it is not).
	Apply(ctx context.Context, b Batch) error
	// Watermark returns the last checkpoint stored by Apply.
	Watermark(ctx context.Context) (uint64, error)
}

// Rollups answer reports from pre-aggregated records.
type Rollups interface {
	// Report returns the aggregate of the records the query selects.
	Report(ctx context.Context, q Query) (*analysis.Report, error)
}

// Windows stores per-window data.
type Windows interface {
	// State returns the stored state of window w, ErrNotFound when the
	// window has no record. exact reports that it is known to be the sum
	// of the window's stored records' facts; a store that cannot apply a
	// batch atomically says false after an unclean shutdown, and the
	// caller rebuilds the state from WindowRecords.
	State(ctx context.Context, w int64) (s *analysis.State, exact bool, err error)
	// PutSummaries stores window summaries, replacing those of the same
	// windows, and marks them current.
	PutSummaries(ctx context.Context, sums []*analysis.WindowSummary) error
	// StaleSummaries returns the windows whose state an Apply changed since
	// their summary was last put: after a crash, their summaries are
	// computed again.
	StaleSummaries(ctx context.Context) ([]int64, error)
	// Summaries returns the stored summaries of windows lo..hi (inclusive),
	// oldest first.
	Summaries(ctx context.Context, lo, hi int64) ([]*analysis.WindowSummary, error)
}

// Store is everything the service needs.
type Store interface {
	SpanWriter
	SpanReader
	Records
	Rollups
	Windows
	// Leaser: the analysing process holds the store's lease (lease.go);
	// readers do not take it.
	Leaser
	// DeleteBefore drops spans, records, rollups, states and summaries of
	// traces that started before the UTC day holding t (unix nanoseconds):
	// whole days, so that no rollup keeps deleted data, without a full
	// scan. Spans are dropped by the time they were written.
	DeleteBefore(ctx context.Context, t int64) error
	// Position returns the store's write position: a positive number that
	// grows whenever what a read other than a span read (TraceSpans,
	// SpansAfter) could return changes — records applied, summaries put,
	// retention (compaction changes no answer) — and never moves for a read. This process's
	// writes move it before they return; another process's writes to the
	// same database within a short interval (store/internal/position's
	// DefaultEvery). It may also move for nothing (a lease renewal, a
	// background merge). Positions compare only with positions the same
	// store returned: a reader keys what it derived from the store with
	// it, and reads again when it moves. Span writes do not move it (they
	// have their own sequence), so that ingestion does not invalidate the
	// readers' caches of rollups.
	Position(ctx context.Context) (uint64, error)
	// Window returns the length of the analysis windows the stored data
	// was analysed with: window indexes in records, states and summaries
	// count in it.
	Window() time.Duration
	// Close flushes and closes the store, then releases the lease it holds;
	// a store closed cleanly has exact states when opened again.
	Close() error
}

// NewRecord returns the record of trace t with result r, covering span
// writes up to seq.
func NewRecord(t *graph.Trace, r *analysis.TraceResult, seq uint64) *Record {
	rec := &Record{TraceID: t.ID, Start: r.Start, Window: r.Window, API: r.API, Seq: seq, Result: r,
		Facts: t.AppendBinary(nil)}
	rec.Edges = TraceEdges(t, rec.Edges)
	return rec
}

// TraceEdges appends the EdgeKeys of the dependencies t's calls use to dst,
// sorted, without repeats.
func TraceEdges(t *graph.Trace, dst []uint64) []uint64 {
	start := len(dst)
	for i := range t.Calls {
		dst = append(dst, EdgeKey(analysis.CallEdge(t, &t.Calls[i])))
	}
	tail := dst[start:]
	slices.Sort(tail)
	return append(dst[:start], slices.Compact(tail)...)
}

// SharesEdge reports whether two sorted lists of EdgeKeys share one.
func SharesEdge(a, b []uint64) bool {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			return true
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return false
}

// Compactor is a store whose reads of closed days get cheaper once they
// are settled: the pipeline calls Compact with its retention, for the
// days before the UTC day holding t (unix nanoseconds). Compacting is an
// optimisation only: reads give the same answers before and after.
type Compactor interface {
	Compact(ctx context.Context, t int64) error
}

// IncidentReader is what detecting incidents needs beyond rollups. A
// store without it lists no incidents.
type IncidentReader interface {
	// HotMinutes returns, for the minutes q covers, the nodes whose
	// owned failures reached both minOwned and minRate of their requests
	// in a minute (minute → node → counts).
	HotMinutes(ctx context.Context, q Query, minOwned int64, minRate float64) (analysis.MinuteNodes, error)
	// LastMinute returns the last minute q covers that holds a trace.
	LastMinute(ctx context.Context, q Query) (minute int64, ok bool, err error)
	// Examples returns up to n traces of q's range in which owner had a
	// failure event, in analysis.ExampleOrder; never more than
	// analysis.MaxExamples, whatever n.
	Examples(ctx context.Context, q Query, owner graph.Node, n int) ([]graph.TraceID, error)
}

// SeriesReader is an optional fast path for a root API's figures over
// time: one read for every step rather than a Report per step.
type SeriesReader interface {
	// APISeries returns, for each step of stepMinutes whole minutes from
	// the first minute q covers to the last, the aggregate of q.API's
	// traces that started in it (nil where there are none); the last step
	// may be shorter. Only the API's own figures are filled: totals,
	// histograms, not owners. q must be bounded and hold a minute, and
	// stepMinutes be positive: an error otherwise.
	APISeries(ctx context.Context, q Query, stepMinutes int64) ([]*analysis.APIAgg, error)
}
