package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
)

// TestSpanStamps: a trace's stamp moves when its spans are written, by
// this handle (at once) or another (within the position's interval), and
// not when another trace's are (in another bucket) or when the server
// merges the parts; a handle that never asked before starts from the
// parts as they are.
func TestSpanStamps(t *testing.T) {
	dsn := freshDatabase(t, server(t))
	x := context.Background()
	w := open(t, dsn, time.Hour)
	defer w.Close()
	r := open(t, dsn, time.Hour)
	defer r.Close()
	tx := graph.TraceID{0x5a, 1}
	ty := graph.TraceID{0x5a, 2}
	for bucket(ty[:]) == bucket(tx[:]) {
		ty[15]++
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	spans := func(id graph.TraceID, n byte) []graph.Span {
		return []graph.Span{{TraceID: id, SpanID: graph.SpanID{n}, Kind: graph.KindServer, Service: "a", Operation: "op", Start: at, End: at + 1e6}}
	}
	write := func(sp []graph.Span) {
		t.Helper()
		if _, err := w.WriteSpans(x, sp); err != nil {
			t.Fatal(err)
		}
	}
	stamp := func(st *Store, id graph.TraceID) uint64 {
		t.Helper()
		v, ok, err := st.SpanStamp(x, id)
		if err != nil || !ok {
			t.Fatalf("stamp of %s: %v %v", id, ok, err)
		}
		return v
	}
	// settled returns r's stamp of id once it has read the parts as they
	// are now (a listing starts at most 250 ms after the last).
	settled := func(id graph.TraceID) uint64 {
		time.Sleep(300 * time.Millisecond)
		return stamp(r, id)
	}
	write(spans(tx, 1))
	w0, r0 := stamp(w, tx), settled(tx)

	// Another trace's spans: neither stamp of tx moves.
	write(spans(ty, 1))
	if got := stamp(w, tx); got != w0 {
		t.Errorf("the writer's stamp of tx moved with a write of ty: %d, was %d", got, w0)
	}
	if got := settled(tx); got != r0 {
		t.Errorf("the reader's stamp of tx moved with a write of ty: %d, was %d", got, r0)
	}

	// tx's spans: the writer's moves at once, the reader's within 10 s.
	write(spans(tx, 2))
	w1 := stamp(w, tx)
	if w1 == w0 {
		t.Errorf("the writer's stamp of tx did not move with its own write")
	}
	deadline := time.Now().Add(10 * time.Second)
	r1 := stamp(r, tx)
	for r1 == r0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		r1 = stamp(r, tx)
	}
	if r1 == r0 {
		t.Fatalf("the reader's stamp of tx did not move in 10 s after another handle wrote its spans")
	}

	// A merge of parts the reader read: nothing moves.
	if err := w.exec(x, "optimize", "OPTIMIZE TABLE trace_spans FINAL"); err != nil {
		t.Fatal(err)
	}
	if got := settled(tx); got != r1 {
		t.Errorf("the reader's stamp of tx moved with a merge: %d, was %d", got, r1)
	}

	// A handle that never asked: its first stamp, then the same while
	// nothing is written; a write of tx by another handle moves it.
	n := open(t, dsn, time.Hour)
	defer n.Close()
	n0 := stamp(n, tx)
	time.Sleep(300 * time.Millisecond)
	if got := stamp(n, tx); got != n0 {
		t.Errorf("a new handle's stamp moved with nothing written: %d, was %d", got, n0)
	}
	write(spans(tx, 3))
	deadline = time.Now().Add(10 * time.Second)
	for stamp(n, tx) == n0 {
		if time.Now().After(deadline) {
			t.Fatal("a new handle's stamp of tx did not move in 10 s after another handle wrote its spans")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBucketSpread: ids that differ in one byte spread over the buckets
// (a weak hash would leave a byte out and put such ids in one bucket).
func TestBucketSpread(t *testing.T) {
	for i := 0; i < 16; i++ {
		seen := map[int]bool{}
		id := graph.TraceID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x0f, 0xed, 0xcb, 0xa9, 0x87, 0x65, 0x43, 0x21}
		for v := 0; v < 256; v++ {
			id[i] = byte(v)
			seen[bucket(id[:])] = true
		}
		if len(seen) < 200 {
			t.Errorf("byte %d: 256 values in %d buckets", i, len(seen))
		}
	}
}
