package graph

import "unsafe"

// Addr identifies up to four strings by where their bytes are and their
// lengths. Names are interned (Interner), so equal names share their
// bytes: an Addr that matches is the same names, and finding one costs no
// hashing of their contents. A cache holding an Addr keeps its bytes
// alive, so they are never reused for another string.
//
// An AddrCache slot (an Addr, a pointer and a flag) then takes 64 bytes:
// one cache line, for the lengths are int32 (a name is at most
// MaxNameLen bytes; a longer string's length is cut to its low 31 bits,
// and the pointers still tell strings apart).
type Addr struct {
	p [4]*byte
	n [4]int32
}

// AddrOf returns the Addr of a, b, c and d (unused ones empty).
func AddrOf(a, b, c, d string) Addr {
	return Addr{p: [4]*byte{unsafe.StringData(a), unsafe.StringData(b), unsafe.StringData(c), unsafe.StringData(d)},
		n: [4]int32{int32(len(a) & 0x7fffffff), int32(len(b) & 0x7fffffff), int32(len(c) & 0x7fffffff), int32(len(d) & 0x7fffffff)}}
}

func (k *Addr) hash() uint64 {
	h := uint64(uintptr(unsafe.Pointer(k.p[0])))*0x9e3779b97f4a7c15 ^ uint64(uintptr(unsafe.Pointer(k.p[1])))*0xc2b2ae3d27d4eb4f ^
		uint64(uintptr(unsafe.Pointer(k.p[2])))*0x165667b19e3779f9 ^ uint64(uintptr(unsafe.Pointer(k.p[3])))*0xbf58476d1ce4e5b9 ^
		uint64(k.n[0])<<48 ^ uint64(k.n[1])<<32 ^ uint64(k.n[2])<<16 ^ uint64(k.n[3])
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	return h >> 32
}

// equal compares word by word, inlined: == on the struct calls memequal.
func (k *Addr) equal(o *Addr) bool {
	return k.p[0] == o.p[0] && k.n[0] == o.n[0] && k.p[1] == o.p[1] && k.n[1] == o.n[1] &&
		k.p[2] == o.p[2] && k.n[2] == o.n[2] && k.p[3] == o.p[3] && k.n[3] == o.n[3]
}

// Sizes of an AddrCache: it starts at minAddrSlots and grows (emptied) to
// hold twice the entries of the map it stands before, up to maxAddrSlots.
const (
	minAddrSlots = 64
	maxAddrSlots = 4096
)

// AddrCache is a two-way set-associative cache of a map's values by the
// Addr of their keys' names, standing before a map whose entries are only added
// (whoever deletes from the map drops the cache). Its zero value is empty
// and ready.
type AddrCache[V any] struct {
	slots []addrSlot[V]
}

type addrSlot[V any] struct {
	k  Addr
	v  V
	ok bool
}

// Get returns the value cached for k. The cache is two-way: k may be in
// either slot of its pair (the one used last first).
func (c *AddrCache[V]) Get(k *Addr) (V, bool) {
	if len(c.slots) > 0 {
		i := k.hash() & uint64(len(c.slots)-2)
		if s := &c.slots[i]; s.ok && s.k.equal(k) {
			return s.v, true
		}
		if s := &c.slots[i+1]; s.ok && s.k.equal(k) {
			return s.v, true
		}
	}
	var zero V
	return zero, false
}

// Put caches v for k; entries is the size of the map cached (the cache
// grows with it).
func (c *AddrCache[V]) Put(k *Addr, v V, entries int) {
	switch n := len(c.slots); {
	case n == 0:
		c.slots = make([]addrSlot[V], minAddrSlots)
	case 2*entries > n && n < maxAddrSlots:
		c.slots = make([]addrSlot[V], 4*n)
	}
	i := k.hash() & uint64(len(c.slots)-2)
	if c.slots[i].ok {
		c.slots[i+1] = c.slots[i] // the older of the pair goes
	}
	c.slots[i] = addrSlot[V]{k: *k, v: v, ok: true}
}

// Memo remembers, position by position, what the lookups of the last
// trace of one kind found (the stats of its hops' nodes, of its calls'
// edges): the traces of one root API are mostly the same tree, so the
// hop at a position is mostly the same node as in the last one — found
// by comparing where its names are, with no hashing and no cache slot to
// load, the memo read in order. It covers a trace's first maxMemo
// positions. Its zero value is empty and ready.
type Memo[V any] struct {
	slots []memoSlot[V]
}

type memoSlot[V any] struct {
	k Addr
	v V
}

// maxMemo bounds the positions a Memo remembers.
const maxMemo = 512

// Get returns what position i found last, if its key was k.
func (m *Memo[V]) Get(i int, k *Addr) (V, bool) {
	if i < len(m.slots) {
		if s := &m.slots[i]; s.k.equal(k) {
			return s.v, true
		}
	}
	var zero V
	return zero, false
}

// Put remembers v, found for key k at position i.
func (m *Memo[V]) Put(i int, k *Addr, v V) {
	if i >= maxMemo {
		return
	}
	if i >= len(m.slots) {
		m.slots = append(m.slots, make([]memoSlot[V], i+1-len(m.slots))...)
	}
	m.slots[i] = memoSlot[V]{k: *k, v: v}
}
