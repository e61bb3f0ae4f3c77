package sqlite

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// tierRecord is a record of root API api starting at start.
func tierRecord(id uint64, api string, start time.Time) *store.Record {
	r := &analysis.TraceResult{API: api, Start: start.UnixNano(), Spans: 3, Radius: 1 + int(id%3), Hops: 3, Counterfactual: 4,
		RootFailed: id%2 == 0, Window: analysis.WindowOf(start.UnixNano(), time.Hour),
		Events:   []analysis.Event{{Owner: graph.Node{Service: "db", Operation: "q"}, Radius: 1 + int(id%3)}},
		Services: []analysis.ServiceResult{{Service: "db", Requests: 2, OwnedFailures: 1}},
		Nodes:    []analysis.NodeCount{{Node: graph.Node{Service: "db", Operation: "q"}, Requests: 2, Owned: 1}},
	}
	binary.BigEndian.PutUint64(r.TraceID[8:], id)
	return &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: api, Seq: 1, Result: r, Facts: []byte{0}}
}

// direct is Report without the tier cache: every range read.
func direct(t *testing.T, s *Store, q store.Query) string {
	t.Helper()
	lo, hi := q.MinuteRange()
	rep := analysis.NewReport()
	for _, r := range ranges(lo, hi) {
		part, err := s.reportRange(context.Background(), r, q.API)
		if err != nil {
			t.Fatal(err)
		}
		rep.Merge(part, r.sign)
	}
	rep.Prune()
	b, _ := json.Marshal(rep.Document(nil, analysis.Config{Window: time.Hour}))
	return string(b)
}

func cached(t *testing.T, s *Store, q store.Query) string {
	t.Helper()
	rep, err := s.Report(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep.Document(nil, analysis.Config{Window: time.Hour}))
	return string(b)
}

// TestTierCache: reports from kept ranges equal reports read whole; a
// write drops the ranges of its minutes only, another process's write
// every range (within a poll interval).
func TestTierCache(t *testing.T) {
	dir := t.TempDir()
	x := context.Background()
	s, err := Open(x, Options{Dir: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var batch []store.Change
	id := uint64(0)
	for m := 0; m < 3*24*60; m += 7 { // three days, a trace every 7 minutes, two APIs
		id++
		batch = append(batch, store.Change{New: tierRecord(id, []string{"a GET /", "b GET /"}[id%2], day.Add(time.Duration(m)*time.Minute))})
	}
	if err := s.Apply(x, store.Batch{Changes: batch}); err != nil {
		t.Fatal(err)
	}
	end := day.Add(2*24*time.Hour + 13*time.Hour + 27*time.Minute) // 13:27 on the third day
	queries := []store.Query{
		{From: day.Add(5 * time.Hour).UnixNano(), To: end.UnixNano()},
		{From: end.Add(-time.Hour).UnixNano(), To: end.UnixNano()},
		{From: day.Add(90 * time.Minute).UnixNano(), To: end.UnixNano(), API: "a GET /"},
		{},
	}
	check := func(when string) {
		t.Helper()
		for _, q := range queries {
			if got, want := cached(t, s, q), direct(t, s, q); got != want {
				t.Fatalf("%s, query %+v:\n cached %s\n direct %s", when, q, got, want)
			}
		}
		// A series in steps no tier tiles, each step against a report of
		// its minutes read whole.
		const step = 97 // minutes
		q := store.Query{From: day.Add(3*time.Hour + 7*time.Minute).UnixNano(), To: end.UnixNano(), API: "a GET /"}
		got, err := s.APISeries(x, q, step)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for from := q.From; from < q.To; from += step * int64(time.Minute) {
			want := direct(t, s, store.Query{From: from, To: min(from+step*int64(time.Minute), q.To), API: q.API})
			var g *analysis.APIAgg
			if i < len(got) {
				g = got[i]
			}
			rep := analysis.NewReport()
			if g != nil {
				*rep.API(q.API) = *g
				rep.API(q.API).Owners = map[graph.Node]*analysis.OwnerAgg{}
			}
			gotDoc := seriesFigures(rep, q.API)
			var wrep analysis.Document
			json.Unmarshal([]byte(want), &wrep)
			wantDoc := "null"
			for _, a := range wrep.APIs {
				if a.API == q.API {
					wantDoc = fmt.Sprint(a.Traces, a.FailedTraces, a.MaxRadius, a.RadiusHistogram, a.MaxAmplification, a.SuppressedRetries, a.Requests)
				}
			}
			if gotDoc != wantDoc {
				t.Fatalf("%s, series step %d: %s, want %s", when, i, gotDoc, wantDoc)
			}
			i++
		}
	}
	check("first reads")
	reads := s.tiers.Reads.Load()
	check("again")
	if n := s.tiers.Reads.Load() - reads; n != 0 {
		t.Fatalf("asked again, %d ranges read from the database: want all kept", n)
	}
	// A write in the open minute: only the ranges holding it are read
	// again, and the reports hold it.
	id++
	if err := s.Apply(x, store.Batch{Changes: []store.Change{{New: tierRecord(id, "a GET /", end.Add(-30*time.Second))}}}); err != nil {
		t.Fatal(err)
	}
	reads = s.tiers.Reads.Load()
	check("after a write in the open minute")
	if n := s.tiers.Reads.Load() - reads; n == 0 || n > 12 {
		t.Fatalf("after a write in the open minute, %d ranges read again: want the few holding it", n)
	}
	// A late write into the first day: its ranges are dropped too.
	id++
	if err := s.Apply(x, store.Batch{Changes: []store.Change{{New: tierRecord(id, "b GET /", day.Add(8*time.Hour+3*time.Minute))}}}); err != nil {
		t.Fatal(err)
	}
	check("after a late write")
	// Another process's write (another handle over the same files): seen
	// within a poll interval.
	other, err := Open(x, Options{Dir: dir, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id++
	if err := other.Apply(x, store.Batch{Changes: []store.Change{{New: tierRecord(id, "c GET /", day.Add(30*time.Hour))}}}); err != nil {
		t.Fatal(err)
	}
	other.Close()
	time.Sleep(2 * 250 * time.Millisecond)
	check("after another process's write")

	// Writes and reads at once: every report is one of the states the
	// writes pass through, and the last ones equal a read of everything.
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				for _, q := range queries {
					if _, err := s.Report(x, q); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 30; i++ {
		id++
		at := day.Add(time.Duration(id*37%(3*24*60)) * time.Minute)
		if err := s.Apply(x, store.Batch{Changes: []store.Change{{New: tierRecord(id, "a GET /", at)}}}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	check("after concurrent writes and reads")
}

// seriesFigures is the figures of api in rep a series point shows.
func seriesFigures(rep *analysis.Report, api string) string {
	rep.Prune()
	d := rep.Document(nil, analysis.Config{Window: time.Hour})
	for _, a := range d.APIs {
		if a.API == api {
			return fmt.Sprint(a.Traces, a.FailedTraces, a.MaxRadius, a.RadiusHistogram, a.MaxAmplification, a.SuppressedRetries, a.Requests)
		}
	}
	return "null"
}
