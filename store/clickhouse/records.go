package clickhouse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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
	buf           []byte // encoded results, one string per block
	ends          []int
}

func (b *recordBlock) columns() []any {
	return []any{b.day, b.win, b.minute, b.id, b.version, b.deleted, b.start, b.api, b.seq, b.result, b.facts, b.edges, b.part}
}

// add appends the row of r under version v, partition part's: r's
// record, or a tombstone for its key when deleted. Results are encoded
// into b.buf; finish makes them strings.
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
		b.api, b.seq, b.facts = append(b.api, ""), append(b.seq, 0), append(b.facts, "")
		b.edges = append(b.edges, nil)
		b.ends = append(b.ends, len(b.buf))
		return
	}
	b.deleted = append(b.deleted, 0)
	b.api = append(b.api, r.API)
	b.seq = append(b.seq, r.Seq)
	b.facts = append(b.facts, string(r.Facts))
	b.edges = append(b.edges, r.Edges)
	b.buf = enc.Append(b.buf, r.Result)
	b.ends = append(b.ends, len(b.buf))
}

func (b *recordBlock) len() int { return len(b.id) }

// finish sets the result column: substrings of one string, without an
// allocation per row.
func (b *recordBlock) finish() {
	all := string(b.buf)
	lo := 0
	b.result = make([]string, len(b.ends))
	for i, e := range b.ends {
		b.result[i], lo = all[lo:e], e
	}
}

// decodeResult decodes a stored result (analysis.ResultEncoder's binary
// form).
func decodeResult(b []byte, intern func([]byte) string) (*analysis.TraceResult, error) {
	return analysis.DecodeResult(b, intern)
}

// Apply stores a batch as the store's partition's. ClickHouse cannot make
// it atomic, so it goes in steps that leave nothing wrong for good when
// cut short:
//
//  1. markers: the minutes and windows the batch touches dirty, the
//     summaries of the windows whose states it gives stale (and the
//     minutes the previous Apply finished clean); at once, the partitions
//     of the old records, and then, when some were another partition's,
//     their moves (record_moves) and that partition's windows dirty (its
//     states count them; again once the records are written);
//  2. at once, the records (a tombstone under the old key when a record is
//     deleted or its start moved to another minute) and the rollups: the
//     change the batch makes to each minute, hour and day it touches, for
//     the minutes not to repair;
//  3. the minutes to repair (left dirty by a failed Apply or a crash) are
//     recomputed from the records, with their hours and days, under a new
//     generation;
//  4. at once, the window states and the checkpoint.
//
// A failure after step 1 leaves the minutes dirty: this store repairs
// them at its next Apply, a new one at its first Apply (it reads the dirty
// minutes at Open). The windows stay dirty until an Apply writes their
// states after their records: their states are not exact meanwhile
// (State).
func (s *Store) Apply(ctx context.Context, b store.Batch) error {
	if err := s.checkWrite("apply"); err != nil {
		return err
	}
	// The minutes it touches, once known (the tier cache drops their
	// ranges).
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
	// Readers hear of it before anything is written, and once it is
	// (changes.go).
	c := change{lo: lo, hi: hi, gens: len(repair) > 0, traces: changedTraces(b.Changes)}
	err := s.announced(ctx, c, func() error { return s.apply(ctx, b, minutes, repair, keys(windows)) })
	if c.gens {
		s.gensKept.drop()
	}
	if err != nil {
		for m := range minutes {
			s.repair[m] = struct{}{}
		}
		return err
	}
	clear(s.repair)
	if err := s.trimChanges(ctx); err != nil {
		s.log.Warn("clickhouse: dropping the change log's old days; tried again in an hour", "err", err)
	}
	return nil
}

