package storetest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// testKept: what a store keeps in memory of its reads (tiers, series,
// summaries) never outlives a write. The writer's own reads see its
// writes at once; another handle's (another process's) within a few poll
// intervals, whether the write touched a closed day, the open minute or
// deleted a record. The traces counted are the records in each range,
// counted here; the whole reports equal a fresh handle's.
func testKept(t *testing.T, open Opener) {
	w := open(t, true)
	defer w.Close()
	k := newKept(t, w)
	r := open(t, false)
	defer r.Close()
	for _, s := range []store.Store{w, r} {
		if err := k.check(s, nil); err != nil { // and kept
			t.Fatal(err)
		}
	}
	for _, wr := range k.writes(t) {
		changes := wr.changes()
		k.apply(t, changes)
		fresh := open(t, false)
		if err := k.check(w, fresh); err != nil {
			t.Fatalf("after %s, the writer's own reads: %v", wr.what, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := k.check(r, fresh)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s, another handle's reads 10 s later: %v", wr.what, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		fresh.Close()
	}
}

// kept is testKept's data: the records written, the queries asked, and
// the store they were written to.
type kept struct {
	x       context.Context
	w       store.Store
	day     time.Time // the first of the records' three days
	end     time.Time // the queries' end: 13:27 on the third day
	apis    []string
	live    map[graph.TraceID]*store.Record // the records the store holds
	queries []store.Query
}

// newKept writes three days of records to w, a trace every 7 minutes,
// of two APIs.
func newKept(t *testing.T, w store.Store) *kept {
	t.Helper()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	end := day.Add(2*24*time.Hour + 13*time.Hour + 27*time.Minute)
	apis := []string{"a GET /", "b GET /"}
	k := &kept{x: ctx(t), w: w, day: day, end: end, apis: apis, live: map[graph.TraceID]*store.Record{},
		queries: []store.Query{
			{From: day.Add(5 * time.Hour).UnixNano(), To: end.UnixNano()},                 // days, hours, minutes
			{From: end.Add(-time.Hour).UnixNano(), To: end.UnixNano()},                    // the last hour
			{From: day.Add(5 * time.Hour).UnixNano(), To: end.UnixNano(), API: apis[1]},   // one API
			{From: end.Add(-24 * time.Hour).UnixNano(), To: end.UnixNano(), API: apis[0]}, // a day of one
		}}
	var batch []store.Change
	id := uint64(0)
	for m := 0; m < 3*24*60; m += 7 {
		id++
		r := k.record(id, apis[id%2], day.Add(time.Duration(m)*time.Minute))
		k.live[r.TraceID] = r
		batch = append(batch, store.Change{New: r})
	}
	// In two batches: a store may mark the minutes of its last batch
	// as being written until the next (ClickHouse).
	for _, b := range [][]store.Change{batch[:len(batch)-1], batch[len(batch)-1:]} {
		if err := w.Apply(k.x, store.Batch{Changes: b}); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// record returns trace id's record, of api, started at.
func (k *kept) record(id uint64, api string, at time.Time) *store.Record {
	r := &analysis.TraceResult{API: api, Start: at.UnixNano(), Spans: 3, Radius: 1 + int(id%3), Hops: 3, Counterfactual: 4,
		RootFailed: id%2 == 0, Window: analysis.WindowOf(at.UnixNano(), k.w.Window()),
		Events:   []analysis.Event{{Owner: graph.Node{Service: "db", Operation: "q"}, Radius: 1 + int(id%3)}},
		Services: []analysis.ServiceResult{{Service: "db", Requests: 2, OwnedFailures: 1}},
		Nodes:    []analysis.NodeCount{{Node: graph.Node{Service: "db", Operation: "q"}, Requests: 2, Owned: 1}},
	}
	binary.BigEndian.PutUint64(r.TraceID[8:], id)
	r.TraceID[0] = 0x4b
	return &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: api, Seq: 1, Result: r, Facts: []byte{0}}
}

// A keptWrite is one of the writes whose effect testKept checks: what it
// is and its changes, chosen among the records live at the time.
type keptWrite struct {
	what    string
	changes func() []store.Change
}

// writes returns the writes testKept makes, one after the other.
func (k *kept) writes(t *testing.T) []keptWrite {
	return []keptWrite{
		{"a record in a closed day", func() []store.Change {
			return []store.Change{{New: k.record(100001, k.apis[1], k.day.Add(24*time.Hour+3*time.Hour+2*time.Minute))}}
		}},
		{"a record in the open minute", func() []store.Change {
			return []store.Change{{New: k.record(100002, k.apis[0], k.end.Add(-time.Minute))}}
		}},
		{"the last record deleted", func() []store.Change {
			var last *store.Record
			for _, r := range k.live {
				if r.Start < k.end.UnixNano() && (last == nil || r.Start > last.Start) {
					last = r
				}
			}
			return []store.Change{{Old: last}}
		}},
		{"a record deleted", func() []store.Change {
			for _, old := range k.live {
				if old.Start > k.day.Add(30*time.Hour).UnixNano() && old.Start < k.end.Add(-2*time.Hour).UnixNano() {
					return []store.Change{{Old: old}}
				}
			}
			t.Fatal("no record to delete")
			return nil
		}},
	}
}

// apply applies changes to the store and to the records live.
func (k *kept) apply(t *testing.T, changes []store.Change) {
	t.Helper()
	if err := k.w.Apply(k.x, store.Batch{Changes: changes}); err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.New != nil {
			k.live[c.New.TraceID] = c.New
		} else {
			delete(k.live, c.Old.TraceID)
		}
	}
}

// count is the traces of q's range, by hand.
func (k *kept) count(q store.Query) (n int64) {
	for _, r := range k.live {
		if r.Start >= q.From && r.Start < q.To && (q.API == "" || r.API == q.API) {
			n++
		}
	}
	return n
}

// check compares s's answers to every query with the records and, fresh
// not nil, with fresh's.
func (k *kept) check(s, fresh store.Store) error {
	for _, q := range k.queries {
		if err := k.checkReport(s, fresh, q); err != nil {
			return err
		}
		if ir, ok := s.(store.IncidentReader); ok && q.API == "" {
			if err := k.checkLastMinute(ir, q); err != nil {
				return err
			}
		}
		if sr, ok := s.(store.SeriesReader); ok && q.API != "" {
			if err := k.checkSeries(sr, q); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkReport compares s's report of q with the records' count and,
// fresh not nil, with fresh's whole report.
func (k *kept) checkReport(s, fresh store.Store, q store.Query) error {
	rep, err := s.Report(k.x, q)
	if err != nil {
		return err
	}
	got := rep.Traces
	if q.API != "" {
		got = 0
		if a := rep.APIs[q.API]; a != nil {
			got = a.Traces
		}
	}
	if want := k.count(q); got != want {
		return fmt.Errorf("%v: %d traces, want %d", q, got, want)
	}
	if fresh == nil {
		return nil
	}
	ref, err := fresh.Report(k.x, q)
	if err != nil {
		return err
	}
	if a, b := k.doc(rep), k.doc(ref); a != b {
		return fmt.Errorf("%v: report\n%s\nwant a fresh handle's\n%s", q, a, b)
	}
	return nil
}

// doc is rep's document, as JSON.
func (k *kept) doc(rep *analysis.Report) string {
	b, _ := json.Marshal(rep.Document(nil, analysis.Config{Window: k.w.Window()}))
	return string(b)
}

// checkLastMinute compares ir's last minute of q with the records'.
func (k *kept) checkLastMinute(ir store.IncidentReader, q store.Query) error {
	m, found, err := ir.LastMinute(k.x, q)
	if err != nil {
		return err
	}
	want, wantFound := int64(0), false
	for _, r := range k.live {
		if r.Start >= q.From && r.Start < q.To {
			want, wantFound = max(want, r.Minute()), true
		}
	}
	if m != want || found != wantFound {
		return fmt.Errorf("%v: last minute %d (%v), want %d (%v)", q, m, found, want, wantFound)
	}
	return nil
}

// checkSeries compares the traces of sr's series of q, by minute, with
// the records' count.
func (k *kept) checkSeries(sr store.SeriesReader, q store.Query) error {
	steps, err := sr.APISeries(k.x, q, 60)
	if err != nil {
		return err
	}
	var n int64
	for _, a := range steps {
		if a != nil {
			n += a.Traces
		}
	}
	if want := k.count(q); n != want {
		return fmt.Errorf("%v: series of %d traces, want %d", q, n, want)
	}
	return nil
}
