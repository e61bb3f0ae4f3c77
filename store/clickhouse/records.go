package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

var recordColumns = []string{"day", "win", "minute", "trace_id", "version", "deleted", "start", "api", "seq", "result",
	"facts", "edges", "spans", "fragments", "failed", "root_failed", "remote_parent", "radius", "amp", "events",
	"suppressed", "hops", "counterfactual", "misattributed", "naive", "eligible",
	"owner_service", "owner_operation", "owner_events", "owner_spurious", "svc_name",
	"svc_correct", "svc_false_claim", "svc_false_unclaim", "svc_missing", "svc_invalid", "svc_mismatches",
	"svc_misattributed", "svc_naive", "svc_eligible", "svc_context_drops", "svc_owned", "svc_requests",
	"svc_virtual_requests", "svc_counterfactual", "svc_spurious"}

// numSvc is the number of per-service counts (svc_correct … svc_spurious).
const numSvc = 15

// svcCounts returns a service's counts in column order.
func svcCounts(v *analysis.ServiceResult) [numSvc]int64 {
	c := &v.Claims
	return [numSvc]int64{c[attribution.AuditCorrect], c[attribution.AuditFalseClaim], c[attribution.AuditFalseUnclaim],
		c[attribution.AuditMissing], c[attribution.AuditInvalid], v.Mismatches, v.Misattributed, v.NaiveMisattributed,
		v.Eligible, v.ContextDrops, v.OwnedFailures, v.Requests, v.VirtualRequests, v.Counterfactual, v.Spurious}
}

// recordBlock is record rows as the columns of one insert.
type recordBlock struct {
	day                                                          []time.Time
	win, minute                                                  []int64
	id                                                           [][]byte
	version                                                      []uint64
	deleted                                                      []uint8
	start                                                        []int64
	api                                                          []string
	seq                                                          []uint64
	result, facts                                                []string
	edges                                                        [][]uint64
	spans, fragments                                             []int64
	failed, rootFailed, remote                                   []uint8
	radius                                                       []int64
	amp                                                          []float64
	events, suppressed, hops, counterfactual, mis, naive, eligib []int64
	ownerSvc, ownerOp                                            [][]string
	ownerEvents, ownerSpurious                                   [][]int64
	svcName                                                      [][]string
	svc                                                          [numSvc][][]int64
}

func (b *recordBlock) columns() []any {
	out := []any{b.day, b.win, b.minute, b.id, b.version, b.deleted, b.start, b.api, b.seq, b.result, b.facts, b.edges,
		b.spans, b.fragments, b.failed, b.rootFailed, b.remote, b.radius, b.amp, b.events, b.suppressed, b.hops,
		b.counterfactual, b.mis, b.naive, b.eligib, b.ownerSvc, b.ownerOp, b.ownerEvents, b.ownerSpurious, b.svcName}
	for i := range b.svc {
		out = append(out, b.svc[i])
	}
	return out
}

