package clickhouse

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/fence"
	"github.com/stormradius/stormradius/store/internal/spangroup"
)

var spanColumns = []string{"day", "trace_id", "seq", "data", "part"}

// spanWriter is the span encoder and its buffers, reused from write to
// write (under spanMu), and the buffers of the writes' data, each back in
// free once its insert returned (the driver copies what it is given):
// a write's rows are views of its buffer, not a copy.
type spanWriter struct {
	enc    graph.TraceEncoder
	groups spangroup.TraceGroups
	order  []int

	freeMu sync.Mutex // not spanMu: Close holds it while inserts end
	free   [][]byte
}

// take returns a buffer for a write's data.
func (w *spanWriter) take() []byte {
	w.freeMu.Lock()
	defer w.freeMu.Unlock()
	if n := len(w.free); n > 0 {
		b := w.free[n-1]
		w.free = w.free[:n-1]
		return b[:0]
	}
	return nil
}

// give takes back a write's buffer, its insert returned; a few are kept,
// none huge.
func (w *spanWriter) give(b []byte) {
	w.freeMu.Lock()
	defer w.freeMu.Unlock()
	if cap(b) <= 16<<20 && len(w.free) < 4 {
		w.free = append(w.free, b)
	}
}

// byTraceID returns the groups of the write (w.groups, of spans) in the
// order of their trace ids: a block in the table's key order, which the
// server stores without sorting it (the log row's zero id comes first).
func (w *spanWriter) byTraceID(spans []graph.Span) []int {
	g := &w.groups
	w.order = w.order[:0]
	for k := range g.Ends {
		w.order = append(w.order, k)
	}
	slices.SortFunc(w.order, func(a, b int) int {
		return bytes.Compare(spans[g.First(a)].TraceID[:], spans[g.First(b)].TraceID[:])
	})
	return w.order
}

// Every write stores, beside its traces' rows, a log row under logID (no
// span has the all-zero id: receivers refuse it), holding logMarker then
// the write's trace ids. Log rows lead every part's key order, so recovery
// reads the log by primary key; a write and its log row are one insert.
const logMarker = 0xff

var logID [16]byte

// WriteSpans stores spans: StartSpans, then its commit.
func (s *Store) WriteSpans(ctx context.Context, spans []graph.Span) (uint64, error) {
	seq, commit, err := s.StartSpans(ctx, spans)
	if err != nil {
		return 0, err
	}
	if err := commit(ctx); err != nil {
		return 0, err
	}
	return seq, nil
}

// StartSpans (store.SpanWriteStarter) takes the partition's next sequence
// and encodes spans as one insert in the write's day partition: a row per
// trace (graph.TraceEncoder.AppendSpans) and the write's log row, in
// trace id order.
func (s *Store) StartSpans(ctx context.Context, spans []graph.Span) (uint64, func(context.Context) error, error) {
	if err := s.checkWrite("write spans"); err != nil {
		return 0, nil, fence.Retryable(err)
	}
	if err := s.ensureProgress(ctx); err != nil {
		return 0, nil, err
	}
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	if err := s.checkWrite("write spans"); err != nil {
		return 0, nil, fence.Retryable(err)
	}
	s.seq++
	seq := s.seq
	day := dayDate(dayOf(time.Now().UnixNano()))

	w := &s.spanW
	g := &w.groups
	g.Group(spans)
	order := w.byTraceID(spans)
	ids := append(make([][]byte, 0, 1+len(order)), logID[:])
	buf := append(w.take(), logMarker)
	for _, k := range order {
		id := &spans[g.First(k)].TraceID
		buf = append(buf, id[:]...)
		ids = append(ids, id[:])
	}
	ends := append(make([]int, 0, 1+len(order)), len(buf))
	for _, k := range order {
		buf = w.enc.AppendSpansOf(buf, spans, g.Indexes(k))
		ends = append(ends, len(buf))
	}
	// Views of buf, the write's own until its insert returned.
	data, n := views(buf, ends), len(ids)
	buckets := bucketsOf(ids[1:])
	s.inserts.Add(1) // Close waits for it, then releases the lease
	var once sync.Once
	commit := func(ctx context.Context) error {
		err := errCommitted
		once.Do(func() {
			defer s.inserts.Done()
			err = s.insert(ctx, "write spans", "trace_spans", spanColumns, slices.Repeat([]time.Time{day}, n), ids,
				slices.Repeat([]uint64{seq}, n), data, slices.Repeat([]string{s.name}, n))
			clear(data)
			w.give(buf)
			// Even when it failed: its rows may be stored.
			s.watch.move(buckets)
			s.spansWritten(buckets)
		})
		return err
	}
	return seq, commit, nil
}

// errCommitted: a write's commit was called again.
var errCommitted = errors.New("clickhouse: write spans: committed twice")

// spanRow is a row of trace_spans: a trace's spans of a write, or a log row.
type spanRow struct {
	traceID graph.TraceID
	seq     uint64
	data    []byte
}

// decode appends the row's spans to dst (none from a log row).
func (r *spanRow) decode(dst []graph.Span, intern func([]byte) string) ([]graph.Span, error) {
	if len(r.data) > 0 && r.data[0] == logMarker {
		return dst, nil
	}
	return graph.DecodeSpans(r.data, dst, intern)
}

