package clickhouse

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/position"
)

// Trace stamps (store.TraceStamper): what lets the read API keep a
// trace's view until its spans or its record change.
//
// A trace's stamp is the generation of its bucket (its id hashed into
// stampBuckets): every span write and every change of records moves the
// buckets of the traces it holds. This process's writes move them when
// their insert returns (WriteSpans, Apply); its retention moves them all.
// Another process's are read from the tables: every insert into
// trace_spans or records is a part with a block number above every other
// of its table's (on one server block numbers are the table's, given as a
// part becomes active). So the parts above the highest block read are the
// writes not read yet: a span write's log row (by primary key: trace id
// logID) lists its traces, and a records part holds the trace ids of the
// records an Apply changed. The parts are listed at most every
// position.DefaultEvery, and only when a stamp is asked for; a new
// retention floor or a partition dropped (another process's DeleteBefore)
// moves every bucket.
//
// A part that merged read and unread writes before it was listed (the
// stamps were not asked for a while), one gone between the listing and
// the read, or too many new parts: every bucket moves and the highest
// block becomes the highest listed (a reader computes its traces again,
// nothing is missed). On a cluster there are no stamps (block numbers are
// each partition's on a replicated table).
type traceWatch struct {
	gens [stampBuckets]atomic.Uint64

	// poll runs readStamps at most every position.DefaultEvery, one at a
	// time, as the write position's tracker reads the position (its
	// fingerprint never moves: the buckets are what move).
	poll position.Tracker
	// Under poll's lock:
	hi    map[string]int64    // by table: the highest block number read (nil before the first listing)
	days  map[string][]string // by table: its partitions, sorted
	floor int64               // the retention floor when last read
}

// watched are the tables a trace's view is read from, with the query
// returning the trace ids of the writes in the parts listed (%s).
var watched = map[string]string{
	"trace_spans": `SELECT _part, data FROM trace_spans WHERE trace_id = ` + idList([]graph.TraceID{logID}) + ` AND _part IN (%s)`,
	"records":     `SELECT _part, trace_id FROM records WHERE _part IN (%s)`,
}

// stampBuckets is the number of buckets: a write moves the stamps of
// about 1/stampBuckets of the other traces with each trace it holds.
const stampBuckets = 4096

// stampMaxParts bounds the new parts whose writes one listing reads;
// beyond, every bucket moves.
const stampMaxParts = 256

// bucket returns the bucket of trace id.
func bucket(id []byte) int {
	h := binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:16])*0x9e3779b97f4a7c15
	// splitmix64's finaliser: every bit of the id reaches the low bits.
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	return int((h ^ h>>31) % stampBuckets)
}

// bucketsOf returns the buckets of the traces ids (none without a watch).
func (w *traceWatch) bucketsOf(ids [][]byte) []uint16 {
	if w == nil {
		return nil
	}
	b := make([]uint16, len(ids))
	for i, id := range ids {
		b[i] = uint16(bucket(id))
	}
	return b
}

// move moves buckets.
func (w *traceWatch) move(buckets []uint16) {
	if w == nil {
		return
	}
	for _, b := range buckets {
		w.gens[b].Add(1)
	}
}

// moveChanges moves the buckets of the records changes change.
func (w *traceWatch) moveChanges(changes []store.Change) {
	if w == nil {
		return
	}
	for _, c := range changes {
		for _, r := range []*store.Record{c.Old, c.New} {
			if r != nil {
				w.gens[bucket(r.TraceID[:])].Add(1)
			}
		}
	}
}

// moveAll moves every bucket.
func (w *traceWatch) moveAll() {
	if w == nil {
		return
	}
	for i := range w.gens {
		w.gens[i].Add(1)
	}
}

// TraceStamp returns the stamp of trace id's view (store.TraceStamper);
// ok is false on a cluster.
func (s *Store) TraceStamp(ctx context.Context, id graph.TraceID) (uint64, bool, error) {
	if err := s.checkOpen("trace stamp"); err != nil {
		return 0, false, err
	}
	w := s.watch
	if w == nil {
		return 0, false, nil
	}
	if _, err := w.poll.Position(ctx); err != nil {
		return 0, false, err
	}
	return w.gens[bucket(id[:])].Load(), true, nil
}

// readStamps reads the traces of the writes another process made since
// it last did (w.poll's Read: under its lock; the fingerprint is always 0).
func (s *Store) readStamps(ctx context.Context) (uint64, error) {
	w := s.watch
	ctx = light(ctx)
	type part struct {
		name   string
		lo, hi int64
	}
	fresh := map[string][]part{}
	top := map[string]int64{}
	maps.Copy(top, w.hi)
	days := map[string][]string{}
	tables := slices.Sorted(maps.Keys(watched))
	above := "multiIf("
	for _, t := range tables {
		above += "table = " + quote(t) + ", " + itoa(w.hi[t]) + ", "
	}
	above = "max_block_number > " + above + "0)"
	err := s.query(ctx, "list trace parts", `SELECT table, arraySort(groupUniqArray(partition_id)), groupArrayIf(name, `+above+
		`), groupArrayIf(min_block_number, `+above+`), groupArrayIf(max_block_number, `+above+`) FROM system.parts WHERE database = `+
		quote(s.db)+` AND table IN ('records', 'trace_spans') AND active GROUP BY table`, func(r driver.Rows) error {
		var t string
		var ids, names []string
		var los, his []int64
		if err := r.Scan(&t, &ids, &names, &los, &his); err != nil {
			return err
		}
		days[t] = ids
		for i := range names {
			fresh[t] = append(fresh[t], part{names[i], los[i], his[i]})
			top[t] = max(top[t], his[i])
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// A partition dropped (another process's retention).
	dropped := false
	for _, t := range tables {
		for _, d := range w.days[t] {
			_, found := slices.BinarySearch(days[t], d)
			dropped = dropped || !found
		}
	}
	floor := s.retentionFloor(ctx)
	all := w.hi == nil || floor != w.floor || dropped
	n := 0
	for t, ps := range fresh {
		n += len(ps)
		for _, p := range ps {
			all = all || p.lo <= w.hi[t] // merged with writes read before
		}
	}
	all = all || n > stampMaxParts
	var moved []uint16
	for t, ps := range fresh {
		if all {
			break
		}
		names := make([]string, len(ps))
		for i, p := range ps {
			names[i] = quote(p.name)
		}
		read := map[string]bool{}
		err := s.query(ctx, "read trace writes", fmt.Sprintf(watched[t], strings.Join(names, ", ")), func(r driver.Rows) error {
			var name, v string
			if err := r.Scan(&name, &v); err != nil {
				return err
			}
			read[name] = true
			b := []byte(v)
			if t == "records" {
				moved = append(moved, uint16(bucket(b)))
			} else if len(b) > 0 && b[0] == logMarker {
				for b = b[1:]; len(b) >= 16; b = b[16:] {
					moved = append(moved, uint16(bucket(b)))
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		// A part listed and not read is gone (merged since).
		all = len(read) < len(ps)
	}
	if all {
		w.moveAll()
	} else {
		w.move(moved)
	}
	w.hi, w.days, w.floor = top, days, floor
	return 0, nil
}