// add appends the row of r under version v: r's record, or a tombstone
// for its key when deleted.
func (b *recordBlock) add(r *store.Record, v uint64, deleted bool) error {
	m := r.Minute()
	b.day = append(b.day, dayDate(dayOfMinute(m)))
	b.win = append(b.win, r.Window)
	b.minute = append(b.minute, m)
	b.id = append(b.id, r.TraceID[:])
	b.version = append(b.version, v)
	if deleted {
		b.deleted = append(b.deleted, 1)
		b.start = append(b.start, r.Start)
		b.api, b.seq, b.result, b.facts = append(b.api, ""), append(b.seq, 0), append(b.result, ""), append(b.facts, "")
		b.edges = append(b.edges, nil)
		for _, c := range []*[]int64{&b.spans, &b.fragments, &b.radius, &b.events, &b.suppressed, &b.hops,
			&b.counterfactual, &b.mis, &b.naive, &b.eligib} {
			*c = append(*c, 0)
		}
		b.failed, b.rootFailed, b.remote = append(b.failed, 0), append(b.rootFailed, 0), append(b.remote, 0)
		b.amp = append(b.amp, 0)
		b.ownerSvc, b.ownerOp = append(b.ownerSvc, nil), append(b.ownerOp, nil)
		b.ownerEvents, b.ownerSpurious = append(b.ownerEvents, nil), append(b.ownerSpurious, nil)
		b.svcName = append(b.svcName, nil)
		for i := range b.svc {
			b.svc[i] = append(b.svc[i], nil)
		}
		return nil
	}
	tr := r.Result
	result, err := json.Marshal(tr)
	if err != nil {
		return fmt.Errorf("clickhouse: encode result %s: %w", r.TraceID, err)
	}
	b.deleted = append(b.deleted, 0)
	b.start = append(b.start, r.Start)
	b.api = append(b.api, r.API)
	b.seq = append(b.seq, r.Seq)
	b.result = append(b.result, string(result))
	b.facts = append(b.facts, string(r.Facts))
	b.edges = append(b.edges, r.Edges)
	b.spans = append(b.spans, int64(tr.Spans))
	b.fragments = append(b.fragments, int64(tr.Fragments))
	b.failed = append(b.failed, flag(tr.Failed()))
	b.rootFailed = append(b.rootFailed, flag(tr.RootFailed))
	b.remote = append(b.remote, flag(tr.RemoteParent))
	b.radius = append(b.radius, int64(tr.Radius))
	b.amp = append(b.amp, tr.MaxAmplification())
	b.events = append(b.events, int64(len(tr.Events)))
	b.suppressed = append(b.suppressed, tr.Suppressed)
	b.hops = append(b.hops, tr.Hops)
	b.counterfactual = append(b.counterfactual, tr.Counterfactual)
	var mis, naive, elig int64
	names := make([]string, len(tr.Services))
	var counts [numSvc][]int64
	for i := range tr.Services {
		v := &tr.Services[i]
		mis, naive, elig = mis+v.Misattributed, naive+v.NaiveMisattributed, elig+v.Eligible
		names[i] = v.Service
		for j, x := range svcCounts(v) {
			counts[j] = append(counts[j], x)
		}
	}
	b.mis, b.naive, b.eligib = append(b.mis, mis), append(b.naive, naive), append(b.eligib, elig)
	b.svcName = append(b.svcName, names)
	for j := range b.svc {
		b.svc[j] = append(b.svc[j], counts[j])
	}
	// Owners count only in failed traces (analysis.Report.Add).
	var oSvc, oOp []string
	var oEv, oSp []int64
	if tr.Failed() {
		for _, o := range tr.Owners {
			oSvc, oOp = append(oSvc, o.Node.Service), append(oOp, o.Node.Operation)
			oEv, oSp = append(oEv, o.Hops), append(oSp, o.Spurious)
		}
	}
	b.ownerSvc, b.ownerOp = append(b.ownerSvc, oSvc), append(b.ownerOp, oOp)
	b.ownerEvents, b.ownerSpurious = append(b.ownerEvents, oEv), append(b.ownerSpurious, oSp)
	return nil
}

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Apply stores a batch. ClickHouse cannot make it atomic, so it goes in
// steps that leave nothing wrong for good when cut short:
//
//  1. the minutes, hours and windows the batch touches are marked dirty
//     (and the summaries of the windows whose states it gives stale);
//  2. the records are written (a tombstone under the old key when a record
//     is deleted or its start moved to another minute), one block per day;
//  3. the rollups of the dirty minutes are recomputed from the records,
//     then those of the dirty hours this batch does not touch from their
//     minutes;
//  4. the window states are written;
//  5. the minutes, the hours recomputed, and the windows whose states were
//     written are marked clean;
//  6. the checkpoint is written.
//
// A failure after step 1 leaves the minutes dirty: this store recomputes
// them at its next Apply, a new one at its first Apply (it reads the dirty
// minutes at Open). Reports read dirty hours from their minutes. The
// windows stay dirty until an Apply writes their states: their states are
// not exact meanwhile (State).
func (s *Store) Apply(ctx context.Context, b store.Batch) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.checkOpen("apply"); err != nil {
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
	for m := range s.repair {
		minutes[m] = struct{}{}
	}
	// Hours this batch touches stay dirty; the others that are dirty are
	// recomputed.
	touched, settle := map[int64]struct{}{}, map[int64]struct{}{}
	for m := range minutes {
		touched[floorDiv(m, 60)] = struct{}{}
	}
	for h := range s.hours {
		if _, ok := touched[h]; !ok {
			settle[h] = struct{}{}
		}
	}
	err := s.apply(ctx, b, keys(minutes), keys(windows), keys(touched), keys(settle))
	for h := range touched {
		s.hours[h] = struct{}{}
	}
	if err != nil {
		for m := range minutes {
			s.repair[m] = struct{}{}
		}
		return err
	}
	clear(s.repair)
	for h := range settle {
		delete(s.hours, h)
	}
	return nil
}

