package pipeline

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store/storetest"
)

// BenchmarkPendingMemory measures what a span costs while it waits for its
// trace to be analysed (target ≤ 300 bytes): spans of a simulated corpus
// arrive in small exports, as the pending buffer receives them.
func BenchmarkPendingMemory(b *testing.B) {
	c := storetest.NewCorpus(b, 3000, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)
	var all []graph.Span
	for _, s := range c.Spans {
		all = append(all, s...)
	}
	// Names as a decoder hands them: shared (interned) strings.
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var p pendingSet
		p.init()
		now := time.Now()
		for rep := 0; rep < 20; rep++ { // 20 copies of the corpus under other trace ids
			for lo := 0; lo < len(all); lo += 7 {
				part := all[lo:min(lo+7, len(all))]
				cp := make([]graph.Span, len(part))
				copy(cp, part)
				for k := range cp {
					cp[k].TraceID[0] = byte(rep)
				}
				p.add(cp, 1, now)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(p.spans), "B/span")
		b.ReportMetric(float64(p.spans), "spans")
		runtime.KeepAlive(&p)
	}
}

// benchPending is the buffer the expiry benchmarks start from: n traces of
// 3 spans each, the i-th arriving at t0 + i·gap as write i+1, so that
// their idle deadlines are spread evenly over the idle time.
func benchPending(n int, gap time.Duration) (*pendingSet, time.Time) {
	var p pendingSet
	p.init()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	spans := make([]graph.Span, 3)
	for i := 0; i < n; i++ {
		p.add(benchSpans(spans, i), uint64(i+1), t0.Add(time.Duration(i)*gap))
	}
	return &p, t0
}

// benchSpans fills spans with spans of the i-th trace of benchPending.
func benchSpans(spans []graph.Span, i int) []graph.Span {
	for k := range spans {
		spans[k] = graph.Span{}
		spans[k].TraceID[0], spans[k].TraceID[1], spans[k].TraceID[2], spans[k].TraceID[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		spans[k].SpanID[0] = byte(k + 1)
	}
	return spans
}

// BenchmarkPendingExpire is one tick of a busy buffer in its steady state:
// 100,000 traces pending, 10 new ones arrive and 10 fall idle per tick
// (idle 5 s, so 10 traces per 500 µs).
func BenchmarkPendingExpire(b *testing.B) {
	const n, perTick = 100_000, 10
	idle := 5 * time.Second
	gap := idle / n
	p, t0 := benchPending(n, gap)
	var out []*pendingTrace
	var reasons []string
	spans := make([]graph.Span, 3)
	expired := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < perTick; k++ {
			j := n + i*perTick + k
			p.add(benchSpans(spans, j), uint64(j+1), t0.Add(time.Duration(j)*gap))
		}
		// The newest trace has just arrived; those n traces older are idle.
		now := t0.Add(time.Duration(n+(i+1)*perTick-1) * gap)
		out, reasons = p.take(now, idle, time.Hour, 1<<30, out[:0], reasons[:0])
		expired += len(out)
	}
	b.ReportMetric(float64(expired)/float64(b.N), "expired/op")
	b.ReportMetric(float64(p.traces()), "pending")
}

// BenchmarkPendingWatermark is the watermark query each analysis batch
// makes, with 100,000 traces pending.
func BenchmarkPendingWatermark(b *testing.B) {
	p, _ := benchPending(100_000, 50*time.Microsecond)
	var w uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w += p.watermark()
	}
	if w != 0 { // the first trace (write 1) is pending: the watermark is 0
		b.Fatalf("watermark %d, want 0", w)
	}
}

// BenchmarkPendingAdd is the cost of queuing a write of 10 spans of traces
// already pending (each moves to the end of the idle order), with 100,000
// traces pending.
func BenchmarkPendingAdd(b *testing.B) {
	const n = 100_000
	p, t0 := benchPending(n, 50*time.Microsecond)
	spans := make([]graph.Span, 10)
	one := make([]graph.Span, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range spans {
			j := (i*7919 + k*104729) % n // spread over the buffer
			spans[k] = benchSpans(one, j)[0]
		}
		p.add(spans, uint64(n+i+1), t0.Add(5*time.Second+time.Duration(i)*time.Microsecond))
		if p.spans > 8*n { // keep the span slices from growing without bound
			b.StopTimer()
			p, t0 = benchPending(n, 50*time.Microsecond)
			b.StartTimer()
		}
	}
}

