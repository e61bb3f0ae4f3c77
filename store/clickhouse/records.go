package clickhouse

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/position"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

var recordColumns = []string{"day", "win", "minute", "trace_id", "version", "deleted", "start", "api", "seq", "result",
	"facts", "edges", "part"}

// recordBlock is record rows as the columns of one insert.
type recordBlock struct {
	day           []time.Time
	win, minute   []int64
	id            [][]byte
	version       []uint64
	deleted       []uint8
	start         []int64
	api           []string
	seq           []uint64
	result, facts []string
	edges         [][]uint64
	part          []string
	// The results and facts of the rows, one string each per block
	// (finish): no allocation per row.
	buf, factBuf []byte
	ends, facEnd []int
}

func (b *recordBlock) columns() []any {
	return []any{b.day, b.win, b.minute, b.id, b.version, b.deleted, b.start, b.api, b.seq, b.result, b.facts, b.edges, b.part}
}

// add appends r's row (a tombstone for its key when deleted) at version
// v, partition part's; its result goes into b.buf until finish.
func (b *recordBlock) add(enc *analysis.ResultEncoder, r *store.Record, v uint64, deleted bool, part string) {
	m := r.Minute()
	b.part = append(b.part, part)
	b.day = append(b.day, dayDate(dayOfMinute(m)))
	b.win = append(b.win, r.Window)
	b.minute = append(b.minute, m)
	b.id = append(b.id, r.TraceID[:])
	b.version = append(b.version, v)
	b.start = append(b.start, r.Start)
	if deleted {
		b.deleted = append(b.deleted, 1)
		b.api, b.seq = append(b.api, ""), append(b.seq, 0)
		b.edges = append(b.edges, nil)
		b.ends, b.facEnd = append(b.ends, len(b.buf)), append(b.facEnd, len(b.factBuf))
		return
	}
	b.deleted = append(b.deleted, 0)
	b.api = append(b.api, r.API)
	b.seq = append(b.seq, r.Seq)
	b.factBuf = append(b.factBuf, r.Facts...)
	b.facEnd = append(b.facEnd, len(b.factBuf))
	b.edges = append(b.edges, r.Edges)
	b.buf = enc.Append(b.buf, r.Result)
	b.ends = append(b.ends, len(b.buf))
}

func (b *recordBlock) len() int { return len(b.id) }

// finish sets the result and facts columns: views of the block's buffers,
// valid until they are reused, by the next Apply (the driver copies what
// it is given before the insert returns).
func (b *recordBlock) finish() { b.result, b.facts = views(b.buf, b.ends), views(b.factBuf, b.facEnd) }

// views cuts buf at ends without copying it: the strings are valid while
// buf is unchanged.
func views(buf []byte, ends []int) []string {
	out := make([]string, len(ends))
	if len(buf) == 0 {
		return out
	}
	all, lo := unsafe.String(&buf[0], len(buf)), 0
	for i, e := range ends {
		out[i], lo = all[lo:e], e
	}
	return out
}

// decodeResult decodes a stored result (analysis.ResultEncoder's form).
func decodeResult(b []byte, intern func([]byte) string) (*analysis.TraceResult, error) {
	return analysis.DecodeResult(b, intern)
}

