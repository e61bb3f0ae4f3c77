package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// Optional declares which of the optional interfaces a store implements:
// store.IncidentReader, store.SeriesReader, store.Compactor,
// store.Partitioned. Run checks
// the declaration against the store both ways (a store that loses or
// gains one fails), runs the tests of those it implements and skips the
// others by name, so that a store's test output says what it was not
// checked for.
type Optional struct {
	IncidentReader, SeriesReader, Compactor, Partitioned bool
}

func testOptional(t *testing.T, open Opener, opt Optional) {
	t.Run("Declared", func(t *testing.T) {
		s := open(t, true)
		defer s.Close()
		_, ir := s.(store.IncidentReader)
		_, sr := s.(store.SeriesReader)
		_, c := s.(store.Compactor)
		_, p := s.(store.Partitioned)
		if got := (Optional{ir, sr, c, p}); got != opt {
			t.Fatalf("%T implements %+v, its test declares %+v", s, got, opt)
		}
	})
	skip := func(t *testing.T, has bool, name string) {
		t.Helper()
		if !has {
			t.Skipf("the store does not implement store.%s (declared): nothing checked", name)
		}
	}
	t.Run("HotMinutes", func(t *testing.T) { skip(t, opt.IncidentReader, "IncidentReader"); testHotMinutes(t, open) })
	t.Run("LastMinute", func(t *testing.T) { skip(t, opt.IncidentReader, "IncidentReader"); testLastMinute(t, open) })
	t.Run("Examples", func(t *testing.T) { skip(t, opt.IncidentReader, "IncidentReader"); testExamples(t, open) })
	t.Run("APISeries", func(t *testing.T) { skip(t, opt.SeriesReader, "SeriesReader"); testAPISeries(t, open) })
	t.Run("Compact", func(t *testing.T) { skip(t, opt.Compactor, "Compactor"); testCompact(t, open) })
	t.Run("Partitions", func(t *testing.T) { skip(t, opt.Partitioned, "Partitioned"); testPartitions(t, open) })
}

// The optional readers' data: the corpus (realistic traces across a day
// boundary, applied in batches, a third replaced and a seventh deleted)
// and hand-made traces whose counts, minutes and example radii put the
// thresholds, range ends and example order on known values.
var (
	// handT is the first minute of the hand-made traces, an hour before
	// the corpus, on the corpus's first day.
	handT = time.Date(2026, 3, 1, 21, 0, 0, 0, time.UTC)
	// corpusStart: 400 traces every 15 s, 22:50 on the 1st to 00:29:45
	// on the 2nd.
	corpusStart = time.Date(2026, 3, 1, 22, 50, 0, 0, time.UTC)
	nodeX       = graph.Node{Service: "hand-x", Operation: "op"}
	nodeY       = graph.Node{Service: "hand-y", Operation: "op"}
)

const handAPI = "hand GET /x"

// handID is the id of hand-made trace n.
func handID(n byte) graph.TraceID { return graph.TraceID{0xaa, n} }

// handMinute returns minute k after handT (unix minutes).
func handMinute(k int64) int64 { return analysis.MinuteOf(handT.UnixNano()) + k }

// at returns handT + d in unix nanoseconds.
func at(d time.Duration) int64 { return handT.Add(d).UnixNano() }

// handRecord is a hand-made trace of handAPI: its node counts and failure
// events (owner, radius).
func handRecord(s store.Store, n byte, start time.Duration, nodes []analysis.NodeCount, events ...analysis.Event) *store.Record {
	var asm graph.Assembler
	facts := asm.Assemble([]graph.Span{{TraceID: handID(n), SpanID: graph.SpanID{1}, Kind: graph.KindServer, Service: "hand", Operation: "GET /x"}}).AppendBinary(nil)
	r := &analysis.TraceResult{TraceID: handID(n), API: handAPI, Start: at(start), Spans: 3, Hops: 3, Counterfactual: 4,
		Nodes: nodes, Events: events, Services: []analysis.ServiceResult{{Service: "hand", Requests: 1}}}
	for _, e := range events {
		r.Radius = max(r.Radius, e.Radius)
	}
	r.Window = analysis.WindowOf(r.Start, s.Window())
	return &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, API: r.API, Seq: 1, Result: r, Facts: facts}
}

