package clickhouse

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store/internal/position"
)

// Span stamps (store.SpanStamper): what lets the read API keep a trace's
// view until the trace's spans change.
//
// A trace's stamp is the generation of its bucket (its id hashed into
// stampBuckets): every span write moves the buckets of the traces it
// holds. This process's writes move them when their insert returns.
// Another process's are read from the write log: every insert into
// trace_spans is a part with a block number above every other of the
// table's (on one server block numbers are the table's, given as a part
// becomes active), and holds its write's log row, which lists the write's
// traces. So the parts above the highest block read are the writes not
// read yet; their log rows (by primary key: trace id logID) say which
// buckets to move. The parts are listed at most every position.DefaultEvery,
// and only when a stamp is asked for.
//
// A part that merged read and unread writes before it was listed (the
// stamps were not asked for a while), one gone between the listing and
// the read, or too many new parts: every bucket moves and the highest
// block becomes the highest listed (a reader computes its traces again,
// nothing is missed). On a cluster there are no stamps (block numbers are
// each partition's on a replicated table).
type spanWatch struct {
	gens [stampBuckets]atomic.Uint64

	mu     sync.Mutex // one reader of the parts at a time
	hi     int64      // the highest block number whose log row was read
	known  bool       // hi was read
	readAt time.Time  // when the parts were listed
}

// stampBuckets is the number of buckets: a write moves the stamps of
// about 1/stampBuckets of the other traces with each trace it holds.
const stampBuckets = 4096

// stampMaxParts bounds the new parts whose log rows one listing reads;
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
func (w *spanWatch) bucketsOf(ids [][]byte) []uint16 {
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
func (w *spanWatch) move(buckets []uint16) {
	if w == nil {
		return
	}
	for _, b := range buckets {
		w.gens[b].Add(1)
	}
}

// moveAll moves every bucket.
func (w *spanWatch) moveAll() {
	for i := range w.gens {
		w.gens[i].Add(1)
	}
}

// SpanStamp returns the stamp of trace id's spans (store.SpanStamper);
// ok is false on a cluster.
func (s *Store) SpanStamp(ctx context.Context, id graph.TraceID) (uint64, bool, error) {
	if err := s.checkOpen("span stamp"); err != nil {
		return 0, false, err
	}
	w := s.watch
	if w == nil {
		return 0, false, nil
	}
	if err := s.readStamps(ctx); err != nil {
		return 0, false, err
	}
	return w.gens[bucket(id[:])].Load(), true, nil
}

// readStamps reads the log rows of the span writes another process made
// since it last did (at most every position.DefaultEvery).
func (s *Store) readStamps(ctx context.Context) error {
	w := s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known && time.Since(w.readAt) < position.DefaultEvery {
		return nil
	}
	ctx = light(ctx)
	listed := time.Now()
	type part struct {
		name   string
		lo, hi int64
	}
	var fresh []part
	top := w.hi
	err := s.query(ctx, "list span parts", `SELECT name, min_block_number, max_block_number FROM system.parts WHERE database = `+
		quote(s.db)+` AND table = 'trace_spans' AND active AND max_block_number > `+itoa(w.hi), func(r driver.Rows) error {
		var p part
		if err := r.Scan(&p.name, &p.lo, &p.hi); err != nil {
			return err
		}
		fresh = append(fresh, p)
		top = max(top, p.hi)
		return nil
	})
	if err != nil {
		return err
	}
	all := !w.known || len(fresh) > stampMaxParts
	for _, p := range fresh {
		all = all || p.lo <= w.hi // merged with writes read before
	}
	if !all && len(fresh) > 0 {
		names := make([]string, len(fresh))
		for i, p := range fresh {
			names[i] = quote(p.name)
		}
		var moved []uint16
		read := map[string]bool{}
		err := s.query(ctx, "read span write log", `SELECT _part, data FROM trace_spans WHERE trace_id = `+
			idList([]graph.TraceID{logID})+` AND _part IN (`+strings.Join(names, ", ")+`)`, func(r driver.Rows) error {
			var name string
			var b []byte
			if err := r.Scan(&name, &b); err != nil {
				return err
			}
			read[name] = true
			if len(b) > 0 && b[0] == logMarker {
				for b = b[1:]; len(b) >= 16; b = b[16:] {
					moved = append(moved, uint16(bucket(b)))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		// A part listed and not read is gone (merged since).
		all = len(read) < len(fresh)
		w.move(moved)
	}
	if all {
		w.moveAll()
	}
	w.hi, w.known, w.readAt = top, true, listed
	return nil
}
