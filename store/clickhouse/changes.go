package clickhouse

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/store/internal/position"
)

// The change log (table changes) tells every process reading a database
// what another's writes changed, on one server and on a cluster alike,
// from documented behaviour only: an acknowledged insert is seen by the
// reads that follow (cluster.go). No part names, block numbers or merges.
//
// Writers: each store is a writer with a random id numbering its rows.
// Apply, PutSummaries and DeleteBefore insert an intent row before their
// first insert and a done row (same sequence) once every insert is
// acknowledged or failed. Span writes' done rows follow them, one per
// 250 ms at most (spanChanges), unless the next write's intent row
// carries them first.
//
// Readers (poll, at most every position.DefaultEvery) read the rows sent
// since changeMargin before their last read and, for each unseen row of
// another writer, drop what they keep of its minutes, windows and traces.
// An intent holds its minutes (read live) until its done row, or holdMax
// for a writer that died. A row is read if acknowledged within
// changeMargin of its at on clocks within changeMargin: a slower insert
// (resendAfter) is sent again with a new at.

// Change kinds (the changes table's kind).
const (
	kindIntent uint8 = 0
	kindDone   uint8 = 1
)

const (
	// changeMargin is how far back of its last read a reader reads rows.
	changeMargin = time.Minute
	// resendAfter: a row whose insert took longer is sent again.
	resendAfter = changeMargin / 4
	// holdMax is how long an intent holds its minutes without its done
	// row.
	holdMax = 2 * time.Minute
	// lostTrack: a reader that has not read the log for longer starts
	// over (drops everything), rather than read all it missed.
	lostTrack = 10 * time.Minute
)

// change is what one write changes.
type change struct {
	lo, hi     int64 // minutes whose rollups change; lo >= hi: none
	wlo, whi   int64 // windows whose summaries change; wlo >= whi: none
	everything bool
	gens       bool     // rollup generations change (a repair)
	traces     []uint16 // stamp buckets of the traces whose spans or records change
}

// changeRow is a row of the changes table.
type changeRow struct {
	id rowID
	change
}

// rowID names a row: a row sent again has a new at.
type rowID struct {
	writer string
	seq    uint64
	kind   uint8
	at     int64
}

// changeLog is a writer's side: its id and sequence.
type changeLog struct {
	writer string
	mu     sync.Mutex
	seq    uint64
	// trimmed is when the log's old days were last dropped (trim).
	trimmed time.Time
}

// changeDays is how many days of the log are kept, today included.
const changeDays = 2

func newWriterID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nextSeq takes the writer's next sequence.
func (l *changeLog) nextSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return l.seq
}

var changeColumns = []string{"day", "at", "writer", "seq", "kind", "lo", "hi", "wlo", "whi", "everything", "gens", "traces"}

// announce inserts the row of c, kind k, sequence seq (sent again when
// its insert was slow).
func (s *Store) announce(ctx context.Context, k uint8, seq uint64, c change) error {
	for try := 0; ; try++ {
		start := time.Now()
		at := start.UnixNano()
		traces := c.traces
		if traces == nil {
			traces = []uint16{}
		}
		err := s.insert(ctx, "announce a change", "changes", changeColumns, []time.Time{dayDate(dayOf(at))}, []int64{at},
			[]string{s.changes.writer}, []uint64{seq}, []uint8{k}, []int64{c.lo}, []int64{c.hi}, []int64{c.wlo}, []int64{c.whi},
			[]uint8{flag(c.everything)}, []uint8{flag(c.gens)}, [][]uint16{traces})
		if err != nil || time.Since(start) <= resendAfter || try > 0 {
			return err
		}
	}
}

// flag is a UInt8 column's value of b.
func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// announced runs write, a write of c, between its intent and done rows.
// The done row is sent even when write failed or its context ended:
// readers would otherwise hold its minutes until holdMax.
func (s *Store) announced(ctx context.Context, c change, write func() error) error {
	seq := s.changes.nextSeq()
	c, spans := s.takeSpanChanges(c)
	if err := s.announce(ctx, kindIntent, seq, c); err != nil {
		s.spansWritten(spans) // their own row, then
		return err
	}
	err := write()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err2 := s.announce(dctx, kindDone, seq, c); err == nil {
		err = err2
	}
	return err
}

// trimChanges drops the log's days before the last changeDays, at most
// once an hour (Apply calls it). The parts listing is a hint: a day
// missed is dropped the next time.
func (s *Store) trimChanges(ctx context.Context) error {
	s.changes.mu.Lock()
	due := time.Since(s.changes.trimmed) > time.Hour
	if due {
		s.changes.trimmed = time.Now()
	}
	s.changes.mu.Unlock()
	if !due {
		return nil
	}
	table := "changes"
	if s.cluster != "" {
		table += localSuffix
	}
	keep := dayID(dayOf(time.Now().UnixNano()) - changeDays + 1)
	old, err := queryColumn[string](ctx, s, "list change log days", `SELECT DISTINCT partition_id FROM `+s.partsSource()+
		` WHERE database = `+quote(s.db)+` AND table = `+quote(table)+` AND active AND partition_id < `+quote(keep))
	for _, id := range old {
		if err == nil {
			err = s.exec(ctx, "drop change log day", `ALTER TABLE `+s.dataTable("changes")+` DROP PARTITION ID `+quote(id))
		}
	}
	return err
}

