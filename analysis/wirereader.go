package analysis

import "encoding/binary"

// wireReader reads the varint encodings of trace results and window
// summaries, remembering the first error (after which every read gives
// zero values).
type wireReader struct {
	b   []byte
	err error
	// corrupt makes the error of a malformed field.
	corrupt func(what string) error
}

func (r *wireReader) fail(what string) {
	if r.err == nil {
		r.err = r.corrupt(what)
	}
	r.b = nil
}

func (r *wireReader) uv(what string) uint64 {
	if len(r.b) > 0 && r.b[0] < 0x80 { // most values fit one byte
		x := uint64(r.b[0])
		r.b = r.b[1:]
		return x
	}
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *wireReader) v(what string) int64 {
	if len(r.b) > 0 && r.b[0] < 0x80 {
		x := uint64(r.b[0])
		r.b = r.b[1:]
		return int64(x>>1) ^ -int64(x&1)
	}
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return x
}

// count reads a list length that the remaining bytes can hold, each
// element taking at least min bytes.
func (r *wireReader) count(min int, what string) int {
	n := r.uv(what)
	if n > uint64(len(r.b)/min) {
		r.fail(what + " too large")
		return 0
	}
	return int(n)
}

// str reads an index into a string table.
func (r *wireReader) str(table []string, what string) string {
	i := r.uv(what)
	if i >= uint64(len(table)) {
		r.fail(what + " out of range")
		return ""
	}
	return table[i]
}
