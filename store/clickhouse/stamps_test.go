package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// TestTraceStamps: a trace's stamp moves when its spans are written or
// its record changes, by this handle (at once) or another (within the
// position's interval), and when another handle's retention drops a
// partition; not when another trace's spans or record are written (in
// another bucket) or when the server merges the parts. A handle that never
// asked before starts from the parts as they are.
func TestTraceStamps(t *testing.T) {
	dsn, w, r := writerReader(t)
	x := context.Background()
	day := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tx := tierRecord(1, day).TraceID
	y := uint64(2)
	for bucket(tierRecord(y, day).TraceID[:]) == bucket(tx[:]) {
		y++
	}
	ty := tierRecord(y, day).TraceID
	at := day.UnixNano()
	spans := func(id graph.TraceID, n byte) []graph.Span {
		return []graph.Span{{TraceID: id, SpanID: graph.SpanID{n}, Kind: graph.KindServer, Service: "a", Operation: "op", Start: at, End: at + 1e6}}
	}
	write := func(sp []graph.Span) {
		t.Helper()
		if _, err := w.WriteSpans(x, sp); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(c store.Change) {
		t.Helper()
		if err := w.Apply(x, store.Batch{Changes: []store.Change{c}}); err != nil {
			t.Fatal(err)
		}
	}
	stamp := func(st *Store, id graph.TraceID) uint64 {
		t.Helper()
		v, ok, err := st.TraceStamp(x, id)
		if err != nil || !ok {
			t.Fatalf("stamp of %s: %v %v", id, ok, err)
		}
		return v
	}
	// settled returns st's stamp of tx once it has read the parts as they
	// are now (a listing starts at most 250 ms after the last), and the
	// next listing is 250 ms away.
	settled := func(st *Store) uint64 {
		time.Sleep(300 * time.Millisecond)
		return stamp(st, tx)
	}
	// moves waits up to 10 s for st's stamp of tx to move from was.
	moves := func(st *Store, was uint64, what string) uint64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if v := stamp(st, tx); v != was {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stamp of tx did not move in 10 s after %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	write(spans(tx, 1))
	w0, r0 := settled(w), settled(r)

	// Another trace's spans and record: neither stamp of tx moves.
	write(spans(ty, 1))
	apply(store.Change{New: tierRecord(y, day)})
	if got := stamp(w, tx); got != w0 {
		t.Errorf("the writer's stamp of tx moved with writes of ty: %d, was %d", got, w0)
	}
	if got := settled(r); got != r0 {
		t.Errorf("the reader's stamp of tx moved with writes of ty: %d, was %d", got, r0)
	}

	// tx's spans: the writer's moves at once (its stamp read just after
	// a listing, so that the next does not list again: its own write
	// moved it), the reader's within 10 s.
	w1 := settled(w)
	write(spans(tx, 2))
	if stamp(w, tx) == w1 {
		t.Errorf("the writer's stamp of tx did not move with its own span write")
	}
	r1 := moves(r, r0, "another handle wrote its spans")

	// tx's record: the same.
	w2 := settled(w)
	apply(store.Change{New: tierRecord(1, day)})
	if stamp(w, tx) == w2 {
		t.Errorf("the writer's stamp of tx did not move with its own record")
	}
	r2 := moves(r, r1, "another handle applied its record")

	// A merge of parts the reader read: nothing moves.
	for _, table := range []string{"trace_spans", "records"} {
		if err := w.exec(x, "optimize", "OPTIMIZE TABLE "+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	if got := settled(r); got != r2 {
		t.Errorf("the reader's stamp of tx moved with a merge: %d, was %d", got, r2)
	}

	// A handle that never asked: its first stamp, then the same while
	// nothing is written; a write of tx by another handle moves it.
	n := open(t, dsn, time.Hour)
	defer n.Close()
	n0 := stamp(n, tx)
	if got := settled(n); got != n0 {
		t.Errorf("a new handle's stamp moved with nothing written: %d, was %d", got, n0)
	}
	write(spans(tx, 3))
	moves(n, n0, "another handle wrote its spans")

	// Retention by another handle drops the record's day: the reader's
	// stamp moves.
	r3 := settled(r)
	if err := w.DeleteBefore(x, day.Add(24*time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	moves(r, r3, "another handle's retention dropped the record's day")
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
