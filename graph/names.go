package graph

import "unsafe"

// nameTable numbers names in order of first use: the names of a batch of
// spans (Grouper), of one encoded record (TraceEncoder). Decoders intern
// names, so the same name mostly arrives as the same string: a cache
// keyed by where a string's bytes are and its length (the same bytes, the
// same string, while the table holds them) answers most lookups without
// hashing the string.
type nameTable struct {
	index map[string]uint32
	table []string
	cache []nameSlot // a power of two long
	gen   uint32     // the cache's slots of other generations are empty
}

type nameSlot struct {
	p   *byte
	n   int
	idx uint32
	gen uint32
}

// Cache sizes: a batch of spans has many names, a record few.
const (
	groupNameCache  = 4096
	recordNameCache = 256
)

// reset empties the table, with a cache of size slots (a power of two).
func (t *nameTable) reset(size int) {
	if t.index == nil || len(t.index) > 4096 {
		t.index = make(map[string]uint32, 64)
	}
	clear(t.index)
	t.table = t.table[:0]
	if len(t.cache) != size {
		t.cache, t.gen = make([]nameSlot, size), 0
	}
	if t.gen++; t.gen == 0 {
		clear(t.cache)
		t.gen = 1
	}
}

// of returns the number of s, numbering it when new.
func (t *nameTable) of(s string) uint32 {
	p := unsafe.StringData(s)
	c := &t.cache[(uintptr(unsafe.Pointer(p))>>4^uintptr(len(s)))&uintptr(len(t.cache)-1)]
	if c.gen == t.gen && c.p == p && c.n == len(s) && p != nil {
		return c.idx
	}
	i, ok := t.index[s]
	if !ok {
		i = uint32(len(t.table))
		t.index[s] = i
		t.table = append(t.table, s)
	}
	*c = nameSlot{p: p, n: len(s), idx: i, gen: t.gen}
	return i
}
