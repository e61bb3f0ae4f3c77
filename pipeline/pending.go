package pipeline

import (
	"container/heap"
	"time"

	"github.com/stormradius/stormradius/graph"
)

// pendingTrace is a trace whose spans are stored but not yet analysed.
type pendingTrace struct {
	id          graph.TraceID
	spans       []graph.Span
	first, last time.Time // arrival of its first and latest span
	minSeq      uint64    // the earliest write holding one of its spans
	maxSeq      uint64    // the latest
	heapIndex   int       // position in the age heap
}

// pendingSet holds pending traces by id, with a heap by first arrival, so
// that the oldest trace is found in O(log n) when the buffer is over its
// share (Tempo's servicegraph store is the model: expiry on a ticker, a
// cap, counters; nothing is dropped, only analysed early).
type pendingSet struct {
	byID    map[graph.TraceID]*pendingTrace
	age     ageHeap
	spans   int
	lastSeq uint64 // the last write whose spans were added
}

func (s *pendingSet) init() { s.byID = map[graph.TraceID]*pendingTrace{} }

func (s *pendingSet) traces() int { return len(s.byID) }

// add queues the spans of write seq. The spans are copied.
func (s *pendingSet) add(spans []graph.Span, seq uint64, now time.Time) {
	for i := range spans {
		sp := &spans[i]
		t := s.byID[sp.TraceID]
		if t == nil {
			t = &pendingTrace{id: sp.TraceID, first: now, minSeq: seq, maxSeq: seq}
			s.byID[sp.TraceID] = t
			heap.Push(&s.age, t)
		}
		t.spans = append(t.spans, *sp)
		t.last, t.maxSeq = now, max(t.maxSeq, seq)
	}
	s.spans += len(spans)
	s.lastSeq = max(s.lastSeq, seq)
}

// restore puts back a trace taken earlier, merging it with spans of it that
// arrived since; it counts as just arrived, so it waits a full idle time.
func (s *pendingSet) restore(t *pendingTrace, now time.Time) {
	if cur := s.byID[t.id]; cur != nil {
		cur.spans = append(t.spans, cur.spans...)
		cur.minSeq = min(cur.minSeq, t.minSeq)
		cur.maxSeq = max(cur.maxSeq, t.maxSeq)
		s.spans += len(t.spans)
		return
	}
	t.first, t.last = now, now
	s.byID[t.id] = t
	heap.Push(&s.age, t)
	s.spans += len(t.spans)
}

// take removes and returns the traces due at now: idle for idle, older
// than maxAge, or — while the buffer holds more than limit spans — the
// oldest. reason names why each was taken.
func (s *pendingSet) take(now time.Time, idle, maxAge time.Duration, limit int, out []*pendingTrace, reasons []string) ([]*pendingTrace, []string) {
	for s.spans > limit && s.age.Len() > 0 {
		t := heap.Pop(&s.age).(*pendingTrace)
		s.remove(t)
		out, reasons = append(out, t), append(reasons, "early")
	}
	// Aged traces are at the top of the heap; idle ones anywhere.
	for s.age.Len() > 0 && now.Sub(s.age[0].first) >= maxAge {
		t := heap.Pop(&s.age).(*pendingTrace)
		s.remove(t)
		out, reasons = append(out, t), append(reasons, "age")
	}
	for _, t := range s.byID {
		if now.Sub(t.last) >= idle {
			heap.Remove(&s.age, t.heapIndex)
			s.remove(t)
			out, reasons = append(out, t), append(reasons, "idle")
		}
	}
	return out, reasons
}

// all removes and returns every pending trace.
func (s *pendingSet) all(out []*pendingTrace) []*pendingTrace {
	for _, t := range s.byID {
		out = append(out, t)
	}
	s.byID = map[graph.TraceID]*pendingTrace{}
	s.age = s.age[:0]
	s.spans = 0
	return out
}

func (s *pendingSet) remove(t *pendingTrace) {
	delete(s.byID, t.id)
	s.spans -= len(t.spans)
}

// watermark returns the highest write sequence all of whose spans are out
// of the buffer (analysed, or being analysed by the caller now).
func (s *pendingSet) watermark() uint64 {
	w := s.lastSeq
	for _, t := range s.byID {
		if t.minSeq-1 < w {
			w = t.minSeq - 1
		}
	}
	return w
}

// ageHeap orders pending traces by first arrival.
type ageHeap []*pendingTrace

func (h ageHeap) Len() int           { return len(h) }
func (h ageHeap) Less(i, j int) bool { return h[i].first.Before(h[j].first) }
func (h ageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *ageHeap) Push(x any) {
	t := x.(*pendingTrace)
	t.heapIndex = len(*h)
	*h = append(*h, t)
}
func (h *ageHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
