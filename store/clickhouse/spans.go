package clickhouse

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

var spanColumns = []string{"day", "trace_id", "span_id", "parent_id", "seq", "keep_rank", "start", "duration",
	"service", "operation", "name", "kind", "failed", "data"}

// spanBlock is spans as the columns of one insert.
type spanBlock struct {
	day                    []time.Time
	traceID, spanID, parID [][]byte
	seq, keep              []uint64
	start, dur             []int64
	service, op, name      []string
	kind                   []int8
	failed                 []uint8
	data                   []string
}

func (b *spanBlock) columns() []any {
	return []any{b.day, b.traceID, b.spanID, b.parID, b.seq, b.keep, b.start, b.dur, b.service, b.op, b.name, b.kind,
		b.failed, b.data}
}

// WriteSpans stores spans; they are durable (acknowledged by the server)
// when it returns. The write is logged first (its sequence and traces, for
// recovery), then its spans are inserted in one block (one partition: the
// day of the write). A sequence number is never reused, even when the
// write fails half way: its log row may be stored, and a retry gets a new
// number.
func (s *Store) WriteSpans(ctx context.Context, spans []graph.Span) (uint64, error) {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	if err := s.checkOpen("write spans"); err != nil {
		return 0, err
	}
	s.seq++
	seq := s.seq
	now := time.Now()
	day := dayDate(dayOf(now.UnixNano()))

	// The traces of the write, sorted, once each.
	ids := make([][]byte, len(spans))
	for i := range spans {
		ids[i] = spans[i].TraceID[:]
	}
	slices.SortFunc(ids, bytes.Compare)
	ids = slices.CompactFunc(ids, bytes.Equal)
	if err := s.insert(ctx, "log write", "writes", []string{"day", "seq", "written_at", "spans", "trace_ids"},
		[]time.Time{day}, []uint64{seq}, []int64{now.UnixNano()}, []uint32{uint32(len(spans))}, [][][]byte{ids}); err != nil {
		return 0, err
	}
	if len(spans) == 0 {
		return seq, nil
	}

	n := len(spans)
	b := spanBlock{
		day: slices.Repeat([]time.Time{day}, n), traceID: make([][]byte, n), spanID: make([][]byte, n),
		parID: make([][]byte, n), seq: slices.Repeat([]uint64{seq}, n), keep: slices.Repeat([]uint64{^seq}, n),
		start: make([]int64, n), dur: make([]int64, n), service: make([]string, n), op: make([]string, n),
		name: make([]string, n), kind: make([]int8, n), failed: make([]uint8, n), data: make([]string, n),
	}
	// Encode every span into one buffer, made one string: the data column
	// takes substrings of it, without an allocation per span.
	buf := make([]byte, 0, 96*n)
	ends := make([]int, n)
	for i := range spans {
		buf = graph.AppendSpan(buf, &spans[i])
		ends[i] = len(buf)
	}
	all := string(buf)
	lo := 0
	for i := range spans {
		sp := &spans[i]
		b.traceID[i], b.spanID[i], b.parID[i] = sp.TraceID[:], sp.SpanID[:], sp.ParentID[:]
		b.start[i], b.dur[i] = sp.Start, sp.End-sp.Start
		b.service[i], b.op[i], b.name[i] = sp.Service, sp.Operation, sp.Name
		if sp.Kind <= graph.KindConsumer {
			b.kind[i] = int8(sp.Kind)
		}
		if sp.Failed {
			b.failed[i] = 1
		}
		b.data[i], lo = all[lo:ends[i]], ends[i]
	}
	if err := s.insert(ctx, "write spans", "spans", spanColumns, b.columns()...); err != nil {
		return 0, err
	}
	return seq, nil
}

// interner shares repeated names among decoded spans.
type interner map[string]string

func (in interner) intern(b []byte) string {
	if v, ok := in[string(b)]; ok {
		return v
	}
	v := string(b)
	in[v] = v
	return v
}

// storedSpan is one stored copy of a span.
type storedSpan struct {
	traceID graph.TraceID
	spanID  graph.SpanID
	seq     uint64
	data    []byte
}