func (s *Store) apply(ctx context.Context, b store.Batch, minutes, windows, touched, settle []int64) error {
	n := len(b.Changes)
	v0 := s.versions(n + 3)
	// Summaries of the windows whose states change go stale now; a crash
	// before the states are written only costs computing them again.
	stale := make([]int64, 0, len(b.States))
	for w := range b.States {
		stale = append(stale, w)
	}
	if err := s.mark(ctx, 1, v0, marks{minutes: minutes, hours: touched, windows: windows, summaries: stale}); err != nil {
		return err
	}
	if n > 0 {
		blocks := map[int64]*recordBlock{} // by day
		block := func(r *store.Record) *recordBlock {
			d := dayOfMinute(r.Minute())
			if blocks[d] == nil {
				blocks[d] = &recordBlock{}
			}
			return blocks[d]
		}
		for i, c := range b.Changes {
			v := v0 + 1 + uint64(i)
			if o := c.Old; o != nil && (c.New == nil || c.New.Window != o.Window || c.New.Minute() != o.Minute()) {
				if err := block(o).add(o, v, true); err != nil {
					return err
				}
			}
			if c.New != nil {
				if err := block(c.New).add(c.New, v, false); err != nil {
					return err
				}
			}
		}
		for _, d := range keys(mapKeys(blocks)) {
			if err := s.insert(ctx, "put records", "records", recordColumns, blocks[d].columns()...); err != nil {
				return err
			}
		}
	}
	if err := s.recomputeMinutes(ctx, minutes, v0+uint64(n)+1); err != nil {
		return err
	}
	if err := s.recomputeHours(ctx, settle, v0+uint64(n)+1); err != nil {
		return err
	}
	vEnd := v0 + uint64(n) + 2
	if len(b.States) > 0 {
		var days []time.Time
		var wins []int64
		var vers []uint64
		var dels []uint8
		var encs []string
		for w, st := range b.States {
			days, wins, vers = append(days, dayDate(dayOf(w*int64(s.window)))), append(wins, w), append(vers, vEnd)
			if st == nil || st.Traces == 0 {
				dels, encs = append(dels, 1), append(encs, "")
				continue
			}
			enc, err := json.Marshal(st)
			if err != nil {
				return fmt.Errorf("clickhouse: encode state of window %d: %w", w, err)
			}
			dels, encs = append(dels, 0), append(encs, string(enc))
		}
		if err := s.insert(ctx, "put states", "states", []string{"day", "win", "version", "deleted", "state"},
			days, wins, vers, dels, encs); err != nil {
			return err
		}
	}
	// A window is clean once its state is written: one whose records this
	// batch changed without giving its state stays dirty (not exact).
	var written []int64
	for _, w := range windows {
		if _, ok := b.States[w]; ok {
			written = append(written, w)
		}
	}
	if err := s.mark(ctx, 0, vEnd, marks{minutes: minutes, hours: settle, windows: written}); err != nil {
		return err
	}
	if b.Watermark > 0 {
		return s.putMeta(ctx, map[string]int64{metaWatermark: int64(b.Watermark)})
	}
	return nil
}

func mapKeys[V any](m map[int64]V) map[int64]struct{} {
	out := make(map[int64]struct{}, len(m))
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}

// Kinds of dirty markers (the dirty table's Enum8).
const (
	kindMinute  int8 = 0
	kindWindow  int8 = 1
	kindSummary int8 = 2
	kindHour    int8 = 3
)

// marks are the minutes, hours, windows (states) and summaries to mark.
type marks struct {
	minutes, hours, windows, summaries []int64
}

