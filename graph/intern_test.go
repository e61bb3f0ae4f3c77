package graph

import (
	"strconv"
	"testing"
	"unsafe"
)

// The same bytes give the same string, and the table stays bounded.
func TestInterner(t *testing.T) {
	in := Interner{}
	a, b := in.Intern([]byte("checkout")), in.Intern([]byte("checkout"))
	if a != "checkout" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("%q and %q are not one string", a, b)
	}
	for i := range 1<<16 + 10 {
		if s := in.Intern([]byte(strconv.Itoa(i))); s != strconv.Itoa(i) {
			t.Fatalf("Intern(%d) = %q", i, s)
		}
	}
	if len(in) > 1<<16 {
		t.Fatalf("%d names held, want at most %d", len(in), 1<<16)
	}
}
