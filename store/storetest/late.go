package storetest

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// lateRefresh is how soon another handle must see a write: a few of its
// poll intervals (store/internal/position.DefaultEvery, 250 ms), with
// room for a loaded machine and a cluster's slower reads.
const lateRefresh = 3 * time.Second

// testLateWrite: two handles share a database (two processes); the
// reader caches an older day (its report, its last minute, a trace's
// spans, record and stamp), then the writer writes many times into a
// newer day and then late into the older one: a late span of the trace,
// its record changed, a new record. The reader's answers of the older
// day change within lateRefresh, to the values counted here. The writes
// into the newer day first give its partitions the higher block numbers
// where a store's parts are numbered per partition (ReplicatedMergeTree
// on a cluster; SharedMergeTree): a reader that took the highest block
// number read for the table's position would miss the late write.
func testLateWrite(t *testing.T, open Opener) {
	w := open(t, true)
	defer w.Close()
	r := open(t, false)
	defer r.Close()
	x := ctx(t)
	older := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	newer := older.Add(48 * time.Hour)
	rec := func(id uint64, at time.Time, failed bool) *store.Record {
		res := &analysis.TraceResult{API: "late GET /", Start: at.UnixNano(), Spans: 3, Radius: 1, Hops: 3, Counterfactual: 3,
			RootFailed: failed, Window: analysis.WindowOf(at.UnixNano(), w.Window())}
		binary.BigEndian.PutUint64(res.TraceID[8:], id)
		res.TraceID[0] = 0x1a
		return &store.Record{TraceID: res.TraceID, Start: res.Start, Window: res.Window, API: res.API, Seq: 1, Result: res, Facts: []byte{0}}
	}
	apply := func(changes ...store.Change) {
		t.Helper()
		if err := w.Apply(x, store.Batch{Changes: changes}); err != nil {
			t.Fatal(err)
		}
	}
	// The older day: 20 traces at 10:00–10:19, the first failed.
	var olds []*store.Record
	for i := range 20 {
		olds = append(olds, rec(uint64(1+i), older.Add(10*time.Hour+time.Duration(i)*time.Minute), i == 0))
	}
	for _, o := range olds {
		apply(store.Change{New: o})
	}
	trace := olds[5]
	span := func(id byte, at time.Time) graph.Span {
		return graph.Span{TraceID: trace.TraceID, SpanID: graph.SpanID{id}, Kind: graph.KindServer, Service: "late", Operation: "GET /",
			Start: at.UnixNano(), End: at.UnixNano() + 1e6}
	}
	if _, err := w.WriteSpans(x, []graph.Span{span(1, time.Unix(0, trace.Start))}); err != nil {
		t.Fatal(err)
	}
	day := store.Query{From: older.UnixNano(), To: older.Add(24 * time.Hour).UnixNano()}
	look := func(s store.Store) lateView { return lookLate(t, s, day, trace.TraceID) }
	minute := func(at time.Time) int64 { return analysis.MinuteOf(at.UnixNano()) }
	before := lateView{traces: 20, failed: 1, last: minute(older.Add(10*time.Hour + 19*time.Minute)), spans: 1}
	// The reader reads (and keeps) the older day twice.
	for range 2 {
		got := look(r)
		before.stamp = got.stamp
		if got != before {
			t.Fatalf("the reader's older day %+v, want %+v", got, before)
		}
	}
	// The writer writes into the newer day, many times.
	for i := range 12 {
		apply(store.Change{New: rec(uint64(1000+i), newer.Add(time.Duration(i)*time.Minute), false)})
	}
	// Late into the older day: a span of the trace, its record now
	// failed, and a new trace at 23:50.
	if _, err := w.WriteSpans(x, []graph.Span{span(2, time.Unix(0, trace.Start).Add(time.Millisecond))}); err != nil {
		t.Fatal(err)
	}
	changed := *trace
	res := *trace.Result
	res.RootFailed = true
	changed.Result, changed.Seq = &res, 2
	apply(store.Change{Old: trace, New: &changed}, store.Change{New: rec(99, older.Add(23*time.Hour+50*time.Minute), false)})
	want := lateView{traces: 21, failed: 2, last: minute(older.Add(23*time.Hour + 50*time.Minute)), spans: 2, recFailed: true}
	deadline := time.Now().Add(lateRefresh)
	for {
		got := look(r)
		stamped := got.stamp
		got.stamp = 0
		if got == want && (before.stamp == 0 || stamped != before.stamp) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the late write, the reader's older day %+v (stamp %d, was %d), want %+v", lateRefresh, got, stamped,
				before.stamp, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The writer's own answers at once.
	if got := look(w); got.traces != want.traces || got.failed != want.failed || got.last != want.last || got.spans != want.spans ||
		got.recFailed != want.recFailed {
		t.Fatalf("the writer's older day %+v, want %+v", got, want)
	}
}

// lateView is what testLateWrite's reader sees of the older day.
type lateView struct {
	traces, failed int64 // failed: root errors
	last           int64
	spans          int
	recFailed      bool
	stamp          uint64
}

// lookLate reads s's view of day and of trace id.
func lookLate(t *testing.T, s store.Store, day store.Query, id graph.TraceID) lateView {
	t.Helper()
	x := ctx(t)
	var v lateView
	rep, err := s.Report(x, day)
	if err != nil {
		t.Fatal(err)
	}
	v.traces = rep.Traces
	if a := rep.APIs["late GET /"]; a != nil {
		v.failed = a.RootErrors
	}
	if ir, ok := s.(store.IncidentReader); ok {
		if v.last, _, err = ir.LastMinute(x, day); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := s.TraceSpans(x, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	v.spans = len(sp)
	recs, err := s.Records(x, []graph.TraceID{id})
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[id]; got != nil {
		v.recFailed = got.Result.RootFailed
	}
	if st, ok := s.(store.TraceStamper); ok {
		stamp, ok, err := st.TraceStamp(x, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			v.stamp = stamp
		}
	}
	return v
}
