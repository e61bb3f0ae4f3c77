package graph

import "encoding/binary"

// spanIndex maps span ids to span positions: an open-addressing table
// reused from trace to trace. Span ids are random, so their own bits are a
// good hash; a Go map would hash every id again.
type spanIndex struct {
	keys []SpanID
	vals []int32 // position + 1; 0 marks an empty slot
	mask uint64
}

// reset empties the index and sizes it for n ids (load ≤ 50%).
func (x *spanIndex) reset(n int) {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	if cap(x.vals) >= size {
		x.keys, x.vals = x.keys[:size], x.vals[:size]
		clear(x.vals)
	} else {
		x.keys, x.vals = make([]SpanID, size), make([]int32, size)
	}
	x.mask = uint64(size - 1)
}

func (x *spanIndex) slot(id SpanID) uint64 {
	h := binary.LittleEndian.Uint64(id[:])
	h ^= h >> 33 // ids are random, but be kind to sequential test ids
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h & x.mask
}

// get returns the position of id.
func (x *spanIndex) get(id SpanID) (int32, bool) {
	for i := x.slot(id); ; i = (i + 1) & x.mask {
		switch v := x.vals[i]; {
		case v == 0:
			return 0, false
		case x.keys[i] == id:
			return v - 1, true
		}
	}
}

// put records id at position pos, unless id is already there; it returns
// the position id has.
func (x *spanIndex) put(id SpanID, pos int32) (int32, bool) {
	for i := x.slot(id); ; i = (i + 1) & x.mask {
		switch v := x.vals[i]; {
		case v == 0:
			x.keys[i], x.vals[i] = id, pos+1
			return pos, false
		case x.keys[i] == id:
			return v - 1, true
		}
	}
}