// mark sets the dirty flag of marks.
func (s *Store) mark(ctx context.Context, dirty uint8, v uint64, m marks) error {
	n := len(m.minutes) + len(m.hours) + len(m.windows) + len(m.summaries)
	if n == 0 {
		return nil
	}
	kinds, ids, days := make([]int8, 0, n), make([]int64, 0, n), make([]time.Time, 0, n)
	for _, x := range m.minutes {
		kinds, ids, days = append(kinds, kindMinute), append(ids, x), append(days, dayDate(dayOfMinute(x)))
	}
	for _, x := range m.hours {
		kinds, ids, days = append(kinds, kindHour), append(ids, x), append(days, dayDate(dayOfMinute(x*60)))
	}
	for _, set := range []struct {
		kind int8
		ws   []int64
	}{{kindWindow, m.windows}, {kindSummary, m.summaries}} {
		for _, w := range set.ws {
			kinds, ids, days = append(kinds, set.kind), append(ids, w), append(days, dayDate(dayOf(w*int64(s.window))))
		}
	}
	return s.insert(ctx, "mark dirty", "dirty", []string{"kind", "id", "day", "dirty", "version"},
		kinds, ids, days, slices.Repeat([]uint8{dirty}, n), slices.Repeat([]uint64{v}, n))
}

// readColumns are the columns a store.Record is read from.
const readColumns = `trace_id, start, win, api, seq, result, facts, edges`

// scanRecord reads one row of readColumns (and more columns into extra).
func scanRecord(r driver.Rows, extra ...any) (*store.Record, error) {
	var (
		rec           store.Record
		result, facts string
	)
	dest := append([]any{&rec.TraceID, &rec.Start, &rec.Window, &rec.API, &rec.Seq, &result, &facts, &rec.Edges}, extra...)
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	if len(rec.Edges) == 0 {
		rec.Edges = nil
	}
	rec.Facts = []byte(facts)
	rec.Result = &analysis.TraceResult{}
	if err := json.Unmarshal([]byte(result), rec.Result); err != nil {
		return nil, fmt.Errorf("clickhouse: record %s: %w: %w", rec.TraceID, store.ErrCorrupt, err)
	}
	return &rec, nil
}

// location is where a trace's record lives, from trace_index.
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

// Records returns the stored records of ids: where each lives from the
// trace index (most ids of a batch have none), then the records, by
// primary key.
func (s *Store) Records(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]*store.Record, error) {
	if err := s.checkOpen("read records"); err != nil {
		return nil, err
	}
	floor := s.retentionFloor(ctx)
	out := make(map[graph.TraceID]*store.Record, len(ids))
	const chunk = 1000
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		locs := map[graph.TraceID]location{}
		starts := map[graph.TraceID]int64{}
		err := s.query(ctx, "read trace index", `SELECT trace_id, win, minute, start, version, deleted FROM trace_index WHERE trace_id IN (`+
			idList(part)+`)`, func(r driver.Rows) error {
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
		err = s.query(ctx, "read records", `SELECT `+readColumns+`, minute, version, deleted FROM records WHERE win IN (`+
			intList(wins)+`) AND minute IN (`+intList(mins)+`) AND trace_id IN (`+idList(want)+`)`, func(r driver.Rows) error {
			var minute int64
			var v uint64
			var del uint8
			rec, err := scanRecord(r, &minute, &v, &del)
			if err != nil {
				return err
			}
			l := locs[rec.TraceID]
			if rec.Window != l.win || minute != l.minute || v < versions[rec.TraceID] {
				return nil // another key, or an older version
			}
			versions[rec.TraceID] = v
			if del != 0 {
				delete(out, rec.TraceID)
			} else {
				out[rec.TraceID] = rec
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WindowRecords calls fn with the records of window w that use one of
// edges (all of them when edges is empty): a range of the primary key,
// the latest version of each, tombstones and the edge filter applied
// after FINAL.
func (s *Store) WindowRecords(ctx context.Context, w int64, edges []uint64, fn func(*store.Record) error) error {
	if err := s.checkOpen("read window records"); err != nil {
		return err
	}
	q := `SELECT ` + readColumns + ` FROM (SELECT ` + readColumns + `, deleted FROM records FINAL WHERE win = ` + itoa(w) +
		`) WHERE deleted = 0 AND start >= ` + itoa(s.retentionFloor(ctx))
	if len(edges) > 0 {
		lits := make([]string, 0, len(edges))
		for _, e := range edges {
			lits = append(lits, "toUInt64("+utoa(e)+")")
		}
		q += ` AND hasAny(edges, [` + strings.Join(lits, ", ") + `])`
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

// Watermark returns the checkpoint.
func (s *Store) Watermark(ctx context.Context) (uint64, error) {
	if err := s.checkOpen("read watermark"); err != nil {
		return 0, err
	}
	var v int64
	err := s.queryRow(ctx, "read watermark", `SELECT argMax(value, version) FROM meta WHERE key = `+quote(metaWatermark), &v)
	return uint64(v), err
}
