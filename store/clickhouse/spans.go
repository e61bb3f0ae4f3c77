package clickhouse

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
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
// write (under spanMu).
type spanWriter struct {
	enc    graph.TraceEncoder
	groups spangroup.TraceGroups
	group  []graph.Span
	buf    []byte
}

// Every write stores, beside the rows of its traces, a log row: under the
// all-zero trace id (no span has it: receivers refuse it), its sequence
// and, in data, logMarker then the ids of the traces it holds. Log rows
// lead every part's key order, so recovery reads the log after a sequence
// by primary key, and a write and its log row are one insert, one part.
const logMarker = 0xff

// logID is the trace id of log rows.
var logID [16]byte

// WriteSpans stores spans; they are durable (acknowledged by the server)
// when it returns: StartSpans, then its commit.
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

// StartSpans takes the next sequence of the store's partition and encodes
// spans for one insert, in one day partition (the write's): a row per
// trace, holding the trace's spans of the write with their names once
// (graph.TraceEncoder.AppendSpans), and the write's log row (its sequence
// and traces, for recovery). commit sends the insert: its spans are
// durable (acknowledged by the server) when it returns nil. Sequences are
// taken in the order of the calls (under spanMu); inserts are not ordered,
// each is a part of its own, and several may be in flight on the
// connection pool (store.SpanWriteStarter). A sequence number is never
// reused, even when the write fails: its rows may be stored, and a retry
// gets a new number. Its rows carry the store's partition, whose
// sequences they follow.
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

	// Group by trace, keeping arrival order within a trace.
	w := &s.spanW
	g := &w.groups
	g.Group(spans)
	ids := make([][]byte, 1, 1+len(g.Ends))
	ids[0] = logID[:]
	ends := make([]int, 0, 1+len(g.Ends))
	buf := append(w.buf[:0], logMarker)
	for k := range g.Ends {
		id := &spans[g.First(k)].TraceID
		buf = append(buf, id[:]...)
		ids = append(ids, id[:])
	}
	ends = append(ends, len(buf))
	for k := range g.Ends {
		w.group = g.Trace(k, spans, w.group[:0])
		buf = w.enc.AppendSpans(buf, w.group)
		ends = append(ends, len(buf))
	}
	// The data column takes substrings of one string, without an
	// allocation per row. The string is a copy: the buffer serves the
	// next write while this one is in flight.
	all := string(buf)
	if cap(buf) <= 16<<20 {
		w.buf = buf[:0]
	}
	clear(w.group)
	n := len(ids)
	data := make([]string, n)
	from := 0
	for i, e := range ends {
		data[i], from = all[from:e], e
	}
	buckets := s.watch.bucketsOf(ids[1:])
	// Close (finish) waits for the inserts started: the lease is
	// released and the connections closed after them.
	s.inserts.Add(1)
	var once sync.Once
	commit := func(ctx context.Context) error {
		err := errCommitted
		once.Do(func() {
			defer s.inserts.Done()
			err = s.insert(ctx, "write spans", "trace_spans", spanColumns, slices.Repeat([]time.Time{day}, n), ids,
				slices.Repeat([]uint64{seq}, n), data, slices.Repeat([]string{s.name}, n))
			// Even when it failed: its rows may be stored. Other
			// processes hear of it just after (changes.go).
			s.watch.move(buckets)
			s.spansWritten(buckets)
		})
		return err
	}
	return seq, commit, nil
}

// errCommitted: a write's commit was called again.
var errCommitted = errors.New("clickhouse: write spans: committed twice")

// spanRow is one stored row of trace_spans: a trace's spans of one write,
// or a write's log row.
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
// re-sent is in several), those of the store's partition's writes lo..hi
// only when hi > 0. fn must copy what it keeps of the row.
func (s *Store) readSpans(ctx context.Context, ids []graph.TraceID, lo, hi uint64, fn func(*spanRow) error) error {
	const chunk = 1000
	seqs := ""
	if hi > 0 {
		seqs = ` AND seq >= ` + utoa(lo) + ` AND seq <= ` + utoa(hi) + ` AND part = ` + quote(s.name)
	}
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		list := idList(part)
		var row spanRow
		err := s.query(ctx, "read spans", `SELECT trace_id, seq, data FROM trace_spans WHERE trace_id IN (`+list+`)`+seqs,
			func(r driver.Rows) error {
				if err := r.Scan(&row.traceID, &row.seq, &row.data); err != nil {
					return err
				}
				return fn(&row)
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
	err := s.readSpans(light(ctx), []graph.TraceID{id}, 0, 0, func(r *spanRow) error {
		c := *r
		c.data = slices.Clone(r.data)
		rows = append(rows, c)
		return nil
	})
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
// the store's partition after seq, as they were written. It reads the write log after seq, then the
// rows of those writes (by primary key: the traces they touched), a few
// hundred writes at a time.
func (s *Store) SpansAfter(ctx context.Context, seq uint64, fn func(uint64, []graph.Span) error) error {
	if err := s.checkOpen("read spans after"); err != nil {
		return err
	}
	// The retention floor is a day's first instant: the writes of that day
	// on are kept.
	floor := dayDate(dayOf(s.retentionFloor(ctx))).Format("2006-01-02")
	in := graph.Interner{}
	var spans []graph.Span
	for after := seq; ; {
		traces, err := s.writesAfter(ctx, after, floor)
		if err != nil {
			return err
		}
		seqs := make([]uint64, 0, len(traces))
		for sq := range traces {
			seqs = append(seqs, sq)
		}
		slices.Sort(seqs)
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

// writesAfter returns the traces of the first spansAfterChunk writes
// of the store's partition after sequence after, by write, from the log
// rows; floor is the retention floor's day.
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

// emitWrites reads the span rows of writes seqs (sorted) from the traces
// they touched, and calls fn with each write's spans, in order, decoded
// into spans (returned for reuse) with names interned in in.
func (s *Store) emitWrites(ctx context.Context, seqs []uint64, traces map[uint64][]graph.TraceID, in graph.Interner,
	spans []graph.Span, fn func(uint64, []graph.Span) error) ([]graph.Span, error) {
	set := map[graph.TraceID]struct{}{}
	for _, sq := range seqs {
		for _, id := range traces[sq] {
			set[id] = struct{}{}
		}
	}
	lo, hi := seqs[0], seqs[len(seqs)-1]
	ids := make([]graph.TraceID, 0, len(set))
	for t := range set {
		ids = append(ids, t)
	}
	byWrite := map[uint64][]spanRow{}
	err := s.readSpans(ctx, ids, lo, hi, func(r *spanRow) error {
		c := *r
		c.data = slices.Clone(r.data)
		byWrite[r.seq] = append(byWrite[r.seq], c)
		return nil
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