// spansOf returns one span of each trace named (a trace id of its letter).
func spansOf(names string) []graph.Span {
	spans := make([]graph.Span, len(names))
	for i := range names {
		spans[i].TraceID[0] = names[i]
		spans[i].SpanID[0] = byte(i + 1)
	}
	return spans
}

// namesOf returns the names of traces, in order.
func namesOf(traces []*pendingTrace) string {
	b := make([]byte, len(traces))
	for i, t := range traces {
		b[i] = t.id[0]
	}
	return string(b)
}

// checkPending verifies the buffer's lists: each links every pending trace
// once, both ways, in its order, and the span count is the sum.
func checkPending(t *testing.T, s *pendingSet) {
	t.Helper()
	spans := 0
	for _, tr := range s.byID {
		spans += len(tr.spans)
	}
	if spans != s.spans {
		t.Errorf("spans %d, traces hold %d", s.spans, spans)
	}
	for o := range s.order {
		l := &s.order[o]
		n := 0
		var prev *pendingTrace
		for tr := l.head; tr != nil; prev, tr = tr, tr.link[o].next {
			n++
			if s.byID[tr.id] != tr {
				t.Fatalf("list %d holds trace %q that is not pending", o, tr.id[0])
			}
			if tr.link[o].prev != prev {
				t.Fatalf("list %d: %q's prev is wrong", o, tr.id[0])
			}
			if prev != nil && l.later(prev, tr) {
				t.Errorf("list %d: %q before %q out of order", o, prev.id[0], tr.id[0])
			}
			if n > len(s.byID) {
				t.Fatalf("list %d loops", o)
			}
		}
		if l.tail != prev || n != len(s.byID) {
			t.Errorf("list %d: %d traces (tail ok: %v), %d pending", o, n, l.tail == prev, len(s.byID))
		}
	}
}

// listNames returns the pending traces in order o.
func listNames(s *pendingSet, o int) string {
	var b []byte
	for tr := s.order[o].head; tr != nil; tr = tr.link[o].next {
		b = append(b, tr.id[0])
	}
	return string(b)
}

var pt0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// at returns pt0 plus s seconds.
func at(s float64) time.Time { return pt0.Add(time.Duration(s * float64(time.Second))) }

// TestPendingIdleOrder: idle traces leave in the order of their latest
// span, not their first; a span of a pending trace moves it to the end.
func TestPendingIdleOrder(t *testing.T) {
	var s pendingSet
	s.init()
	s.add(spansOf("AB"), 1, at(0))
	s.add(spansOf("C"), 2, at(1))
	s.add(spansOf("A"), 3, at(2)) // A's latest span: 2 s
	s.add(spansOf("D"), 4, at(3))
	checkPending(t, &s)
	if got := listNames(&s, byLast); got != "BCAD" {
		t.Errorf("by latest arrival %q, want BCAD", got)
	}
	if got := listNames(&s, byFirst); got != "ABCD" {
		t.Errorf("by first arrival %q, want ABCD", got)
	}
	// At 3 s, idle 2 s: B (latest 0 s) and C (1 s) are idle; A (2 s) and D not.
	got, reasons := s.take(at(3), 2*time.Second, time.Hour, 1<<30, nil, nil)
	if namesOf(got) != "BC" || len(reasons) != 2 || reasons[0] != "idle" || reasons[1] != "idle" {
		t.Errorf("took %q %v, want BC idle", namesOf(got), reasons)
	}
	// A (writes 1 and 3) is pending: everything before write 1 is out.
	if w := s.watermark(); w != 0 {
		t.Errorf("watermark %d, want 0", w)
	}
	if s.spans != 3 { // A twice, D
		t.Errorf("%d spans pending, want 3", s.spans)
	}
	checkPending(t, &s)
	// At 4.5 s: A idle (2.5 s), D not (1.5 s).
	if got, _ := s.take(at(4.5), 2*time.Second, time.Hour, 1<<30, nil, nil); namesOf(got) != "A" || len(got[0].spans) != 2 {
		t.Errorf("took %q, want A with its 2 spans", namesOf(got))
	}
	if w := s.watermark(); w != 3 { // D (write 4) is pending
		t.Errorf("watermark %d, want 3", w)
	}
	if got, _ := s.take(at(5), 2*time.Second, time.Hour, 1<<30, nil, nil); namesOf(got) != "D" {
		t.Errorf("took %q, want D", namesOf(got))
	}
	if w := s.watermark(); w != 4 {
		t.Errorf("watermark %d with nothing pending, want 4", w)
	}
	checkPending(t, &s)
}