// Apply stores a batch as the store's partition's, in the steps the
// package doc describes: one cut short leaves its minutes dirty, repaired
// by the next Apply (Open reads them), and its windows not exact (State)
// until an Apply writes their states.
func (s *Store) Apply(ctx context.Context, b store.Batch) error {
	if err := s.checkWrite("apply"); err != nil {
		return err
	}
	// The tier cache drops the ranges of the minutes it touches, once known.
	lo, hi := int64(position.AllLo), int64(position.AllHi)
	defer func() { s.pos.Wrote(lo, hi) }()
	if err := s.ensureProgress(ctx); err != nil {
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.checkWrite("apply"); err != nil {
		return err
	}
	minutes, windows := map[int64]struct{}{}, map[int64]struct{}{}
	for _, c := range b.Changes {
		for _, r := range []*store.Record{c.Old, c.New} {
			if r != nil {
				minutes[r.Minute()] = struct{}{}
				windows[r.Window] = struct{}{}
			}
		}
	}
	for w := range b.States {
		windows[w] = struct{}{}
	}
	repair := maps.Clone(s.repair)
	lo, hi = extent(minutes, repair)
	c := change{lo: lo, hi: hi, gens: len(repair) > 0, traces: changedTraces(b.Changes)}
	err := s.announced(ctx, c, func() error { return s.apply(ctx, b, minutes, repair, keys(windows)) })
	if c.gens {
		s.gensKept.drop()
	}
	if err != nil {
		maps.Copy(s.repair, minutes)
		return err
	}
	clear(s.repair)
	if err := s.trimChanges(ctx); err != nil {
		s.log.Warn("clickhouse: dropping the change log's old days; tried again in an hour", "err", err)
	}
	return nil
}

// changedTraces returns the stamp buckets of the traces changes change.
func changedTraces(changes []store.Change) []uint16 {
	out := make([]uint16, len(changes))
	for i, c := range changes {
		id := c.ID()
		out[i] = uint16(bucket(id[:]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (s *Store) apply(ctx context.Context, b store.Batch, minutes, repair map[int64]struct{}, windows []int64) error {
	if err := s.loadGens(ctx); err != nil {
		return err
	}
	n := len(b.Changes)
	v0 := s.versions(n + 3)
	vEnd := v0 + uint64(n) + 2

	recs := s.encodeRecords(b.Changes, v0)
	ups := s.deltaRows(rollup.Deltas(b.Changes, repair)) // repaired minutes are summed again whole
	states, err := s.encodeStates(b.States)
	if err != nil {
		return err
	}

	// Summaries of the windows whose states change go stale now: a crash
	// before the states are written only costs computing them again.
	touched := maps.Clone(minutes)
	maps.Copy(touched, repair)
	clean := slices.DeleteFunc(keys(s.clean), func(m int64) bool {
		_, ok := touched[m]
		return ok
	})
	var moved []move
	err = both(func() error {
		return s.mark(ctx, v0, marks{minutes: keys(touched), windows: windows, summaries: states.wins, clean: clean})
	}, func() (err error) {
		moved, err = s.movedRecords(ctx, b.Changes)
		return err
	})
	if err != nil {
		return err
	}
	clear(s.clean)
	if err := s.recordMoves(ctx, v0, moved); err != nil {
		return err
	}

	err = both(func() error {
		if recs.len() == 0 {
			return nil
		}
		defer s.watch.moveChanges(b.Changes) // even when it failed: its rows may be stored
		return s.insert(ctx, "put records", "records", recordColumns, recs.columns()...)
	}, func() error {
		if ups.len() == 0 {
			return nil
		}
		return s.insert(ctx, "put rollups", "rollups", rollupColumns, ups.columns()...)
	})
	if err != nil {
		return err
	}
	if err := s.recompute(ctx, keys(repair)); err != nil {
		return err
	}

	// After the records: the states (which make their windows exact), the
	// checkpoint, and the moved records' windows marked dirty again in the
	// partitions they left (a state written there meanwhile counts them).
	err = both(func() error {
		if len(states.wins) == 0 {
			return nil
		}
		n := len(states.wins)
		return s.insert(ctx, "put states", "states_by_part", []string{"day", "win", "part", "version", "written", "deleted", "state"},
			states.days, states.wins, slices.Repeat([]string{s.name}, n), slices.Repeat([]uint64{vEnd}, n),
			slices.Repeat([]int64{time.Now().UnixNano()}, n), states.deleted, states.enc)
	}, func() error {
		return both(func() error {
			if b.Watermark == 0 || b.Watermark == s.watermark {
				return nil
			}
			return s.putMeta(ctx, map[string]int64{s.watermarkKey(): int64(b.Watermark)})
		}, func() error {
			return s.mark(ctx, s.versions(1), marks{others: movedWindows(moved)})
		})
	})
	if err != nil {
		return err
	}
	if b.Watermark > 0 {
		s.watermark = b.Watermark
	}
	maps.Copy(s.clean, touched)
	return nil
}

// extent returns the minutes [lo, hi) spanning two sets (0, 0 when empty).
func extent(a, b map[int64]struct{}) (lo, hi int64) {
	lo, hi = position.AllHi, position.AllLo
	for _, set := range []map[int64]struct{}{a, b} {
		for m := range set {
			lo, hi = min(lo, m), max(hi, m+1)
		}
	}
	if lo >= hi {
		return 0, 0
	}
	return lo, hi
}

// encodeRecords encodes a batch's records, the ith change at version
// v0+1+i, with a tombstone where the new record does not take the old's
// key. The rows are in the table's key order (win, minute, trace_id; a
// stable sort): the server stores the block without sorting it.
func (s *Store) encodeRecords(changes []store.Change, v0 uint64) *recordBlock {
	type row struct {
		r       *store.Record
		minute  int64
		v       uint64
		deleted bool
	}
	rows := make([]row, 0, len(changes))
	for i, c := range changes {
		v := v0 + 1 + uint64(i)
		if o := c.Old; o != nil && (c.New == nil || c.New.Window != o.Window || c.New.Minute() != o.Minute()) {
			rows = append(rows, row{o, o.Minute(), v, true})
		}
		if c.New != nil {
			rows = append(rows, row{c.New, c.New.Minute(), v, false})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.r.Window, b.r.Window), cmp.Compare(a.minute, b.minute),
			bytes.Compare(a.r.TraceID[:], b.r.TraceID[:]))
	})
	// The buffers of the last batch's strings: its insert is done (applyMu).
	recs := recordBlock{buf: s.recBufs[0][:0], factBuf: s.recBufs[1][:0]}
	for _, r := range rows {
		recs.add(&s.enc, r.r, r.v, r.deleted, s.name)
	}
	recs.finish()
	if cap(recs.buf)+cap(recs.factBuf) <= 64<<20 {
		s.recBufs = [2][]byte{recs.buf, recs.factBuf}
	}
	return &recs
}

// stateBlock is window states as the columns of one insert.
type stateBlock struct {
	days    []time.Time
	wins    []int64
	deleted []uint8
	enc     []string
}

// encodeStates encodes window states; an empty one is deleted.
func (s *Store) encodeStates(states map[int64]*analysis.State) (stateBlock, error) {
	var b stateBlock
	for w, st := range states {
		b.days, b.wins = append(b.days, dayDate(dayOf(w*int64(s.window)))), append(b.wins, w)
		if st == nil || st.Traces == 0 {
			b.deleted, b.enc = append(b.deleted, 1), append(b.enc, "")
			continue
		}
		enc, err := json.Marshal(st)
		if err != nil {
			return b, fmt.Errorf("clickhouse: encode state of window %d: %w", w, err)
		}
		b.deleted, b.enc = append(b.deleted, 0), append(b.enc, string(enc))
	}
	return b, nil
}

// both runs f and g at once and returns the first error.
func both(f, g func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- g() }()
	err := f()
	if err2 := <-errc; err == nil {
		err = err2
	}
	return err
}

// Kinds of dirty markers (the Enum8; 3, hour, is no longer written).
const (
	kindMinute  int8 = 0
	kindWindow  int8 = 1
	kindSummary int8 = 2
)

// marks are the markers of one insert: the partition's minutes and windows
// dirty, its minutes clean; summaries (every partition's) dirty and clean
// (fresh); other partitions' windows dirty.
type marks struct {
	minutes, windows, summaries []int64
	clean, fresh                []int64
	others                      []partWindow
}

// partWindow is a window of a partition.
type partWindow struct {
	part string
	win  int64
}

// mark inserts the markers of m at version v.
func (s *Store) mark(ctx context.Context, v uint64, m marks) error {
	n := len(m.minutes) + len(m.windows) + len(m.summaries) + len(m.clean) + len(m.fresh) + len(m.others)
	if n == 0 {
		return nil
	}
	kinds, ids, days, flags := make([]int8, 0, n), make([]int64, 0, n), make([]time.Time, 0, n), make([]uint8, 0, n)
	parts := make([]string, 0, n)
	add := func(kind int8, dirty uint8, part string, xs ...int64) {
		for _, x := range xs {
			d := dayOfMinute(x)
			if kind != kindMinute {
				d = dayOf(x * int64(s.window))
			}
			kinds, ids, days, flags = append(kinds, kind), append(ids, x), append(days, dayDate(d)), append(flags, dirty)
			parts = append(parts, part)
		}
	}
	add(kindMinute, 1, s.name, m.minutes...)
	add(kindMinute, 0, s.name, m.clean...)
	add(kindWindow, 1, s.name, m.windows...)
	add(kindSummary, 1, "", m.summaries...)
	add(kindSummary, 0, "", m.fresh...)
	for _, o := range m.others {
		add(kindWindow, 1, o.part, o.win)
	}
	return s.insert(ctx, "mark dirty", "dirty_by_part", []string{"kind", "id", "part", "day", "dirty", "version"},
		kinds, ids, parts, days, flags, slices.Repeat([]uint64{v}, n))
}

// move is a record that partition from stored, moving to the store's.
type move struct {
	from string
	old  *store.Record
}

// movedRecords returns the changes' old records whose latest row under
// their key another partition stored.
func (s *Store) movedRecords(ctx context.Context, changes []store.Change) ([]move, error) {
	olds := map[graph.TraceID]*store.Record{}
	var ids []graph.TraceID
	var wins, mins []int64
	for _, c := range changes {
		if o := c.Old; o != nil {
			if _, ok := olds[o.TraceID]; !ok {
				ids = append(ids, o.TraceID)
			}
			olds[o.TraceID] = o
			wins, mins = append(wins, o.Window), append(mins, o.Minute())
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	idctx, err := s.withIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	found, parts := map[graph.TraceID]location{}, map[graph.TraceID]string{}
	err = s.query(idctx, "read record partitions", `SELECT trace_id, win, minute, version, deleted, part FROM records WHERE win IN (`+
		intList(wins)+`) AND minute IN (`+intList(mins)+`) AND trace_id IN (SELECT id FROM `+idsTable+`)`, func(r driver.Rows) error {
		var id graph.TraceID
		var l location
		var del uint8
		var p string
		if err := r.Scan(&id, &l.win, &l.minute, &l.version, &del, &p); err != nil {
			return err
		}
		l.live = del == 0
		if o := olds[id]; o == nil || l.win != o.Window || l.minute != o.Minute() {
			return nil // another key of the trace
		}
		if have, ok := found[id]; !ok || l.newer(have) {
			found[id], parts[id] = l, p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []move
	for _, id := range ids {
		if l, ok := found[id]; ok && l.live && parts[id] != s.name {
			out = append(out, move{from: parts[id], old: olds[id]})
		}
	}
	return out, nil
}

// recordMoves stores moves at version v, before the records (a retried
// move is the same row), and marks the windows they leave dirty there.
func (s *Store) recordMoves(ctx context.Context, v uint64, moved []move) error {
	if len(moved) == 0 {
		return nil
	}
	n := len(moved)
	days, mins, ids := make([]time.Time, n), make([]int64, n), make([][]byte, n)
	froms, seqs, results := make([]string, n), make([]uint64, n), make([]string, n)
	for i, m := range moved {
		days[i], mins[i], ids[i] = dayDate(dayOfMinute(m.old.Minute())), m.old.Minute(), m.old.TraceID[:]
		froms[i], seqs[i], results[i] = m.from, m.old.Seq, string(s.enc.Append(nil, m.old.Result))
	}
	return both(func() error {
		return s.insert(ctx, "put record moves", "record_moves", []string{"day", "minute", "trace_id", "from_part", "old_seq",
			"to_part", "result", "version"}, days, mins, ids, froms, seqs, slices.Repeat([]string{s.name}, n), results,
			slices.Repeat([]uint64{v}, n))
	}, func() error {
		return s.mark(ctx, v, marks{others: movedWindows(moved)})
	})
}

// movedWindows returns the windows the moved records leave, with their partitions.
func movedWindows(moved []move) []partWindow {
	var out []partWindow
	for _, m := range moved {
		if w := (partWindow{m.from, m.old.Window}); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// readColumns are the columns a store.Record is read from.
const readColumns = `trace_id, start, win, api, seq, result, facts, edges`

// scanRecord reads a row of readColumns (and extra); nil, not decoded (a
// tombstone's result does not decode), when keep (if set) refuses it.
func scanRecord(r driver.Rows, keep func(*store.Record) bool, extra ...any) (*store.Record, error) {
	var (
		rec           store.Record
		result, facts string
	)
	dest := append([]any{&rec.TraceID, &rec.Start, &rec.Window, &rec.API, &rec.Seq, &result, &facts, &rec.Edges}, extra...)
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	if keep != nil && !keep(&rec) {
		return nil, nil
	}
	if len(rec.Edges) == 0 {
		rec.Edges = nil
	}
	rec.Facts = []byte(facts)
	res, err := decodeResult([]byte(result), nil)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: record %s: %w: %w", rec.TraceID, store.ErrCorrupt, err)
	}
	rec.Result = res
	return &rec, nil
}

// location is where a trace's record lives, from record_index.
type location struct {
	win, minute int64
	version     uint64
	live        bool
}

// newer reports whether l supersedes o: a higher version, or the same and
// live (a record that moved minute leaves a tombstone of its new version).
func (l location) newer(o location) bool {
	return l.version > o.version || l.version == o.version && l.live && !o.live
}

// Records returns the stored records of ids, whichever partition stored
// them: their keys from the record index, then the records by primary key.
func (s *Store) Records(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]*store.Record, error) {
	return s.records(ctx, ids, nil)
}

// records is Records, noting in parts (if not nil) each record's partition.
func (s *Store) records(ctx context.Context, ids []graph.TraceID, parts map[graph.TraceID]string) (map[graph.TraceID]*store.Record, error) {
	if err := s.checkOpen("read records"); err != nil {
		return nil, err
	}
	if len(ids) <= 16 {
		ctx = light(ctx) // a trace's view
	}
	floor := s.retentionFloor(ctx)
	out := make(map[graph.TraceID]*store.Record, len(ids))
	for part := range slices.Chunk(ids, 10000) {
		// Ids as data, not literals the server parses: half the lookup's cost.
		idctx, err := s.withIDs(ctx, part)
		if err != nil {
			return nil, err
		}
		locs, starts := map[graph.TraceID]location{}, map[graph.TraceID]int64{}
		err = s.query(idctx, "read record index", `SELECT trace_id, win, minute, start, version, deleted FROM record_index `+
			`WHERE trace_id IN (SELECT id FROM `+idsTable+`)`, func(r driver.Rows) error {
			var id graph.TraceID
			var l location
			var start int64
			var del uint8
			if err := r.Scan(&id, &l.win, &l.minute, &start, &l.version, &del); err != nil {
				return err
			}
			l.live = del == 0
			if have, ok := locs[id]; !ok || l.newer(have) {
				locs[id], starts[id] = l, start
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		var want []graph.TraceID
		var wins, mins []int64
		for id, l := range locs {
			if l.live && starts[id] >= floor {
				want = append(want, id)
				wins, mins = append(wins, l.win), append(mins, l.minute)
			}
		}
		if len(want) == 0 {
			continue
		}
		versions := map[graph.TraceID]uint64{}
		err = s.query(ctx, "read records", `SELECT `+readColumns+`, minute, version, deleted, part FROM records WHERE win IN (`+
			intList(wins)+`) AND minute IN (`+intList(mins)+`) AND trace_id IN (`+idList(want)+`)`, func(r driver.Rows) error {
			var minute int64
			var v uint64
			var del uint8
			var p string
			rec, err := scanRecord(r, func(rec *store.Record) bool {
				l := locs[rec.TraceID]
				if rec.Window != l.win || minute != l.minute || v < versions[rec.TraceID] {
					return false // another key, or an older version
				}
				versions[rec.TraceID] = v
				if del != 0 {
					delete(out, rec.TraceID)
					return false
				}
				if parts != nil {
					parts[rec.TraceID] = p
				}
				return true
			}, &minute, &v, &del, &p)
			if err != nil || rec == nil {
				return err
			}
			out[rec.TraceID] = rec
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WindowRecords calls fn with the records of window w that the store's
// partition stored and that use one of edges (all when edges is empty):
// the latest version of each (FINAL), else windowEdgeRecords.
func (s *Store) WindowRecords(ctx context.Context, w int64, edges []uint64, fn func(*store.Record) error) error {
	if err := s.checkOpen("read window records"); err != nil {
		return err
	}
	q := `SELECT ` + readColumns + ` FROM (SELECT ` + readColumns + `, deleted, part FROM records FINAL WHERE win = ` + itoa(w) +
		`) WHERE deleted = 0 AND part = ` + quote(s.name) + ` AND start >= ` + itoa(s.retentionFloor(ctx))
	if len(edges) > 0 {
		want := slices.Clone(edges)
		slices.Sort(want)
		uses := `hasAny(edges, [` + edgeList(want) + `])`
		done, err := s.windowEdgeRecords(ctx, w, want, uses, fn)
		if done || err != nil {
			return err
		}
		// Most of the window uses them: one read of it, filtered.
		q += ` AND ` + uses
	}
	var cbErr error
	err := s.query(ctx, "read window records", q, func(r driver.Rows) error {
		rec, err := scanRecord(r, nil)
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			cbErr = err
			return errStop
		}
		return nil
	})
	if err == errStop {
		return cbErr
	}
	return err
}

// windowEdgeRecords is WindowRecords with edges (want, sorted; uses, a
// row's condition): the traces with a row that uses one (any version),
// then their latest records, kept when still the window's, the
// partition's and using one. Past Store.edgeReadMax traces it is not done.
func (s *Store) windowEdgeRecords(ctx context.Context, w int64, want []uint64, uses string,
	fn func(*store.Record) error) (done bool, _ error) {
	ids, err := queryColumn[graph.TraceID](ctx, s, "read window edges", `SELECT DISTINCT trace_id FROM records WHERE win = `+itoa(w)+
		` AND part = `+quote(s.name)+` AND `+uses+` LIMIT `+itoa(int64(s.edgeReadMax)+1))
	if err != nil || len(ids) > s.edgeReadMax {
		return false, err
	}
	slices.SortFunc(ids, func(a, b graph.TraceID) int { return bytes.Compare(a[:], b[:]) })
	parts := map[graph.TraceID]string{}
	recs, err := s.records(ctx, ids, parts)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if r := recs[id]; r != nil && r.Window == w && parts[id] == s.name && store.SharesEdge(r.Edges, want) {
			if err := fn(r); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// edgeList returns EdgeKeys as a comma-separated list of UInt64 literals.
func edgeList(edges []uint64) string {
	lits := make([]string, len(edges))
	for i, e := range edges {
		lits[i] = "toUInt64(" + utoa(e) + ")"
	}
	return strings.Join(lits, ", ")
}

// edgeReadMax is Store.edgeReadMax's default (tests change it).
const edgeReadMax = 2000

// Watermark returns the store's partition's checkpoint.
func (s *Store) Watermark(ctx context.Context) (uint64, error) {
	if err := s.checkOpen("read watermark"); err != nil {
		return 0, err
	}
	var v int64
	err := s.queryRow(ctx, "read watermark", `SELECT argMax(value, version) FROM meta WHERE key = `+quote(s.watermarkKey()), &v)
	return uint64(v), err
}