// readSpans calls fn with every stored row of the spans of ids (a span
// re-sent is in several), only those of the partition's writes lo..hi
// when hi > 0.
func (s *Store) readSpans(ctx context.Context, ids []graph.TraceID, lo, hi uint64, fn func(spanRow)) error {
	seqs := ""
	if hi > 0 {
		seqs = ` AND seq >= ` + utoa(lo) + ` AND seq <= ` + utoa(hi) + ` AND part = ` + quote(s.name)
	}
	for part := range slices.Chunk(ids, 1000) {
		var row spanRow
		err := s.query(ctx, "read spans", `SELECT trace_id, seq, data FROM trace_spans WHERE trace_id IN (`+idList(part)+`)`+seqs,
			func(r driver.Rows) error {
				if err := r.Scan(&row.traceID, &row.seq, &row.data); err != nil {
					return err
				}
				c := row
				c.data = slices.Clone(row.data)
				fn(c)
				return nil
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// TraceSpans appends the stored spans of trace id to dst, each once (the
// first stored, when a client sent it again).
func (s *Store) TraceSpans(ctx context.Context, id graph.TraceID, dst []graph.Span) ([]graph.Span, error) {
	if err := s.checkOpen("read trace spans"); err != nil {
		return dst, err
	}
	var rows []spanRow
	err := s.readSpans(light(ctx), []graph.TraceID{id}, 0, 0, func(r spanRow) { rows = append(rows, r) })
	if err != nil {
		return dst, err
	}
	slices.SortStableFunc(rows, func(a, b spanRow) int { return cmp.Compare(a.seq, b.seq) })
	in := graph.Interner{}
	start := len(dst)
	for i := range rows {
		if dst, err = rows[i].decode(dst, in.Intern); err != nil {
			return dst, fmt.Errorf("clickhouse: trace %s: %w: %w", id, store.ErrCorrupt, err)
		}
	}
	return spangroup.DedupSpans(dst, start), nil
}

// spansAfterChunk bounds the writes read back at a time.
const spansAfterChunk = 500

// SpansAfter calls fn, in write order, with the spans of every write of
// the partition after seq: the write log after seq, then the rows of
// those writes by primary key, spansAfterChunk writes at a time.
func (s *Store) SpansAfter(ctx context.Context, seq uint64, fn func(uint64, []graph.Span) error) error {
	if err := s.checkOpen("read spans after"); err != nil {
		return err
	}
	// The retention floor is a day's first instant: that day's writes are kept.
	floor := dayDate(dayOf(s.retentionFloor(ctx))).Format("2006-01-02")
	in := graph.Interner{}
	var spans []graph.Span
	for after := seq; ; {
		traces, err := s.writesAfter(ctx, after, floor)
		if err != nil {
			return err
		}
		seqs := slices.Sorted(maps.Keys(traces))
		if len(seqs) == 0 {
			return nil
		}
		if spans, err = s.emitWrites(ctx, seqs, traces, in, spans, fn); err != nil {
			return err
		}
		if len(in) > 1<<16 {
			in = graph.Interner{}
		}
		after = seqs[len(seqs)-1]
	}
}

// writesAfter returns the traces of the partition's first spansAfterChunk
// writes after sequence after (from day floor on), by write, from the log.
func (s *Store) writesAfter(ctx context.Context, after uint64, floor string) (map[uint64][]graph.TraceID, error) {
	traces := map[uint64][]graph.TraceID{}
	err := s.query(ctx, "read write log", `SELECT seq, data FROM trace_spans WHERE trace_id = `+idList([]graph.TraceID{logID})+
		` AND part = `+quote(s.name)+` AND seq > `+utoa(after)+` AND day >= '`+floor+`' ORDER BY seq LIMIT `+itoa(spansAfterChunk), func(r driver.Rows) error {
		var sq uint64
		var b []byte
		if err := r.Scan(&sq, &b); err != nil {
			return err
		}
		if len(b) > 0 && b[0] == logMarker {
			traces[sq] = traces[sq][:0:0]
			for b = b[1:]; len(b) >= 16; b = b[16:] {
				traces[sq] = append(traces[sq], graph.TraceID(b[:16]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return traces, nil
}

// emitWrites reads the rows of writes seqs (sorted) and calls fn with each
// write's spans, in order, decoded into spans (returned for reuse).
func (s *Store) emitWrites(ctx context.Context, seqs []uint64, traces map[uint64][]graph.TraceID, in graph.Interner,
	spans []graph.Span, fn func(uint64, []graph.Span) error) ([]graph.Span, error) {
	set := map[graph.TraceID]struct{}{}
	for _, sq := range seqs {
		for _, id := range traces[sq] {
			set[id] = struct{}{}
		}
	}
	byWrite := map[uint64][]spanRow{}
	err := s.readSpans(ctx, slices.Collect(maps.Keys(set)), seqs[0], seqs[len(seqs)-1], func(r spanRow) {
		byWrite[r.seq] = append(byWrite[r.seq], r)
	})
	if err != nil {
		return spans, err
	}
	for _, sq := range seqs {
		spans = spans[:0]
		rows := byWrite[sq]
		slices.SortFunc(rows, func(a, b spanRow) int { return bytes.Compare(a.traceID[:], b.traceID[:]) })
		for i := range rows {
			if spans, err = rows[i].decode(spans, in.Intern); err != nil {
				return spans, fmt.Errorf("clickhouse: write %d: %w: %w", sq, store.ErrCorrupt, err)
			}
		}
		if err := fn(sq, spans); err != nil {
			return spans, err
		}
	}
	return spans, nil
}