// TestPendingAgeOrder: traces that never fall idle leave once older than
// the maximum age, by first arrival; past the span budget the oldest by
// first arrival leave early, whatever their latest span.
func TestPendingAgeOrder(t *testing.T) {
	var s pendingSet
	s.init()
	s.add(spansOf("A"), 1, at(0))
	s.add(spansOf("B"), 2, at(1))
	s.add(spansOf("C"), 3, at(2))
	s.add(spansOf("BA"), 4, at(8)) // B and A keep arriving: not idle
	s.add(spansOf("AB"), 5, at(9))
	// At 10 s, idle 5 s, age 10 s: A (first 0 s) is aged, B (1 s) not;
	// C (first and latest 2 s) is idle.
	got, reasons := s.take(at(10), 5*time.Second, 10*time.Second, 1<<30, nil, nil)
	if namesOf(got) != "AC" || reasons[0] != "age" || reasons[1] != "idle" {
		t.Errorf("took %q %v, want A aged, C idle", namesOf(got), reasons)
	}
	if w := s.watermark(); w != 1 { // B: writes 2, 4, 5
		t.Errorf("watermark %d, want 1", w)
	}
	checkPending(t, &s)

	// Early: D (3 spans), E, F (2 spans) arrive in that order, then E
	// again: E has the latest span. Over a budget of 2 spans the oldest by
	// first arrival leave first: D (7 spans pending → 4), then E (4 → 2).
	s = pendingSet{}
	s.init()
	s.add(spansOf("DDD"), 1, at(0))
	s.add(spansOf("E"), 2, at(1))
	s.add(spansOf("FF"), 3, at(2))
	s.add(spansOf("E"), 4, at(3))
	got, reasons = s.take(at(3), time.Hour, time.Hour, 2, nil, nil)
	if namesOf(got) != "DE" || reasons[0] != "early" || reasons[1] != "early" || s.spans != 2 {
		t.Errorf("took %q %v leaving %d spans, want D and E early leaving 2", namesOf(got), reasons, s.spans)
	}
	if w := s.watermark(); w != 2 { // F: write 3
		t.Errorf("watermark %d, want 2", w)
	}
	checkPending(t, &s)
}

// TestPendingRestoredOrder: a trace put back after a refused store batch
// counts as just arrived (it waits a full idle time and its age starts
// again) but keeps its writes, so it holds the watermark down although it
// is last by first arrival; one that arrived again meanwhile is merged
// and keeps its place but gets the earlier writes.
func TestPendingRestoredOrder(t *testing.T) {
	idle, age := 5*time.Second, 60*time.Second
	var s pendingSet
	s.init()
	s.add(spansOf("A"), 1, at(0))
	s.add(spansOf("B"), 2, at(1))
	s.add(spansOf("C"), 3, at(2))
	group, _ := s.take(at(6), idle, age, 1<<30, nil, nil) // A (0 s) and B (1 s) idle
	if namesOf(group) != "AB" {
		t.Fatalf("took %q, want AB", namesOf(group))
	}
	if w := s.watermark(); w != 2 { // C: write 3
		t.Errorf("watermark %d, want 2", w)
	}
	// B arrives again (write 4) while the batch is stored; the batch is
	// refused and put back at 7 s.
	s.add(spansOf("B"), 4, at(6.5))
	s.restore(group, at(7))
	checkPending(t, &s)
	// By first arrival: C (2 s), B (6.5 s: its place), A (7 s: put back).
	if got := listNames(&s, byFirst); got != "CBA" {
		t.Errorf("by first arrival %q, want CBA", got)
	}
	if got := listNames(&s, bySeq); got != "ABC" { // writes 1, 2 (and 4), 3
		t.Errorf("by first write %q, want ABC", got)
	}
	// The head of the first-arrival order (C, write 3) would say 2; A
	// (write 1) is pending again.
	if w := s.watermark(); w != 0 {
		t.Errorf("watermark %d, want 0", w)
	}
	if b := s.byID[spansOf("B")[0].TraceID]; len(b.spans) != 2 || b.spans[0].SpanID[0] != 1 || b.minSeq != 2 || b.maxSeq != 4 {
		t.Errorf("B merged: %d spans, writes %d..%d; want 2 spans, writes 2..4", len(b.spans), b.minSeq, b.maxSeq)
	}
	if s.spans != 4 { // A, B twice, C
		t.Errorf("%d spans pending, want 4", s.spans)
	}
	// At 8 s only C is idle (6 s); A waits from 7 s, B from 6.5 s.
	if got, _ := s.take(at(8), idle, age, 1<<30, nil, nil); namesOf(got) != "C" {
		t.Errorf("took %q at 8 s, want C", namesOf(got))
	}
	if w := s.watermark(); w != 0 {
		t.Errorf("watermark %d after C, want 0", w)
	}
	if got, _ := s.take(at(11.5), idle, age, 1<<30, nil, nil); namesOf(got) != "B" {
		t.Errorf("took %q at 11.5 s, want B", namesOf(got))
	}
	if w := s.watermark(); w != 0 { // A
		t.Errorf("watermark %d after B, want 0", w)
	}
	// A's age counts from 7 s: at 66.9 s it is not aged yet, at 67 s it is.
	s.add(spansOf("A"), 5, at(11.9)) // keeps it from falling idle
	s.add(spansOf("A"), 6, at(16.8))
	for _, now := range []float64{21.7, 26.6, 31.5, 36.4, 41.3, 46.2, 51.1, 56, 60.9, 65.8} {
		s.add(spansOf("A"), 7, at(now))
	}
	if got, _ := s.take(at(66.9), idle, age, 1<<30, nil, nil); len(got) != 0 {
		t.Errorf("took %q at 66.9 s, want nothing", namesOf(got))
	}
	if got, r := s.take(at(67), idle, age, 1<<30, nil, nil); namesOf(got) != "A" || r[0] != "age" || len(got[0].spans) != 13 {
		t.Errorf("took %q %v at 67 s, want A aged with 13 spans", namesOf(got), r)
	}
	if w := s.watermark(); w != 7 {
		t.Errorf("watermark %d with nothing pending, want 7", w)
	}
	checkPending(t, &s)
}