// spanChanges sends span writes' done rows behind them (a second insert
// on a write's path halved an SDK-sized client's rate); writes share a
// row. A process dying in between leaves others' views of those traces
// until their Apply names them after recovery. Close sends what is left.
type spanChanges struct {
	mu      sync.Mutex
	running bool
	traces  []uint16
	idle    chan struct{} // closed when the sender stops (nil: none running)
}

const (
	// As often as a reader polls (position.DefaultEvery), and longer
	// than the pipeline's store batches usually take: their intent rows
	// carry the span writes' traces, mostly. (At 100 ms, the rows behind
	// span writes were over half of the log's parts.)
	spanChangeEvery = 250 * time.Millisecond
	spanChangeTries = 3
)

// spansWritten queues a span write's done row for the traces of buckets.
func (s *Store) spansWritten(buckets []uint16) {
	if len(buckets) == 0 {
		return
	}
	g := &s.spanCh
	g.mu.Lock()
	defer g.mu.Unlock()
	g.traces = append(g.traces, buckets...)
	if !g.running {
		g.running, g.idle = true, make(chan struct{})
		go s.sendSpanChanges(g.idle)
	}
}

// takeSpanChanges returns c with the traces of the span writes queued
// (their spans acknowledged), and those traces, taken from the queue: a
// write's intent row carries them (each row is a part: 12 columns, ~30
// files on 18.16; the rows behind span writes were half of the log's).
func (s *Store) takeSpanChanges(c change) (change, []uint16) {
	g := &s.spanCh
	g.mu.Lock()
	spans := g.traces
	g.traces = nil
	g.mu.Unlock()
	if len(spans) == 0 {
		return c, nil
	}
	all := append(slices.Clone(c.traces), spans...)
	slices.Sort(all)
	c.traces = slices.Compact(all)
	return c, spans
}

// sendSpanChanges sends the span writes' rows until none are queued.
func (s *Store) sendSpanChanges(idle chan struct{}) {
	defer close(idle)
	g := &s.spanCh
	var last time.Time
	for {
		// One row every spanChangeEvery at most (an insert is a part).
		if wait := spanChangeEvery - time.Since(last); wait > 0 && !s.down.Load() {
			time.Sleep(wait)
		}
		last = time.Now()
		g.mu.Lock()
		traces := g.traces
		g.traces = nil
		if len(traces) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		slices.Sort(traces)
		c := change{traces: slices.Compact(traces)}
		seq := s.changes.nextSeq()
		var err error
		for try := 0; try < spanChangeTries; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = s.announce(ctx, kindDone, seq, c)
			cancel()
			if err == nil || s.down.Load() {
				break
			}
			time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
		}
		if err != nil {
			s.log.Warn("clickhouse: announcing span writes to other processes; their views of those traces may lag", "traces", len(c.traces), "err", err)
		}
	}
}

