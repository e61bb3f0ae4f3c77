// Package wire reads the varint encodings stormradius writes (trace
// facts, span records, trace results, window summaries).
package wire

import "encoding/binary"

// Reader reads a record's fields in order, remembering the first error:
// after it every read gives zero values. Corrupt makes the error of a
// malformed field from its name.
type Reader struct {
	B       []byte
	Err     error
	Corrupt func(what string) error
}

// Fail records the error of field what (the first one wins) and stops
// the reading.
func (r *Reader) Fail(what string) {
	if r.Err == nil {
		r.Err = r.Corrupt(what)
	}
	r.B = nil
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint(what string) uint64 {
	if len(r.B) > 0 && r.B[0] < 0x80 { // most values fit one byte
		x := uint64(r.B[0])
		r.B = r.B[1:]
		return x
	}
	x, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail(what)
		return 0
	}
	r.B = r.B[n:]
	return x
}

// Varint reads a zig-zag varint (binary.AppendVarint's): an unsigned
// varint, unfolded.
func (r *Reader) Varint(what string) int64 {
	x := r.Uvarint(what)
	return int64(x>>1) ^ -int64(x&1)
}

// Byte reads one byte.
func (r *Reader) Byte(what string) byte {
	if len(r.B) == 0 {
		r.Fail(what)
		return 0
	}
	c := r.B[0]
	r.B = r.B[1:]
	return c
}

// Count reads a list length that the remaining bytes can hold, each
// element taking at least min bytes.
func (r *Reader) Count(min int, what string) int {
	n := r.Uvarint(what)
	if n > uint64(len(r.B)/min) {
		r.Fail(what + " too large")
		return 0
	}
	return int(n)
}

// Index reads an index that must be below n.
func (r *Reader) Index(n int, what string) int {
	v := r.Uvarint(what)
	if v >= uint64(n) {
		r.Fail(what + " out of range")
		return 0
	}
	return int(v)
}

// Str reads an index into a string table.
func (r *Reader) Str(table []string, what string) string {
	i := r.Uvarint(what)
	if i >= uint64(len(table)) {
		r.Fail(what + " out of range")
		return ""
	}
	return table[i]
}

// Name reads a length-prefixed name, through intern when it is not nil
// (interning the stored names spares a string per read).
func (r *Reader) Name(intern func([]byte) string) string {
	n := r.Uvarint("name length")
	if n > uint64(len(r.B)) {
		r.Fail("name length")
		return ""
	}
	var s string
	if intern != nil {
		s = intern(r.B[:n])
	} else {
		s = string(r.B[:n])
	}
	r.B = r.B[n:]
	return s
}

// Names appends n length-prefixed names (a record's name table) to table,
// stopping at the first error.
func (r *Reader) Names(table []string, n int, intern func([]byte) string) []string {
	for i := 0; i < n && r.Err == nil; i++ {
		s := r.Name(intern)
		if r.Err != nil {
			break
		}
		table = append(table, s)
	}
	return table
}