// readSpans calls fn with each stored copy of the spans of ids (until
// merges collapse them, a span re-sent has several).
func (s *Store) readSpans(ctx context.Context, ids []graph.TraceID, fn func(*storedSpan) error) error {
	const chunk = 1000
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		var sp storedSpan
		err := s.query(ctx, "read spans", `SELECT trace_id, span_id, seq, data FROM spans WHERE trace_id IN (`+idList(part)+`)`,
			func(r driver.Rows) error {
				if err := r.Scan(&sp.traceID, &sp.spanID, &sp.seq, &sp.data); err != nil {
					return err
				}
				return fn(&sp)
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// TraceSpans appends the stored spans of trace id to dst, each once.
func (s *Store) TraceSpans(ctx context.Context, id graph.TraceID, dst []graph.Span) ([]graph.Span, error) {
	if err := s.checkOpen("read trace spans"); err != nil {
		return dst, err
	}
	first := map[graph.SpanID]*storedSpan{}
	err := s.readSpans(ctx, []graph.TraceID{id}, func(sp *storedSpan) error {
		if have := first[sp.spanID]; have == nil || sp.seq < have.seq {
			c := *sp
			first[sp.spanID] = &c
		}
		return nil
	})
	if err != nil {
		return dst, err
	}
	in := interner{}
	for _, sp := range first {
		dst = append(dst, graph.Span{})
		if err := graph.DecodeSpan(sp.data, &dst[len(dst)-1], in.intern); err != nil {
			return dst[:len(dst)-1], fmt.Errorf("clickhouse: trace %s: %w: %w", id, store.ErrCorrupt, err)
		}
	}
	return dst, nil
}

// spansAfterChunk bounds the writes read back at a time.
const spansAfterChunk = 500

// SpansAfter calls fn, in write order, with the spans every write after
// seq added: a span is attributed to the first write that stored it, as
// if re-sent copies had been ignored on arrival. It reads the write log
// after seq, then the spans of the traces those writes touched (by
// primary key), a few hundred writes at a time.
func (s *Store) SpansAfter(ctx context.Context, seq uint64, fn func(uint64, []graph.Span) error) error {
	if err := s.checkOpen("read spans after"); err != nil {
		return err
	}
	floor := s.retentionFloor(ctx)
	in := interner{}
	for after := seq; ; {
		var seqs []uint64
		traces := map[graph.TraceID]struct{}{}
		err := s.query(ctx, "list writes", `SELECT seq, trace_ids FROM writes WHERE seq > `+utoa(after)+
			` AND written_at >= `+itoa(floor)+` ORDER BY seq LIMIT `+itoa(spansAfterChunk), func(r driver.Rows) error {
			var sq uint64
			var ids []string
			if err := r.Scan(&sq, &ids); err != nil {
				return err
			}
			seqs = append(seqs, sq)
			for _, id := range ids {
				var t graph.TraceID
				copy(t[:], id)
				traces[t] = struct{}{}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(seqs) == 0 {
			return nil
		}
		lo, hi := seqs[0], seqs[len(seqs)-1]
		type key struct {
			t graph.TraceID
			s graph.SpanID
		}
		first := map[key]*storedSpan{}
		ids := make([]graph.TraceID, 0, len(traces))
		for t := range traces {
			ids = append(ids, t)
		}
		err = s.readSpans(ctx, ids, func(sp *storedSpan) error {
			k := key{sp.traceID, sp.spanID}
			if have := first[k]; have == nil || sp.seq < have.seq {
				c := *sp
				first[k] = &c
			}
			return nil
		})
		if err != nil {
			return err
		}
		// A span belongs to the write that first stored it: earlier ones
		// were read before (or are covered by seq), later ones come with
		// their own chunk.
		byWrite := map[uint64][]*storedSpan{}
		for _, sp := range first {
			if sp.seq >= lo && sp.seq <= hi {
				byWrite[sp.seq] = append(byWrite[sp.seq], sp)
			}
		}
		var spans []graph.Span
		for _, sq := range seqs {
			spans = spans[:0]
			for _, sp := range byWrite[sq] {
				spans = append(spans, graph.Span{})
				if err := graph.DecodeSpan(sp.data, &spans[len(spans)-1], in.intern); err != nil {
					return fmt.Errorf("clickhouse: write %d: %w: %w", sq, store.ErrCorrupt, err)
				}
			}
			if err := fn(sq, spans); err != nil {
				return err
			}
		}
		if len(in) > 1<<16 {
			in = interner{}
		}
		after = hi
	}
}