// flushSpanChanges waits, until ctx ends, for the queued rows to be sent.
func (s *Store) flushSpanChanges(ctx context.Context) {
	g := &s.spanCh
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// changeFeed is a reader's side: what it read of the log.
type changeFeed struct {
	// holdMax is holdMax (tests shorten it).
	holdMax time.Duration
	// Under the position tracker's lock (poll runs as its Read):
	known  bool      // read since the last failure
	polled time.Time // when the last read began
	count  uint64    // the fingerprint poll returns: moves with every row read
	seen   map[rowID]struct{}

	heldMu sync.Mutex
	holds  map[holdKey]hold // intents without their done row
}

// holdKey names a write: its writer and sequence.
type holdKey struct {
	writer string
	seq    uint64
}

type hold struct {
	change
	since time.Time
}

// poll reads the change log (the position tracker's Read, under its
// lock).
func (s *Store) poll(ctx context.Context) (uint64, error) {
	f := &s.feed
	ctx = light(ctx)
	now := time.Now()
	first := !f.known || now.Sub(f.polled) > lostTrack
	from := f.polled.Add(-changeMargin)
	if first {
		// Every row of the margin is new: its intents hold again.
		from, f.seen = now.Add(-changeMargin), map[rowID]struct{}{}
	}
	rows, err := s.readChanges(ctx, from.UnixNano())
	if err != nil {
		s.forget()
		return 0, err
	}
	if first {
		// What was kept before is not known to be current: dropped.
		s.clearCaches()
		f.heldMu.Lock()
		f.holds = map[holdKey]hold{}
		f.heldMu.Unlock()
		f.count++
	}
	moved := false
	for _, r := range rows {
		f.seen[r.id] = struct{}{}
		k := holdKey{r.id.writer, r.id.seq}
		f.heldMu.Lock()
		if r.id.kind == kindIntent {
			f.holds[k] = hold{r.change, now}
		} else {
			delete(f.holds, k)
		}
		f.heldMu.Unlock()
		if !first {
			s.dropChanged(r.change)
		}
		moved = true
	}
	// Intents whose writer died: what they held is dropped once more.
	var expired []change
	f.heldMu.Lock()
	for k, h := range f.holds {
		if now.Sub(h.since) > cmp.Or(f.holdMax, holdMax) {
			delete(f.holds, k)
			expired = append(expired, h.change)
		}
	}
	f.heldMu.Unlock()
	for _, c := range expired {
		s.dropChanged(c)
		moved = true
	}
	for id := range f.seen {
		if id.at < from.UnixNano() {
			delete(f.seen, id)
		}
	}
	if moved {
		f.count++
	}
	f.known, f.polled = true, now
	return f.count, nil
}

// readChanges returns other writers' unseen rows sent at or after from,
// oldest first: their keys, then the rest of the new ones.
func (s *Store) readChanges(ctx context.Context, from int64) ([]changeRow, error) {
	var fresh []rowID
	err := s.query(ctx, "read changes", `SELECT writer, seq, kind, at FROM changes WHERE at >= `+itoa(from)+
		` AND writer != `+quote(s.changes.writer), func(r driver.Rows) error {
		var id rowID
		if err := r.Scan(&id.writer, &id.seq, &id.kind, &id.at); err != nil {
			return err
		}
		if _, ok := s.feed.seen[id]; !ok {
			fresh = append(fresh, id)
		}
		return nil
	})
	if err != nil || len(fresh) == 0 {
		return nil, err
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	keys := make([]string, len(fresh))
	for i, id := range fresh {
		lo, hi = min(lo, id.at), max(hi, id.at)
		keys[i] = fmt.Sprintf("(%d, %s, %d, %d)", id.at, quote(id.writer), id.seq, id.kind)
	}
	var out []changeRow
	err = s.query(ctx, "read changes", `SELECT at, writer, seq, kind, lo, hi, wlo, whi, everything, gens, traces FROM changes WHERE at >= `+
		itoa(lo)+` AND at <= `+itoa(hi)+` AND (at, writer, seq, kind) IN (`+strings.Join(keys, ", ")+`)`, func(r driver.Rows) error {
		var c changeRow
		var every, gens uint8
		if err := r.Scan(&c.id.at, &c.id.writer, &c.id.seq, &c.id.kind, &c.lo, &c.hi, &c.wlo, &c.whi, &every, &gens, &c.traces); err != nil {
			return err
		}
		c.everything, c.gens = every != 0, gens != 0
		out = append(out, c)
		return nil
	})
	slices.SortFunc(out, func(a, b changeRow) int { return cmp.Compare(a.id.at, b.id.at) })
	return out, err
}

// dropChanged drops what the store keeps of what c changed.
func (s *Store) dropChanged(c change) {
	if c.everything {
		s.clearCaches()
		s.floorMu.Lock()
		s.floorRead = time.Time{} // the retention floor is read again
		s.floorMu.Unlock()
		return
	}
	if c.lo < c.hi {
		s.invalidate(c.lo, c.hi)
	}
	if c.wlo < c.whi {
		s.sumGen.Add(1)
	}
	if c.gens {
		s.gensKept.drop()
	}
	s.watch.move(c.traces)
}

// clearCaches drops everything the store keeps.
func (s *Store) clearCaches() {
	s.clearTiers()
	s.gensKept.drop()
	s.sumGen.Add(1)
	s.watch.moveAll()
}

// forget drops everything kept: the log could not be read (under the
// tracker's lock).
func (s *Store) forget() {
	s.feed.known = false
	s.clearCaches()
}

// isHeld reports whether another process's unfinished write changes a
// minute of [lo, hi) (the tier caches' Held).
func (f *changeFeed) isHeld(lo, hi int64) bool {
	f.heldMu.Lock()
	defer f.heldMu.Unlock()
	for _, h := range f.holds {
		if h.lo < h.hi && h.lo < hi && lo < h.hi {
			return true
		}
	}
	return false
}

// heldEdges returns the edges of the minutes held.
func (f *changeFeed) heldEdges() []int64 {
	f.heldMu.Lock()
	defer f.heldMu.Unlock()
	var out []int64
	for _, h := range f.holds {
		if h.lo < h.hi && h.lo > position.AllLo {
			out = append(out, h.lo, h.hi)
		}
	}
	return out
}

// Position returns the store's write position: moved by this process's
// writes as they return, by another's as the change log says (poll).
func (s *Store) Position(ctx context.Context) (uint64, error) {
	if err := s.checkOpen("position"); err != nil {
		return 0, err
	}
	return s.pos.Position(ctx)
}

// cachesOn reports whether what the store keeps may be used (the log was
// read within position.DefaultEvery), and keeps the rollup generations.
// Every read of rollups calls it first.
func (s *Store) cachesOn(ctx context.Context) bool {
	if _, err := s.pos.Position(ctx); err != nil {
		return false
	}
	s.keepGens(ctx)
	return true
}