func nc(n graph.Node, requests, owned int64) analysis.NodeCount {
	return analysis.NodeCount{Node: n, Requests: requests, Owned: owned}
}

func ev(owner graph.Node, radius int) analysis.Event {
	return analysis.Event{Owner: owner, Radius: radius}
}

// optionalStore is a store holding the optional readers' data.
type optionalStore struct {
	s       store.Store
	corpus  *Corpus
	current map[graph.TraceID]*analysis.TraceResult
	stored  map[graph.TraceID]*store.Record
}

// apply applies changes to the store and to the reference.
func (o *optionalStore) apply(t *testing.T, changes []store.Change) {
	t.Helper()
	if err := o.s.Apply(ctx(t), store.Batch{Changes: changes}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch.New == nil {
			delete(o.current, ch.ID())
			delete(o.stored, ch.ID())
		} else {
			o.current[ch.ID()] = ch.New.Result
			o.stored[ch.ID()] = ch.New
		}
	}
}

// fillOptional stores the hand-made traces and the corpus, in batches
// (several inserts per minute and day), then replaces and deletes some.
//
// The hand-made traces, minute by minute after handT (X, Y: nodeX, nodeY;
// requests/owned; example radii of the owners' events):
//
//	0  h1 X 5/1 Y 4/0 (X 1)    h2 X 3/1 (X 3)           X 8/2   Y 4/0
//	1  h3 X 10/3 (X 3) at :00  h4 X 10/3 (X 2, X 4) :59.999
//	   h5 X 20/4 (X 2, Y 7)                             X 40/10
//	2  h6 X 1/0                                          X 1/0
//	3  h7 X 3/3 (X 9), deleted                           nothing
//	4  h9 X 2/0 (X 5), replaced by X 2/0 without events  X 2/0
//	5  h8 Y 2/1 (Y 2)                                    Y 2/1
//	6  h10 X 1/1 (X 3), id below h2's and h3's           X 1/1
func fillOptional(t *testing.T, s store.Store) *optionalStore {
	t.Helper()
	o := &optionalStore{s: s, corpus: NewCorpus(t, 400, corpusStart, 15*time.Second),
		current: map[graph.TraceID]*analysis.TraceResult{}, stored: map[graph.TraceID]*store.Record{}}
	sec, mn := time.Second, time.Minute
	h := []*store.Record{
		handRecord(s, 0x11, 10*sec, []analysis.NodeCount{nc(nodeX, 5, 1), nc(nodeY, 4, 0)}, ev(nodeX, 1)),
		handRecord(s, 0x02, 50*sec, []analysis.NodeCount{nc(nodeX, 3, 1)}, ev(nodeX, 3)),
		handRecord(s, 0x03, mn, []analysis.NodeCount{nc(nodeX, 10, 3)}, ev(nodeX, 3)),
		handRecord(s, 0x04, 2*mn-time.Millisecond, []analysis.NodeCount{nc(nodeX, 10, 3)}, ev(nodeX, 2), ev(nodeX, 4)),
		handRecord(s, 0x05, mn+30*sec, []analysis.NodeCount{nc(nodeX, 20, 4)}, ev(nodeX, 2), ev(nodeY, 7)),
		handRecord(s, 0x06, 2*mn, []analysis.NodeCount{nc(nodeX, 1, 0)}),
		handRecord(s, 0x07, 3*mn+20*sec, []analysis.NodeCount{nc(nodeX, 3, 3)}, ev(nodeX, 9)),
		handRecord(s, 0x08, 5*mn, []analysis.NodeCount{nc(nodeY, 2, 1)}, ev(nodeY, 2)),
		handRecord(s, 0x09, 4*mn, []analysis.NodeCount{nc(nodeX, 2, 0)}, ev(nodeX, 5)),
		handRecord(s, 0x01, 6*mn, []analysis.NodeCount{nc(nodeX, 1, 1)}, ev(nodeX, 3)),
	}
	// Two batches: the minutes' rows come from two inserts.
	var first, second []store.Change
	for i, r := range h {
		if i%2 == 0 {
			first = append(first, store.Change{New: r})
		} else {
			second = append(second, store.Change{New: r})
		}
	}
	o.apply(t, first)
	o.apply(t, second)
	c := o.corpus
	for lo := 0; lo < len(c.Traces); lo += 50 {
		var changes []store.Change
		for i := lo; i < min(lo+50, len(c.Traces)); i++ {
			changes = append(changes, store.Change{New: c.Record(i, 1)})
		}
		o.apply(t, changes)
	}
	eval := analysis.NewEvaluator(analysis.Config{})
	var changes []store.Change
	for i, tr := range c.Traces {
		switch {
		case i%7 == 0:
			changes = append(changes, store.Change{Old: o.stored[tr.ID]})
		case i%3 == 0:
			r := eval.Evaluate(tr, analysis.NewState())
			changes = append(changes, store.Change{Old: o.stored[tr.ID], New: store.NewRecord(tr, &r, 2)})
		}
	}
	// h7 deleted; h9 replaced by a version without failure events.
	h9 := handRecord(s, 0x09, 4*mn, []analysis.NodeCount{nc(nodeX, 2, 0)})
	changes = append(changes, store.Change{Old: h[6]}, store.Change{Old: h[8], New: h9})
	o.apply(t, changes)
	return o
}

