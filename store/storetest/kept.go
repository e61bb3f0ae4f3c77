package storetest

import (
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
	x := ctx(t)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	apis := []string{"a GET /", "b GET /"}
	rec := func(id uint64, api string, at time.Time) *store.Record {
		r := &analysis.TraceResult{API: api, Start: at.UnixNano(), Spans: 3, Radius: 1 + int(id%3), Hops: 3, Counterfactual: 4,
			RootFailed: id%2 == 0, Window: analysis.WindowOf(at.UnixNano(), w.Window()),
			Events:   []analysis.Event{{Owner: graph.Node{Service: "db", Operation: "q"}, Radius: 1 + int(id%3)}},
			Services: []analysis.ServiceResult{{Service: "db", Requests: 2, OwnedFailures: 1}},
			Nodes:    []analysis.NodeCount{{Node: graph.Node{Service: "db", Operation: "q"}, Requests: 2, Owned: 1}},
		}
		binary.BigEndian.PutUint64(r.TraceID[8:], id)
		r.TraceID[0] = 0x4b
		return &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: api, Seq: 1, Result: r, Facts: []byte{0}}
	}
	live := map[graph.TraceID]*store.Record{}
	var batch []store.Change
	id := uint64(0)
	for m := 0; m < 3*24*60; m += 7 { // three days, a trace every 7 minutes, two APIs
		id++
		r := rec(id, apis[id%2], day.Add(time.Duration(m)*time.Minute))
		live[r.TraceID] = r
		batch = append(batch, store.Change{New: r})
	}
	// In two batches: a store may mark the minutes of its last batch
	// as being written until the next (ClickHouse).
	for _, b := range [][]store.Change{batch[:len(batch)-1], batch[len(batch)-1:]} {
		if err := w.Apply(x, store.Batch{Changes: b}); err != nil {
			t.Fatal(err)
		}
	}
	end := day.Add(2*24*time.Hour + 13*time.Hour + 27*time.Minute) // 13:27 on the third day
	queries := []store.Query{
		{From: day.Add(5 * time.Hour).UnixNano(), To: end.UnixNano()},                 // days, hours, minutes
		{From: end.Add(-time.Hour).UnixNano(), To: end.UnixNano()},                    // the last hour
		{From: day.Add(5 * time.Hour).UnixNano(), To: end.UnixNano(), API: apis[1]},   // one API
		{From: end.Add(-24 * time.Hour).UnixNano(), To: end.UnixNano(), API: apis[0]}, // a day of one
	}
	// count is the traces of q's range, by hand.
	count := func(q store.Query) (n int64) {
		for _, r := range live {
			if r.Start >= q.From && r.Start < q.To && (q.API == "" || r.API == q.API) {
				n++
			}
		}
		return n
	}
	doc := func(rep *analysis.Report) string {
		b, _ := json.Marshal(rep.Document(nil, analysis.Config{Window: w.Window()}))
		return string(b)
	}
	// check compares s's answers with the records and with fresh's.
	check := func(s, fresh store.Store) error {
		for _, q := range queries {
			rep, err := s.Report(x, q)
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
			if want := count(q); got != want {
				return fmt.Errorf("%v: %d traces, want %d", q, got, want)
			}
			if fresh != nil {
				ref, err := fresh.Report(x, q)
				if err != nil {
					return err
				}
				if a, b := doc(rep), doc(ref); a != b {
					return fmt.Errorf("%v: report\n%s\nwant a fresh handle's\n%s", q, a, b)
				}
			}
			if ir, ok := s.(store.IncidentReader); ok && q.API == "" {
				m, found, err := ir.LastMinute(x, q)
				if err != nil {
					return err
				}
				want, wantFound := int64(0), false
				for _, r := range live {
					if r.Start >= q.From && r.Start < q.To {
						want, wantFound = max(want, r.Minute()), true
					}
				}
				if m != want || found != wantFound {
					return fmt.Errorf("%v: last minute %d (%v), want %d (%v)", q, m, found, want, wantFound)
				}
			}
			if sr, ok := s.(store.SeriesReader); ok && q.API != "" {
				steps, err := sr.APISeries(x, q, 60)
				if err != nil {
					return err
				}
				var n int64
				for _, a := range steps {
					if a != nil {
						n += a.Traces
					}
				}
				if want := count(q); n != want {
					return fmt.Errorf("%v: series of %d traces, want %d", q, n, want)
				}
			}
		}
		return nil
	}
	r := open(t, false)
	defer r.Close()
	for _, s := range []store.Store{w, r} {
		if err := check(s, nil); err != nil { // and kept
			t.Fatal(err)
		}
	}
	writes := []struct {
		what    string
		changes func() []store.Change
	}{
		{"a record in a closed day", func() []store.Change {
			return []store.Change{{New: rec(100001, apis[1], day.Add(24*time.Hour+3*time.Hour+2*time.Minute))}}
		}},
		{"a record in the open minute", func() []store.Change {
			return []store.Change{{New: rec(100002, apis[0], end.Add(-time.Minute))}}
		}},
		{"the last record deleted", func() []store.Change {
			var last *store.Record
			for _, r := range live {
				if r.Start < end.UnixNano() && (last == nil || r.Start > last.Start) {
					last = r
				}
			}
			return []store.Change{{Old: last}}
		}},
		{"a record deleted", func() []store.Change {
			for _, old := range live {
				if old.Start > day.Add(30*time.Hour).UnixNano() && old.Start < end.Add(-2*time.Hour).UnixNano() {
					return []store.Change{{Old: old}}
				}
			}
			t.Fatal("no record to delete")
			return nil
		}},
	}
	for _, wr := range writes {
		changes := wr.changes()
		if err := w.Apply(x, store.Batch{Changes: changes}); err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.New != nil {
				live[c.New.TraceID] = c.New
			} else {
				delete(live, c.Old.TraceID)
			}
		}
		fresh := open(t, false)
		if err := check(w, fresh); err != nil {
			t.Fatalf("after %s, the writer's own reads: %v", wr.what, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := check(r, fresh)
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
