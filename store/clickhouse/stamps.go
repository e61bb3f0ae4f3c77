package clickhouse

import (
	"context"
	"encoding/binary"
	"sync/atomic"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// traceWatch holds the trace stamps (store.TraceStamper): a trace's is its
// bucket's generation, moved by this process's writes as they return and
// by others' as the change log names them (changes.go).
type traceWatch struct {
	gens [stampBuckets]atomic.Uint64
}

// stampBuckets: a write moves the stamps of about 1/stampBuckets of the
// other traces with each trace it holds.
const stampBuckets = 4096

// bucket returns the bucket of trace id.
func bucket(id []byte) int {
	h := binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:16])*0x9e3779b97f4a7c15
	// splitmix64's finaliser: every bit of the id reaches the low bits.
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	return int((h ^ h>>31) % stampBuckets)
}

// bucketsOf returns the buckets of the traces ids.
func bucketsOf(ids [][]byte) []uint16 {
	b := make([]uint16, len(ids))
	for i, id := range ids {
		b[i] = uint16(bucket(id))
	}
	return b
}

func (w *traceWatch) move(buckets []uint16) {
	for _, b := range buckets {
		w.gens[b].Add(1)
	}
}

// moveChanges moves the buckets of the records changes change.
func (w *traceWatch) moveChanges(changes []store.Change) {
	for _, c := range changes {
		for _, r := range []*store.Record{c.Old, c.New} {
			if r != nil {
				w.gens[bucket(r.TraceID[:])].Add(1)
			}
		}
	}
}

func (w *traceWatch) moveAll() {
	for i := range w.gens {
		w.gens[i].Add(1)
	}
}

// TraceStamp returns the stamp of trace id's view; ok is always true.
func (s *Store) TraceStamp(ctx context.Context, id graph.TraceID) (uint64, bool, error) {
	if err := s.checkOpen("trace stamp"); err != nil {
		return 0, false, err
	}
	if _, err := s.pos.Position(ctx); err != nil {
		return 0, false, err
	}
	return s.watch.gens[bucket(id[:])].Load(), true, nil
}