// refHot is the reference of HotMinutes: each node's counts summed per
// minute over the current results q selects, kept where the node's
// requests are positive and its owned failures reach both minOwned and
// minRate of its requests.
func refHot(current map[graph.TraceID]*analysis.TraceResult, q store.Query, minOwned int64, minRate float64) map[int64]map[graph.Node]analysis.NodeAgg {
	sum := map[int64]map[graph.Node]analysis.NodeAgg{}
	for _, r := range current {
		if !q.Contains(r.Start) {
			continue
		}
		m := analysis.MinuteOf(r.Start)
		for _, n := range r.Nodes {
			if sum[m] == nil {
				sum[m] = map[graph.Node]analysis.NodeAgg{}
			}
			a := sum[m][n.Node]
			a.Requests += r.W() * n.Requests
			a.Owned += r.W() * n.Owned
			sum[m][n.Node] = a
		}
	}
	out := map[int64]map[graph.Node]analysis.NodeAgg{}
	for m, nodes := range sum {
		for n, a := range nodes {
			if a.Requests > 0 && a.Owned >= minOwned && float64(a.Owned) >= minRate*float64(a.Requests) {
				if out[m] == nil {
					out[m] = map[graph.Node]analysis.NodeAgg{}
				}
				out[m][n] = a
			}
		}
	}
	return out
}

