package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/fence"
	"github.com/stormradius/stormradius/store/internal/spangroup"
)

// rowsPerInsert is how many rows one INSERT statement carries: fewer
// statements, less per-statement overhead in the driver.
const rowsPerInsert = 64

type spanStatements struct {
	many, one *sql.Stmt
	enc       graph.TraceEncoder
	groups    spangroup.TraceGroups
	buf       []byte
}

func (p *spanStatements) close() {
	for _, st := range []*sql.Stmt{p.many, p.one} {
		if st != nil {
			st.Close()
		}
	}
	*p = spanStatements{}
}

func (s *Store) prepareSpans(ctx context.Context) error {
	if s.spanSQL.many != nil {
		return nil
	}
	row := "(?,?,?,?)"
	many, err := s.spansW.PrepareContext(ctx, `INSERT INTO spans (trace_id, seq, n, data) VALUES `+
		strings.TrimSuffix(strings.Repeat(row+",", rowsPerInsert), ","))
	if err != nil {
		return err
	}
	one, err := s.spansW.PrepareContext(ctx, `INSERT INTO spans (trace_id, seq, n, data) VALUES `+row)
	if err != nil {
		many.Close()
		return err
	}
	s.spanSQL = spanStatements{many: many, one: one}
	return nil
}

// WriteSpans stores spans in one transaction, one row per trace, as a
// write of the handle's partition: durable when it returns.
func (s *Store) WriteSpans(ctx context.Context, spans []graph.Span) (uint64, error) {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	if s.spansW == nil {
		return 0, fmt.Errorf("sqlite: write spans: %w", store.ErrClosed)
	}
	if err := s.fence("write spans"); err != nil {
		return 0, fence.Retryable(err)
	}
	if err := s.prepareSpans(ctx); err != nil {
		return 0, unavailable(ctx, "prepare span insert", err)
	}
	p := &s.spanSQL
	// Group by trace, keeping arrival order within a trace.
	p.groups.Group(spans)
	tx, err := s.spansW.BeginTx(ctx, nil)
	if err != nil {
		return 0, unavailable(ctx, "write spans", err)
	}
	defer tx.Rollback()
	// The write follows the last one committed, this process's or
	// another's: processes that analyse different partitions of the
	// directory write spans.db in turn.
	var first, last int64
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT coalesce(max(rowid), 0) + 1 FROM spans), (SELECT coalesce(max(seq), 0) FROM writes)`).
		Scan(&first, &last); err != nil {
		return 0, unavailable(ctx, "write spans", err)
	}
	seq := max(s.seq, uint64(last)) + 1
	many, one := tx.StmtContext(ctx, p.many), tx.StmtContext(ctx, p.one)
	args := make([]any, 0, 4*rowsPerInsert)
	buf := p.buf[:0]
	group := make([]graph.Span, 0, 64)
	for k := range p.groups.Ends {
		group = p.groups.Trace(k, spans, group[:0])
		start := len(buf)
		buf = p.enc.AppendSpans(buf, group)
		// The id from the caller's spans: group is reused.
		args = append(args, spans[p.groups.First(k)].TraceID[:], int64(seq), len(group), buf[start:len(buf):len(buf)])
		if len(args) == cap(args) {
			if _, err := many.ExecContext(ctx, args...); err != nil {
				return 0, unavailable(ctx, "write spans", err)
			}
			args = args[:0]
		}
	}
	for i := 0; i < len(args); i += 4 {
		if _, err := one.ExecContext(ctx, args[i:i+4]...); err != nil {
			return 0, unavailable(ctx, "write spans", err)
		}
	}
	if cap(buf) <= 16<<20 {
		p.buf = buf[:0]
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(rowid), 0) FROM spans`).Scan(&last); err != nil {
		return 0, unavailable(ctx, "write spans", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO writes (seq, first_row, last_row, written_at, part) VALUES (?,?,?,?,?)`,
		int64(seq), first, last, time.Now().UnixNano(), s.part); err != nil {
		return 0, unavailable(ctx, "write spans", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, unavailable(ctx, "commit spans", err)
	}
	s.seq = seq
	return seq, nil
}

// TraceSpans appends the stored spans of trace id to dst, each span once
// (the first stored, when a client sent it again), whichever partition
// wrote them.
func (s *Store) TraceSpans(ctx context.Context, id graph.TraceID, dst []graph.Span) ([]graph.Span, error) {
	rows, err := s.spansR.QueryContext(ctx, `SELECT data FROM spans WHERE trace_id = ? ORDER BY rowid`, id[:])
	if err != nil {
		return dst, unavailable(ctx, "read trace spans", err)
	}
	defer rows.Close()
	in := graph.Interner{}
	start := len(dst)
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return dst, unavailable(ctx, "read trace spans", err)
		}
		if dst, err = graph.DecodeSpans(b, dst, in.Intern); err != nil {
			return dst, fmt.Errorf("sqlite: trace %s: %w: %w", id, store.ErrCorrupt, err)
		}
	}
	if err := rows.Err(); err != nil {
		return dst, unavailable(ctx, "read trace spans", err)
	}
	return spangroup.DedupSpans(dst, start), nil
}

// SpansAfter calls fn with the spans of every write of the handle's
// partition after seq, in order.
func (s *Store) SpansAfter(ctx context.Context, seq uint64, fn func(uint64, []graph.Span) error) error {
	type write struct {
		seq         uint64
		first, last int64
	}
	var writes []write
	rows, err := s.spansR.QueryContext(ctx, `SELECT seq, first_row, last_row FROM writes WHERE part = ? AND seq > ? ORDER BY seq`, s.part, int64(seq))
	if err != nil {
		return unavailable(ctx, "list writes", err)
	}
	for rows.Next() {
		var w write
		var sq int64
		if err := rows.Scan(&sq, &w.first, &w.last); err != nil {
			rows.Close()
			return unavailable(ctx, "list writes", err)
		}
		w.seq = uint64(sq)
		writes = append(writes, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return unavailable(ctx, "list writes", err)
	}
	in := graph.Interner{}
	var spans []graph.Span
	for _, w := range writes {
		spans = spans[:0]
		rows, err := s.spansR.QueryContext(ctx, `SELECT data FROM spans WHERE rowid BETWEEN ? AND ? ORDER BY rowid`, w.first, w.last)
		if err != nil {
			return unavailable(ctx, "read writes", err)
		}
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				rows.Close()
				return unavailable(ctx, "read writes", err)
			}
			var err error
			if spans, err = graph.DecodeSpans(b, spans, in.Intern); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: write %d: %w: %w", w.seq, store.ErrCorrupt, err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return unavailable(ctx, "read writes", err)
		}
		if err := fn(w.seq, spans); err != nil {
			return err
		}
		if len(in) > 1<<16 {
			in = graph.Interner{}
		}
	}
	return nil
}