// TestPendingReopenedOrder: a late span of a trace already analysed makes
// it pending again as a new trace: last by first arrival, and its write is
// the latest.
func TestPendingReopenedOrder(t *testing.T) {
	var s pendingSet
	s.init()
	s.add(spansOf("AB"), 1, at(0))
	s.add(spansOf("C"), 2, at(3))
	if got, _ := s.take(at(5), 5*time.Second, time.Hour, 1<<30, nil, nil); namesOf(got) != "AB" {
		t.Fatalf("took %q, want AB", namesOf(got))
	}
	s.add(spansOf("A"), 3, at(6)) // late: A is re-opened
	if got := listNames(&s, byFirst); got != "CA" {
		t.Errorf("by first arrival %q, want CA", got)
	}
	if w := s.watermark(); w != 1 { // C: write 2
		t.Errorf("watermark %d, want 1", w)
	}
	if got, _ := s.take(at(8), 5*time.Second, time.Hour, 1<<30, nil, nil); namesOf(got) != "C" {
		t.Errorf("took %q, want C", namesOf(got))
	}
	if w := s.watermark(); w != 2 { // A again: write 3
		t.Errorf("watermark %d, want 2", w)
	}
	checkPending(t, &s)
}

// TestPendingOutOfOrder: a write reads the clock before it takes the
// buffer's lock, so traces put back meanwhile may carry a later time than
// its own; its traces go before them, in every order.
func TestPendingOutOfOrder(t *testing.T) {
	var s pendingSet
	s.init()
	s.add(spansOf("AB"), 1, at(0))
	group, _ := s.take(at(5), 5*time.Second, time.Hour, 1<<30, nil, nil)
	s.add(spansOf("C"), 2, at(5.5))
	s.restore(group, at(7)) // A, B back at 7 s
	// A write that read the clock at 6.9 s: new D, E, and C again.
	s.add(spansOf("DCE"), 3, at(6.9))
	checkPending(t, &s)
	if got := listNames(&s, byFirst); got != "CDEAB" {
		t.Errorf("by first arrival %q, want CDEAB", got)
	}
	if got := listNames(&s, byLast); got != "DCEAB" {
		t.Errorf("by latest arrival %q, want DCEAB", got)
	}
	if got := listNames(&s, bySeq); got != "ABCDE" { // writes 1, 1, 2, 3, 3
		t.Errorf("by first write %q, want ABCDE", got)
	}
	// At 11.9 s D, C, E (6.9 s) are idle; A, B (7 s) not.
	if got, _ := s.take(at(11.9), 5*time.Second, time.Hour, 1<<30, nil, nil); namesOf(got) != "DCE" {
		t.Errorf("took %q, want DCE", namesOf(got))
	}
	if w := s.watermark(); w != 0 {
		t.Errorf("watermark %d, want 0", w)
	}
	if got := s.all(nil); namesOf(got) != "AB" || s.traces() != 0 || s.spans != 0 || s.watermark() != 3 {
		t.Errorf("all: %q, leaving %d traces, %d spans, watermark %d; want AB, 0, 0, 3",
			namesOf(got), s.traces(), s.spans, s.watermark())
	}
	checkPending(t, &s)
}