// hotText renders hot minutes in order, one "minute service operation
// requests/owned" per node.
func hotText(h map[int64]map[graph.Node]analysis.NodeAgg) string {
	var lines []string
	for m, nodes := range h {
		for n, a := range nodes {
			lines = append(lines, fmt.Sprintf("%d %s %s %d/%d", m, n.Service, n.Operation, a.Requests, a.Owned))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// handHot renders hand-made hot minutes the way hotText does: entries
// "k X 8/2" are minute handT+k of nodeX (Y: nodeY).
func handHot(entries ...string) string {
	var lines []string
	for _, e := range entries {
		var k, req, owned int64
		var node string
		if _, err := fmt.Sscanf(e, "%d %s %d/%d", &k, &node, &req, &owned); err != nil {
			panic(e)
		}
		n := map[string]graph.Node{"X": nodeX, "Y": nodeY}[node]
		lines = append(lines, fmt.Sprintf("%d %s %s %d/%d", handMinute(k), n.Service, n.Operation, req, owned))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// hotRules are the thresholds every range is read with against the
// reference: none, the documented defaults' neighbourhood, and the
// sqlite store's index bound (10 owned).
var hotRules = []struct {
	owned int64
	rate  float64
}{{0, 0}, {1, 0}, {1, 0.05}, {2, 0.25}, {3, 0.2}, {10, 0.05}, {1, 1}, {1000, 0}}

// corpusQueries are ranges over the corpus: whole, cut at both ends, a
// minute cut on each side, across the day boundary, empty.
func corpusQueries() []store.Query {
	d := func(hh, mm, ss int) int64 { return time.Date(2026, 3, 1, hh, mm, ss, 0, time.UTC).UnixNano() }
	return []store.Query{
		{},
		{From: d(22, 53, 30), To: d(23, 41, 10)},
		{From: d(23, 30, 0), To: d(24, 20, 0)},
		{From: d(23, 59, 0) + 1, To: d(24, 1, 0) + 1},
		{From: d(23, 10, 0), To: d(23, 10, 0)},
		{From: d(12, 0, 0), To: d(20, 0, 0)},
	}
}

func testHotMinutes(t *testing.T, open Opener) {
	s := open(t, true)
	defer s.Close()
	o := fillOptional(t, s)
	ir := s.(store.IncidentReader)
	x := ctx(t)
	read := func(q store.Query, owned int64, rate float64) string {
		t.Helper()
		got, err := ir.HotMinutes(x, q, owned, rate)
		if err != nil {
			t.Fatal(err)
		}
		return hotText(got)
	}
	// By hand: thresholds exactly at a node's counts, and just past them.
	ten := store.Query{From: at(0), To: at(10 * time.Minute)}
	cut := store.Query{From: at(time.Minute) + 1, To: at(5*time.Minute) + 1} // minutes 2 to 5
	for _, c := range []struct {
		q     store.Query
		owned int64
		rate  float64
		want  string
	}{
		{ten, 0, 0, handHot("0 X 8/2", "0 Y 4/0", "1 X 40/10", "2 X 1/0", "4 X 2/0", "5 Y 2/1", "6 X 1/1")},
		{ten, 2, 0.25, handHot("0 X 8/2", "1 X 40/10")},                     // both exactly at the thresholds
		{ten, 3, 0.25, handHot("1 X 40/10")},                                // X at 0 owned one too few
		{ten, 2, 0.25000001, ""},                                            // the rate just past both
		{ten, 10, 0.25, handHot("1 X 40/10")},                               // exactly 10 owned
		{ten, 11, 0, ""},                                                    // one more than any
		{ten, 1, 0.5, handHot("5 Y 2/1", "6 X 1/1")},                        // Y at 5 exactly at the rate
		{ten, 1, 1, handHot("6 X 1/1")},                                     // every request failed
		{cut, 1, 0.5, handHot("5 Y 2/1")},                                   // 5 is in: it starts before To
		{cut, 2, 0.25, ""},                                                  // 1 is out: it starts before From
		{cut, 0, 0, handHot("2 X 1/0", "4 X 2/0", "5 Y 2/1")},               // 3 held only a deleted trace
		{store.Query{From: at(time.Minute), To: at(time.Minute)}, 0, 0, ""}, // empty
		{store.Query{From: at(-time.Hour), To: at(0)}, 0, 0, ""},            // before the data
	} {
		if got := read(c.q, c.owned, c.rate); got != c.want {
			t.Errorf("hand-made, %+v, owned %d rate %v:\n got %s\nwant %s", c.q, c.owned, c.rate, got, c.want)
		}
	}
	// The corpus (and the hand-made traces) against the reference.
	hot := 0
	for i, q := range corpusQueries() {
		for _, r := range hotRules {
			want := refHot(o.current, q, r.owned, r.rate)
			if got, w := read(q, r.owned, r.rate), hotText(want); got != w {
				t.Errorf("%+v, owned %d rate %v:\n got %s\nwant %s", q, r.owned, r.rate, got, w)
			}
			if i == 1 && r.owned >= 1 { // a range of the corpus alone
				hot += len(want)
			}
		}
	}
	if hot == 0 {
		t.Fatal("the corpus has no hot minute: the comparison proves nothing")
	}
}

// owners returns the owners of the current results' failure events,
// sorted.
func (o *optionalStore) owners() []graph.Node {
	set := map[graph.Node]bool{}
	for _, r := range o.current {
		for _, e := range r.Events {
			set[e.Owner] = true
		}
	}
	return slices.SortedFunc(maps.Keys(set), func(a, b graph.Node) int {
		return strings.Compare(a.Service+"\x00"+a.Operation, b.Service+"\x00"+b.Operation)
	})
}

// refLastMinute is the last minute q selects that holds a current result.
func refLastMinute(current map[graph.TraceID]*analysis.TraceResult, q store.Query) (int64, bool) {
	last, ok := int64(0), false
	for _, r := range current {
		if m := analysis.MinuteOf(r.Start); q.Contains(r.Start) && (!ok || m > last) {
			last, ok = m, true
		}
	}
	return last, ok
}

func testLastMinute(t *testing.T, open Opener) {
	s := open(t, true)
	defer s.Close()
	o := fillOptional(t, s)
	ir := s.(store.IncidentReader)
	x := ctx(t)
	const none = -1 << 63
	for _, c := range []struct {
		q    store.Query
		want int64
	}{
		{store.Query{From: at(0), To: at(10 * time.Minute)}, handMinute(6)},
		{store.Query{From: at(0), To: at(6 * time.Minute)}, handMinute(5)},                                                                     // 6 starts at To: out
		{store.Query{From: at(0), To: at(4 * time.Minute)}, handMinute(2)},                                                                     // 3 held a deleted trace only
		{store.Query{From: at(0), To: at(4*time.Minute) + 1}, handMinute(4)},                                                                   // 4 starts before To: in
		{store.Query{From: at(0), To: at(90 * time.Minute)}, handMinute(6)},                                                                    // ends in an hour without traces in range
		{store.Query{From: at(7 * time.Minute), To: corpusStart.UnixNano()}, none},                                                             // nothing in two hours
		{store.Query{From: at(6*time.Minute) + 1, To: at(7 * time.Minute)}, none},                                                              // 6 starts before From: out
		{store.Query{From: at(time.Minute), To: at(time.Minute)}, none},                                                                        // empty
		{store.Query{From: at(-24 * time.Hour), To: at(0)}, none},                                                                              // before the data
		{store.Query{From: at(-24 * time.Hour), To: at(0) + 1}, handMinute(0)},                                                                 // its first minute
		{store.Query{From: corpusStart.Add(-time.Hour).UnixNano(), To: corpusStart.UnixNano() + 1}, analysis.MinuteOf(corpusStart.UnixNano())}, // the corpus's first minute, cut
	} {
		m, ok, err := ir.LastMinute(x, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if want := c.want != none; ok != want || (ok && m != c.want) {
			t.Errorf("%+v: %d %v, want %d %v", c.q, m, ok, c.want, want)
		}
	}
	for _, q := range corpusQueries() {
		want, wok := refLastMinute(o.current, q)
		m, ok, err := ir.LastMinute(x, q)
		if err != nil {
			t.Fatal(err)
		}
		if ok != wok || m != want {
			t.Errorf("%+v: %d %v, want %d %v", q, m, ok, want, wok)
		}
	}
	// The corpus's last traces may be deleted ones: the reference knows.
	if m, ok := refLastMinute(o.current, store.Query{}); !ok || m <= analysis.MinuteOf(corpusStart.UnixNano()) {
		t.Fatalf("reference last minute %d %v", m, ok)
	}
}

// refExamples is the reference of Examples: the current results q
// selects in which owner had a failure event, by the largest radius of
// its events there (widest first), then by trace id, the first n.
func refExamples(current map[graph.TraceID]*analysis.TraceResult, q store.Query, owner graph.Node, n int) []graph.TraceID {
	type cand struct {
		id  graph.TraceID
		rad int
	}
	var cs []cand
	for id, r := range current {
		if !q.Contains(r.Start) {
			continue
		}
		rad, ok := -1, false
		for _, e := range r.Events {
			if e.Owner == owner {
				rad, ok = max(rad, e.Radius), true
			}
		}
		if ok {
			cs = append(cs, cand{id, rad})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.rad != b.rad {
			return b.rad - a.rad
		}
		return bytes.Compare(a.id[:], b.id[:])
	})
	out := []graph.TraceID{}
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.id)
	}
	return out
}

func idsText(ids []graph.TraceID) string {
	var s []string
	for _, id := range ids {
		s = append(s, id.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

func testExamples(t *testing.T, open Opener) {
	s := open(t, true)
	defer s.Close()
	o := fillOptional(t, s)
	ir := s.(store.IncidentReader)
	x := ctx(t)
	read := func(q store.Query, owner graph.Node, n int) string {
		t.Helper()
		got, err := ir.Examples(x, q, owner, n)
		if err != nil {
			t.Fatal(err)
		}
		return idsText(got)
	}
	hand := func(ns ...byte) string {
		ids := []graph.TraceID{}
		for _, n := range ns {
			ids = append(ids, handID(n))
		}
		return idsText(ids)
	}
	ten := store.Query{From: at(0), To: at(10 * time.Minute)}
	// X's candidates: h4 (radius 4, the larger of its two events), h10,
	// h2, h3 (3, by id), h5 (2), h1 (1); h7 (9) deleted, h9 (5) replaced
	// by a version without events.
	for _, c := range []struct {
		q     store.Query
		owner graph.Node
		n     int
		want  string
	}{
		{ten, nodeX, analysis.MaxExamples, hand(0x04, 0x01, 0x02, 0x03, 0x05)},
		{ten, nodeX, 2, hand(0x04, 0x01)},
		{ten, nodeX, 1, hand(0x04)},
		{ten, nodeX, 0, hand()},
		{ten, nodeX, analysis.MaxExamples + 3, hand(0x04, 0x01, 0x02, 0x03, 0x05)}, // no more than MaxExamples
		{ten, nodeY, analysis.MaxExamples, hand(0x05, 0x08)},                       // h1 has a Y node, no Y event
		{ten, graph.Node{Service: "hand-x", Operation: "other"}, 5, hand()},
		{store.Query{From: at(time.Minute), To: at(6 * time.Minute)}, nodeX, 5, hand(0x04, 0x03, 0x05)},
		{store.Query{From: at(time.Minute) + 1, To: at(6 * time.Minute)}, nodeX, 5, hand()},       // 1 starts before From
		{store.Query{From: at(time.Minute) + 1, To: at(6*time.Minute) + 1}, nodeX, 5, hand(0x01)}, // 6 starts before To
		{store.Query{From: at(time.Minute), To: at(time.Minute)}, nodeX, 5, hand()},               // empty
	} {
		if got := read(c.q, c.owner, c.n); got != c.want {
			t.Errorf("%+v, %v, %d:\n got %s\nwant %s", c.q, c.owner, c.n, got, c.want)
		}
	}
	// The corpus's owners against the reference.
	full := 0
	for _, q := range corpusQueries() {
		for _, owner := range o.owners() {
			for _, n := range []int{3, analysis.MaxExamples} {
				want := refExamples(o.current, q, owner, n)
				if got, w := read(q, owner, n), idsText(want); got != w {
					t.Errorf("%+v, %v, %d:\n got %s\nwant %s", q, owner, n, got, w)
				}
				if len(want) == n {
					full++
				}
			}
		}
	}
	if full == 0 {
		t.Fatal("no owner had enough examples to cut: the limit was not checked")
	}
}

// refSeries is the reference of APISeries: the figures of q.API's current
// results per step of step minutes from q's first minute (nil where none).
func refSeries(current map[graph.TraceID]*analysis.TraceResult, q store.Query, step int64) []*analysis.APIAgg {
	lo, hi := q.MinuteRange()
	reps := make([]*analysis.Report, (hi-lo+step-1)/step)
	for _, r := range current {
		m := analysis.MinuteOf(r.Start)
		if r.API != q.API || m < lo || m >= hi {
			continue
		}
		i := (m - lo) / step
		if reps[i] == nil {
			reps[i] = analysis.NewReport()
		}
		reps[i].Add(r, 1)
	}
	out := make([]*analysis.APIAgg, len(reps))
	for i, rep := range reps {
		if rep != nil {
			out[i] = rep.APIs[q.API]
		}
	}
	return out
}

// seriesText renders what a series holds of each step (not the owners).
func seriesText(t *testing.T, aggs []*analysis.APIAgg) string {
	t.Helper()
	var lines []string
	for i, a := range aggs {
		if a == nil {
			lines = append(lines, fmt.Sprintf("%d none", i))
			continue
		}
		radius := maps.Clone(a.Radius)
		maps.DeleteFunc(radius, func(_ int, n int64) bool { return n == 0 })
		amp := maps.Clone(a.Amplification)
		maps.DeleteFunc(amp, func(_ float64, n int64) bool { return n == 0 })
		b, err := json.Marshal([]any{a.Traces, a.Failed, a.RootErrors, a.RemoteParent, a.RadiusSum, a.Suppressed, a.Hops,
			a.Counterfactual, a.Misattributed, a.Naive, a.Eligible, a.Fragments, a.Events, radius, fmt.Sprint(amp)})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%d %s", i, b))
	}
	return strings.Join(lines, "\n")
}

// seriesCase is one series read: a range and a step in minutes.
type seriesCase struct {
	q    store.Query
	step int64
}

// seriesCases are the series the tests read: steps that divide the range
// and steps that do not, on minute, hour and day boundaries and off them.
func seriesCases(api string) []seriesCase {
	d := func(day, hh, mm, ss int) int64 { return time.Date(2026, 3, day, hh, mm, ss, 0, time.UTC).UnixNano() }
	return []seriesCase{
		{store.Query{From: d(1, 22, 50, 0), To: d(2, 0, 30, 0), API: api}, 1},
		{store.Query{From: d(1, 23, 0, 0), To: d(1, 23, 45, 0), API: api}, 7},        // 45/7: the last step is 3 minutes
		{store.Query{From: d(1, 22, 0, 0), To: d(2, 2, 0, 0), API: api}, 60},         // whole hours
		{store.Query{From: d(1, 0, 0, 0), To: d(3, 0, 0, 0), API: api}, 1440},        // whole days
		{store.Query{From: d(1, 22, 53, 30), To: d(2, 0, 17, 10), API: api}, 13},     // 22:54 to 00:18, cut minutes
		{store.Query{From: d(1, 23, 0, 0), To: d(2, 1, 0, 0), API: api}, 90},         // one step and a part
		{store.Query{From: d(1, 23, 0, 0), To: d(2, 0, 17, 10), API: api}, 60},       // whole hours but the last
		{store.Query{From: d(1, 0, 0, 0), To: d(2, 0, 10, 0), API: api}, 1440},       // a whole day and ten minutes
		{store.Query{From: d(1, 20, 0, 0), To: d(1, 21, 0, 0), API: api}, 10},        // no traces
		{store.Query{From: d(1, 23, 59, 0) + 1, To: d(2, 0, 0, 0) + 1, API: api}, 1}, // one minute: 00:00
	}
}

func testAPISeries(t *testing.T, open Opener) {
	s := open(t, true)
	defer s.Close()
	o := fillOptional(t, s)
	sr := s.(store.SeriesReader)
	x := ctx(t)
	api := o.corpus.Results[0].API
	cases := seriesCases(api)
	cases = append(cases, seriesCase{store.Query{From: at(0), To: at(10 * time.Minute), API: handAPI}, 3},
		seriesCase{store.Query{From: at(0), To: at(10 * time.Minute), API: "nobody"}, 3})
	seen := 0
	for _, c := range cases {
		got, err := sr.APISeries(x, c.q, c.step)
		if err != nil {
			t.Fatal(err)
		}
		want := refSeries(o.current, c.q, c.step)
		if g, w := seriesText(t, got), seriesText(t, want); g != w {
			t.Errorf("%+v step %d:\n got %s\nwant %s", c.q, c.step, g, w)
		}
		for _, a := range want {
			if a != nil {
				seen++
			}
		}
	}
	if seen < 50 {
		t.Fatalf("only %d steps held traces", seen)
	}
	// By hand: handAPI's traces in steps of 3 minutes from handT: h1, h2,
	// h3, h4, h5, h6 (0–2); h9 (3–5, h7 deleted, h8 of API handAPI too);
	// h10 (6–8); none (9).
	got, err := sr.APISeries(x, store.Query{From: at(0), To: at(10 * time.Minute), API: handAPI}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var traces []string
	for _, a := range got {
		if a == nil {
			traces = append(traces, "none")
		} else {
			traces = append(traces, fmt.Sprintf("%d/%d", a.Traces, a.Failed))
		}
	}
	if g := strings.Join(traces, " "); g != "6/5 2/1 1/1 none" {
		t.Errorf("hand-made series (traces/failed per step): %s, want 6/5 2/1 1/1 none", g)
	}
	// A series needs a bounded range holding a minute and a positive step.
	for _, c := range []seriesCase{
		{store.Query{API: api}, 10},
		{store.Query{From: at(0), API: api}, 10},
		{store.Query{From: at(0), To: at(0), API: api}, 10},
		{store.Query{From: at(time.Minute) + 1, To: at(2 * time.Minute), API: api}, 1},
		{store.Query{From: at(0), To: at(10 * time.Minute), API: api}, 0},
		{store.Query{From: at(0), To: at(10 * time.Minute), API: api}, -5},
	} {
		if got, err := sr.APISeries(x, c.q, c.step); err == nil {
			t.Errorf("%+v step %d: %d steps, want an error", c.q, c.step, len(got))
		}
	}
}

// check is every read of the optional readers' data a Compact must
// leave unchanged, each checked against its reference.
func (o *optionalStore) check(t *testing.T, when string) string {
	t.Helper()
	x := ctx(t)
	var all strings.Builder
	compare := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s:\n got %s\nwant %s", when, what, got, want)
		}
		fmt.Fprintf(&all, "%s\n%s\n", what, got)
	}
	qs := corpusQueries()
	qs = append(qs, store.Query{From: at(0), To: at(10 * time.Minute)}, store.Query{API: handAPI},
		store.Query{From: at(0), To: corpusStart.Add(time.Hour).UnixNano(), API: o.corpus.Results[0].API})
	for _, q := range qs {
		rep, err := o.s.Report(x, q)
		if err != nil {
			t.Fatal(err)
		}
		compare(fmt.Sprintf("report %+v", q), docOf(t, rep), docOf(t, reportOf(o.current, q)))
	}
	ir, ok := o.s.(store.IncidentReader)
	if ok {
		owners := o.owners()
		for _, q := range qs {
			for _, r := range hotRules {
				got, err := ir.HotMinutes(x, q, r.owned, r.rate)
				if err != nil {
					t.Fatal(err)
				}
				compare(fmt.Sprintf("hot minutes %+v %d %v", q, r.owned, r.rate), hotText(got), hotText(refHot(o.current, q, r.owned, r.rate)))
			}
			m, ok, err := ir.LastMinute(x, q)
			if err != nil {
				t.Fatal(err)
			}
			wm, wok := refLastMinute(o.current, q)
			compare(fmt.Sprintf("last minute %+v", q), fmt.Sprint(m, ok), fmt.Sprint(wm, wok))
			for _, owner := range owners {
				ids, err := ir.Examples(x, q, owner, analysis.MaxExamples)
				if err != nil {
					t.Fatal(err)
				}
				compare(fmt.Sprintf("examples %+v %v", q, owner), idsText(ids), idsText(refExamples(o.current, q, owner, analysis.MaxExamples)))
			}
		}
	}
	if sr, ok := o.s.(store.SeriesReader); ok {
		for _, c := range seriesCases(o.corpus.Results[0].API) {
			got, err := sr.APISeries(x, c.q, c.step)
			if err != nil {
				t.Fatal(err)
			}
			compare(fmt.Sprintf("series %+v %d", c.q, c.step), seriesText(t, got), seriesText(t, refSeries(o.current, c.q, c.step)))
		}
	}
	return all.String()
}

// testCompact: Compact leaves every read as it was, for the days it
// settles and the others, and after a late change to a settled day.
func testCompact(t *testing.T, open Opener) {
	s := open(t, true)
	defer s.Close()
	o := fillOptional(t, s)
	c := s.(store.Compactor)
	x := ctx(t)
	day2 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	before := o.check(t, "stored")
	// The 1st only (t is in the 2nd), then both.
	for _, cut := range []time.Time{day2.Add(2 * time.Hour), day2.Add(26 * time.Hour)} {
		if err := c.Compact(x, cut.UnixNano()); err != nil {
			t.Fatal(err)
		}
		if after := o.check(t, "compacted before "+cut.Format(time.RFC3339)); after != before {
			t.Fatalf("reads changed by Compact before %s", cut.Format(time.RFC3339))
		}
	}
	// Late changes to both settled days: a hand-made trace and corpus
	// traces deleted, one replaced, one added; read, compacted, read.
	var changes []store.Change
	for i, tr := range o.corpus.Traces {
		if r := o.stored[tr.ID]; r != nil && i%5 == 1 {
			changes = append(changes, store.Change{Old: r})
		}
	}
	changes = append(changes, store.Change{Old: o.stored[handID(0x03)]},
		store.Change{Old: o.stored[handID(0x01)], New: handRecord(s, 0x01, 6*time.Minute, []analysis.NodeCount{nc(nodeX, 4, 4)}, ev(nodeX, 8))},
		store.Change{New: handRecord(s, 0x20, 1*time.Minute+5*time.Second, []analysis.NodeCount{nc(nodeX, 7, 7)}, ev(nodeX, 1))})
	o.apply(t, changes)
	before = o.check(t, "late changes")
	if err := c.Compact(x, day2.Add(26*time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if after := o.check(t, "late changes compacted"); after != before {
		t.Fatal("reads changed by Compact after late changes")
	}
	// Nothing left to settle: a Compact again changes nothing.
	if err := c.Compact(x, day2.Add(26*time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if after := o.check(t, "compacted twice"); after != before {
		t.Fatal("reads changed by a second Compact")
	}
}