// changedTraces returns the stamp buckets of the traces whose records
// changes change.
func changedTraces(changes []store.Change) []uint16 {
	out := make([]uint16, 0, len(changes))
	for _, c := range changes {
		id := c.ID()
		out = append(out, uint16(bucket(id[:])))
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

	// Everything is encoded before anything is sent.
	recs := s.encodeRecords(b.Changes, v0)
	ups := s.deltaRows(rollup.Deltas(b.Changes, repair)) // repaired minutes are summed again whole
	states, err := s.encodeStates(b.States)
	if err != nil {
		return err
	}

	// Markers. Summaries of the windows whose states change go stale now;
	// a crash before the states are written only costs computing them
	// again.
	touched := maps.Clone(minutes)
	maps.Copy(touched, repair)
	var clean []int64
	for m := range s.clean {
		if _, ok := touched[m]; !ok {
			clean = append(clean, m)
		}
	}
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

	// The records and the rollup deltas at once: the markers cover either
	// failing.
	err = both(func() error {
		if recs.len() == 0 {
			return nil
		}
		// The views of the records' traces, even when it failed: its rows
		// may be stored.
		defer s.watch.moveChanges(b.Changes)
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

	// Once the records are stored: the states (written after the records,
	// they make their windows exact), the checkpoint and, for the records
	// taken from other partitions, their windows marked dirty there once
	// more (a state that partition wrote while they moved counts them), at
	// once.
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

// extent returns the minutes [lo, hi) from the first to the last of two
// sets; lo ≥ hi when both are empty.
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

// encodeRecords encodes the records a batch replaces and stores, the
// ith change at version v0+1+i: the old record is deleted (a tombstone)
// where the new one does not take its key.
func (s *Store) encodeRecords(changes []store.Change, v0 uint64) *recordBlock {
	var recs recordBlock
	for i, c := range changes {
		v := v0 + 1 + uint64(i)
		if o := c.Old; o != nil && (c.New == nil || c.New.Window != o.Window || c.New.Minute() != o.Minute()) {
			recs.add(&s.enc, o, v, true, s.name)
		}
		if c.New != nil {
			recs.add(&s.enc, c.New, v, false, s.name)
		}
	}
	recs.finish()
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

// Kinds of dirty markers (the dirty table's Enum8; 3, hour, is no longer
// written).
const (
	kindMinute  int8 = 0
	kindWindow  int8 = 1
	kindSummary int8 = 2
)

// marks are the markers one insert sets: the store's partition's minutes
// and windows (states) dirty, and its minutes clean; summaries (shared by
// every partition) dirty and clean; other partitions' windows dirty.
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
	add := func(kind int8, x int64, part string, dirty uint8) {
		d := dayOfMinute(x)
		if kind != kindMinute {
			d = dayOf(x * int64(s.window))
		}
		kinds, ids, days, flags = append(kinds, kind), append(ids, x), append(days, dayDate(d)), append(flags, dirty)
		parts = append(parts, part)
	}
	for _, set := range []struct {
		kind  int8
		dirty uint8
		part  string
		ids   []int64
	}{{kindMinute, 1, s.name, m.minutes}, {kindMinute, 0, s.name, m.clean}, {kindWindow, 1, s.name, m.windows},
		{kindSummary, 1, "", m.summaries}, {kindSummary, 0, "", m.fresh}} {
		for _, x := range set.ids {
			add(set.kind, x, set.part, set.dirty)
		}
	}
	for _, o := range m.others {
		add(kindWindow, o.win, o.part, 1)
	}
	return s.insert(ctx, "mark dirty", "dirty_by_part", []string{"kind", "id", "part", "day", "dirty", "version"},
		kinds, ids, parts, days, flags, slices.Repeat([]uint64{v}, n))
}

// move is a record that another partition (from) stored and a change of
// the batch replaces: it moves to the store's partition.
type move struct {
	from string
	old  *store.Record
}

// movedRecords returns the changes' old records that another partition
// stored: the partition of each one's latest row under its key.
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
	type latest struct {
		loc  location
		part string
	}
	found := map[graph.TraceID]latest{}
	idctx, err := s.withIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
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
		if have, ok := found[id]; !ok || l.newer(have.loc) {
			found[id] = latest{l, p}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []move
	for _, id := range ids {
		if f, ok := found[id]; ok && f.loc.live && f.part != s.name {
			out = append(out, move{from: f.part, old: olds[id]})
		}
	}
	return out, nil
}

// recordMoves stores moves at version v before the records that make
// them (a retried move is the same row: keyed by the old record), and, at
// once, marks the windows of the moved records dirty in the partitions
// they leave: those partitions' states count them.
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

// movedWindows returns the windows the moved records leave, each in the
// partition it leaves.
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

// scanRecord reads one row of readColumns (and more columns into extra).
func scanRecord(r driver.Rows, extra ...any) (*store.Record, error) {
	return scanRecordIf(r, nil, extra...)
}

// scanRecordIf is scanRecord, returning nil without decoding the row when
// keep (called once the row is scanned) says it is not wanted: a
// tombstone's empty result does not decode.
func scanRecordIf(r driver.Rows, keep func(*store.Record) bool, extra ...any) (*store.Record, error) {
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

// newer reports whether l supersedes o: a higher version, or the same
// version and live (a record that moved minute leaves a tombstone under
// its old key with the version of its new row).
func (l location) newer(o location) bool {
	return l.version > o.version || l.version == o.version && l.live && !o.live
}

// Records returns the stored records of ids, whichever partition stored
// them: where each lives from the record index (most ids of a batch have
// none), then the records, by primary key.
func (s *Store) Records(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]*store.Record, error) {
	return s.records(ctx, ids, nil)
}

// records is Records, noting in parts (when not nil) the partition of
// each record returned.
func (s *Store) records(ctx context.Context, ids []graph.TraceID, parts map[graph.TraceID]string) (map[graph.TraceID]*store.Record, error) {
	if err := s.checkOpen("read records"); err != nil {
		return nil, err
	}
	if len(ids) <= 16 {
		ctx = light(ctx) // a trace's view
	}
	floor := s.retentionFloor(ctx)
	out := make(map[graph.TraceID]*store.Record, len(ids))
	const chunk = 10000
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		locs := map[graph.TraceID]location{}
		starts := map[graph.TraceID]int64{}
		// The ids go as data (an external table), not as SQL literals
		// the server would parse: half the cost of the lookup.
		idctx, err := s.withIDs(ctx, part)
		if err != nil {
			return nil, err
		}
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
			rec, err := scanRecordIf(r, func(rec *store.Record) bool {
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
// partition stored and that use one of edges (all of them when edges is
// empty). All of them: a range of the primary key, the latest version of
// each, tombstones and other partitions' records dropped after FINAL.
// With edges: the traces with a row of the window that uses one (any
// version: only trace_id and edges are read, no FINAL), then their
// latest records (Records), kept when they are still in the window and
// use one of edges.
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
		rec, err := scanRecord(r)
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

// windowEdgeRecords is WindowRecords with edges (want, sorted; uses, the
// condition on a row that uses one), for a few traces: the traces with a
// row of the window that the store's partition stored and that uses one
// (any version: only trace_id, part and edges are read, no FINAL), then
// their latest records (Records), kept when they are still in the window,
// the partition's, and use one. With more than Store.edgeReadMax traces
// it reads nothing more and says not done: the window is read whole.
func (s *Store) windowEdgeRecords(ctx context.Context, w int64, want []uint64, uses string,
	fn func(*store.Record) error) (done bool, err error) {
	var ids []graph.TraceID
	err = s.query(ctx, "read window edges", `SELECT DISTINCT trace_id FROM records WHERE win = `+itoa(w)+
		` AND part = `+quote(s.name)+` AND `+uses+` LIMIT `+itoa(int64(s.edgeReadMax)+1), func(r driver.Rows) error {
		var id graph.TraceID
		if err := r.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
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

// edgeReadMax is the most traces WindowRecords reads one by one (by
// record_index) rather than reading their window whole (Store.edgeReadMax;
// tests change it).
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