// TestPendingAgainstScan runs random arrivals, ticks, refused batches and
// flushes against the definitions the buffer used to compute by scanning
// every trace: what leaves early is the oldest by first arrival, what
// leaves aged or idle is every trace aged or idle, and the watermark is
// below the first write of every trace pending.
func TestPendingAgainstScan(t *testing.T) {
	type ref struct {
		first, last   time.Time
		minSeq, spans int
	}
	rng := rand.New(rand.NewPCG(17, 1))
	var s pendingSet
	s.init()
	model := map[graph.TraceID]*ref{}
	now, seq := pt0, 0
	var taken []*pendingTrace // a batch in flight, put back if refused
	idle, age := 5*time.Second, 20*time.Second
	for step := 0; step < 20000; step++ {
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		switch op := rng.IntN(10); {
		case op < 6: // a write; now and then its clock was read before a restore
			seq++
			at := now
			if rng.IntN(8) == 0 {
				at = now.Add(-time.Duration(rng.IntN(500)) * time.Millisecond)
			}
			spans := make([]graph.Span, 1+rng.IntN(6))
			for i := range spans {
				spans[i].TraceID[0] = byte(rng.IntN(40))
				m := model[spans[i].TraceID]
				if m == nil {
					m = &ref{first: at, minSeq: seq}
					model[spans[i].TraceID] = m
				}
				m.last = at
				m.spans++
			}
			s.add(spans, uint64(seq), at)
		case op < 8: // a tick
			limit := 1 << 30
			if rng.IntN(4) == 0 {
				limit = rng.IntN(60)
			}
			got, reasons := s.take(now, idle, age, limit, nil, nil)
			left := 0
			for _, m := range model {
				left += m.spans
			}
			for i, tr := range got {
				m := model[tr.id]
				if m == nil || m.spans != len(tr.spans) || m.minSeq != int(tr.minSeq) || !m.first.Equal(tr.at[byFirst]) || !m.last.Equal(tr.at[byLast]) {
					t.Fatalf("step %d: took %v, not as pending", step, tr.id[0])
				}
				switch reasons[i] {
				case "early":
					for _, o := range model {
						if o.first.Before(m.first) {
							t.Fatalf("step %d: %v left early before an older trace", step, tr.id[0])
						}
					}
					if left <= limit {
						t.Fatalf("step %d: %v left early within the budget", step, tr.id[0])
					}
				case "age":
					if now.Sub(m.first) < age {
						t.Fatalf("step %d: %v not aged", step, tr.id[0])
					}
				case "idle":
					if now.Sub(m.last) < idle {
						t.Fatalf("step %d: %v not idle", step, tr.id[0])
					}
				}
				left -= m.spans
				delete(model, tr.id)
			}
			for id, m := range model {
				if now.Sub(m.first) >= age || now.Sub(m.last) >= idle {
					t.Fatalf("step %d: %v is due and still pending", step, id[0])
				}
			}
			if left > limit {
				t.Fatalf("step %d: %d spans left over a budget of %d", step, left, limit)
			}
			if len(taken) == 0 {
				taken = got
			}
		case op < 9: // the batch in flight is refused
			for _, tr := range taken {
				m := model[tr.id]
				if m == nil {
					m = &ref{first: now, last: now, minSeq: int(tr.minSeq)}
					model[tr.id] = m
				}
				m.minSeq = min(m.minSeq, int(tr.minSeq))
				m.spans += len(tr.spans)
			}
			s.restore(taken, now)
			taken = nil
		default: // the batch in flight is stored
			taken = nil
		}
		want := uint64(seq)
		for _, m := range model {
			want = min(want, uint64(m.minSeq-1))
		}
		if w := s.watermark(); w != want {
			t.Fatalf("step %d: watermark %d, want %d", step, w, want)
		}
		if step%100 == 0 {
			checkPending(t, &s)
		}
	}
	checkPending(t, &s)
	if got := s.all(nil); len(got) != len(model) || s.traces() != 0 {
		t.Fatalf("all: %d traces, %d pending; want %d, 0", len(got), s.traces(), len(model))
	}
}
