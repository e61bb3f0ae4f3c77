package chsource

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// nativeStream writes Native blocks (protocol revision 0) by hand, as
// ClickHouse's NativeWriter and its serializations lay them out.
type nativeStream struct{ b []byte }

func (w *nativeStream) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *nativeStream) u64(v uint64)     { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *nativeStream) str(s string)     { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *nativeStream) head(cols, rows int) {
	w.uvarint(uint64(cols))
	w.uvarint(uint64(rows))
}
func (w *nativeStream) col(name, typ string) { w.str(name); w.str(typ) }

// nativeBlocks returns the stream of TestNativeReader and where its blocks
// end, with the change bad names made to it.
func nativeBlocks(bad string) ([]byte, []int) {
	var w nativeStream
	var ends []int
	ifBad := func(b, good, other string) string {
		if bad == b {
			return other
		}
		return good
	}
	cols := 4
	if bad == "the column count" {
		cols = 5
	}
	w.head(cols, 5)
	w.col(ifBad("a column's name", "a", "b"), "LowCardinality(String)")
	w.u64(1)                                 // keys' serialization version
	flags := uint64(1 | lcHasAdditionalKeys) // UInt16 indexes
	if bad == "a global dictionary" {
		flags |= lcNeedGlobalDictionary
	}
	w.u64(flags)
	w.u64(2) // keys
	w.str("x")
	w.str("yy")
	w.u64(3) // rows
	last := byte(1)
	if bad == "an index past its keys" {
		last = 2
	}
	w.b = append(w.b, 1, 0, 0, 0, last, 0) // yy x yy
	w.u64(0 | lcHasAdditionalKeys)         // UInt8 indexes
	w.u64(1)
	w.str("z")
	w.u64(2)
	w.b = append(w.b, 0, 0) // z z
	w.col("m", "Map(String, String)")
	for _, o := range []uint64{0, 2, 2, 3, 3} {
		w.u64(o)
	}
	for _, s := range []string{"k1", "k2", "k3", "v1", "", "v3"} {
		w.str(s)
	}
	w.col("n", ifBad("a column's type", "Int64", "Int32"))
	for _, v := range []int64{-1, 0, 1, 1 << 40, -(1 << 62)} {
		w.u64(uint64(v))
	}
	w.col("r", "Array(String)")
	for _, o := range []uint64{1, 1, 3, 3, 3} {
		w.u64(o)
	}
	for _, s := range []string{"r1", "", "r3"} {
		w.str(s)
	}
	ends = append(ends, len(w.b))
	w.head(4, 0)
	w.col("a", "LowCardinality(String)")
	w.col("m", "Map(String, String)")
	w.col("n", "Int64")
	w.col("r", "Array(String)")
	ends = append(ends, len(w.b))
	w.head(4, 1)
	w.col("a", "String")
	w.str("w")
	w.col("m", "Map(LowCardinality(String), String)")
	w.u64(1) // the keys' prefix
	w.u64(0) // one empty map
	w.col("n", "Int64")
	w.u64(7)
	w.col("r", "Array(String)")
	w.u64(0) // an empty array
	ends = append(ends, len(w.b))
	return w.b, ends
}

// A stream of three blocks: LowCardinality in two groups of their own
// dictionaries and index widths, a Map of String keys with empty rows, an
// Int64, an Array(String); a block of no rows (no data at all); String
// where LowCardinality was, and a Map of LowCardinality keys whose rows
// are all empty (its prefix and offsets, no keys or values), an empty
// array. Every row reads back; a stream
// cut anywhere, or telling another shape, is an error, and an exception
// the server wrote after a block is found.
func TestNativeReader(t *testing.T) {
	stream, ends := nativeBlocks("")
	cols := func() []*column {
		return []*column{{name: "a", kind: kindText}, {name: "m", kind: kindMap}, {name: "n", kind: kindInt64}, {name: "r", kind: kindArray}}
	}
	type row struct {
		a string
		m []string // key=value
		n int64
		r []string
	}
	read := func(rd io.Reader) ([]row, error) {
		c := cols()
		r := newNativeReader(rd)
		var scratch []byte
		var out []row
		for {
			n, err := r.block(c, &scratch)
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			for i := range n {
				x := row{a: string(c[0].text.at(i)), n: c[2].int64(i)}
				k, v := c[1].appendPairs(i, nil, nil)
				for j := range k {
					x.m = append(x.m, k[j]+"="+v[j])
				}
				lo, hi := c[3].pairs(i)
				for j := lo; j < hi; j++ {
					x.r = append(x.r, string(c[3].vals.at(j)))
				}
				out = append(out, x)
			}
		}
	}
	want := []row{
		{a: "yy", n: -1, r: []string{"r1"}}, {a: "x", m: []string{"k1=v1", "k2="}}, {a: "yy", n: 1, r: []string{"", "r3"}},
		{a: "z", m: []string{"k3=v3"}, n: 1 << 40}, {a: "z", n: -(1 << 62)}, {a: "w", n: 7},
	}
	eq := func(got []row) bool {
		return slices.EqualFunc(got, want, func(a, b row) bool {
			return a.a == b.a && a.n == b.n && slices.Equal(a.m, b.m) && slices.Equal(a.r, b.r)
		})
	}
	for name, rd := range map[string]io.Reader{
		"whole": bytes.NewReader(stream), "a byte at a time": iotest.OneByteReader(bytes.NewReader(stream)),
	} {
		got, err := read(rd)
		if err != nil || !eq(got) {
			t.Errorf("%s: %+v, %v\nwant %+v", name, got, err, want)
		}
	}
	// Cut anywhere but between blocks: an error, never a short answer.
	for n := 1; n < len(stream); n++ {
		got, err := read(bytes.NewReader(stream[:n]))
		if between := slices.Contains(ends, n); (err == nil) != between || between && len(got) != 5 {
			t.Errorf("cut at %d of %d: %d rows, %v", n, len(stream), len(got), err)
		}
	}
	// Another shape than the one asked for.
	for _, c := range []string{"a column's name", "a column's type", "the column count", "an index past its keys", "a global dictionary"} {
		bad, _ := nativeBlocks(c)
		if _, err := read(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s changed: no error", c)
		}
	}
	// An exception after the first block.
	exc := "Code: 396. DB::Exception: Limit for result exceeded. (TOO_MANY_ROWS_OR_BYTES) (version 26.7.2.1)"
	first := stream[:ends[0]]
	r := newNativeReader(strings.NewReader(string(first) + "__exception__\r\n" + exc + "\r\n"))
	var scratch []byte
	if _, err := r.block(cols(), &scratch); err != nil {
		t.Fatal(err)
	}
	_, err := r.block(cols(), &scratch)
	if text, ok := r.exception(); err == nil || !ok || text != exc {
		t.Errorf("after an exception: %v, %q", err, text)
	}
}
