package pipeline

import (
	"cmp"
	"slices"
	"time"

	"github.com/stormradius/stormradius/graph"
)

// The orders of the pending buffer (pendingTrace.at, .link).
const (
	byFirst = iota // arrival of a trace's first span: age expiry, early flush
	byLast         // arrival of its latest span: idle expiry
	bySeq          // its first write (minSeq): the watermark
)

// pendingTrace is a trace whose spans are stored but not yet analysed.
type pendingTrace struct {
	id    graph.TraceID
	spans []graph.Span
	// at holds the arrival of its first (byFirst) and latest (byLast)
	// span; link places it in the buffer's list of each order.
	at     [2]time.Time
	link   [3]struct{ prev, next *pendingTrace }
	minSeq uint64 // the earliest write holding one of its spans
	maxSeq uint64 // the latest
	adding int    // its spans in the write being added (add)
}

// pendingSet holds pending traces by id, in arrival order (Tempo's
// servicegraph store is the model: expiry on a ticker, a cap, counters;
// nothing is dropped, only analysed early). Three lists order them: by
// first arrival, by latest arrival and by first write. The traces due are
// a prefix of the first two and the watermark is at the head of the third,
// so a tick costs what it takes, not what is pending.
//
// First arrival and first write agree while traces only arrive (writes are
// numbered in the order they are queued), but not for traces put back
// after a refused store batch: such a trace counts as just arrived yet
// keeps its writes, and one merged with spans of it that arrived meanwhile
// keeps its place but gets the earlier writes. Hence the third list.
type pendingSet struct {
	byID    map[graph.TraceID]*pendingTrace
	order   [3]traceList // byFirst, byLast, bySeq
	spans   int
	lastSeq uint64          // the last write whose spans were added
	of      []*pendingTrace // add's: the trace of each span of the write
}

func (s *pendingSet) init() {
	s.byID = map[graph.TraceID]*pendingTrace{}
	s.order = [3]traceList{{o: byFirst}, {o: byLast}, {o: bySeq}}
}

func (s *pendingSet) traces() int { return len(s.byID) }

// add queues the spans of write seq. The spans are copied.
func (s *pendingSet) add(spans []graph.Span, seq uint64, now time.Time) {
	// The traces placed by this call, all at now: the next ones go right
	// after them (see traceList.insertFrom).
	var placed [3]*pendingTrace
	of := slices.Grow(s.of[:0], len(spans))
	for i := range spans {
		sp := &spans[i]
		t := s.byID[sp.TraceID]
		if t == nil {
			t = &pendingTrace{id: sp.TraceID, at: [2]time.Time{now, now}, minSeq: seq, maxSeq: seq}
			s.byID[sp.TraceID] = t
			for o := range s.order {
				placed[o] = s.order[o].insertFrom(t, placed[o])
			}
		} else if !t.at[byLast].Equal(now) {
			t.at[byLast] = now
			s.order[byLast].remove(t)
			placed[byLast] = s.order[byLast].insertFrom(t, placed[byLast])
		}
		t.adding++
		t.maxSeq = max(t.maxSeq, seq)
		of = append(of, t)
	}
	// Each trace's spans grow once per write, not span by span (the
	// doublings were 1.2 GB per 100,000 traces of ~22 spans).
	for i, t := range of {
		if t.adding > 0 {
			t.spans, t.adding = slices.Grow(t.spans, t.adding), 0
		}
		t.spans = append(t.spans, spans[i])
	}
	clear(of)
	if cap(of) <= 1<<16 {
		s.of = of[:0]
	}
	s.spans += len(spans)
	s.lastSeq = max(s.lastSeq, seq)
}

// restore puts back traces taken earlier, each merged with spans of it
// that arrived since; a trace not pending meanwhile counts as just
// arrived, so it waits a full idle time. Each keeps its writes.
func (s *pendingSet) restore(traces []*pendingTrace, now time.Time) {
	// The traces to place by first write: their writes are older than most
	// pending ones, so they are merged into that list in one walk.
	var bySeqLate []*pendingTrace
	seqs := &s.order[bySeq]
	for _, t := range traces {
		s.spans += len(t.spans)
		if cur := s.byID[t.id]; cur != nil {
			cur.spans = append(t.spans, cur.spans...)
			cur.maxSeq = max(cur.maxSeq, t.maxSeq)
			if t.minSeq < cur.minSeq {
				cur.minSeq = t.minSeq
				if seqs.holds(cur) {
					seqs.remove(cur)
					bySeqLate = append(bySeqLate, cur)
				}
			}
			continue
		}
		t.at = [2]time.Time{now, now}
		s.byID[t.id] = t
		s.order[byFirst].insertFrom(t, nil)
		s.order[byLast].insertFrom(t, nil)
		bySeqLate = append(bySeqLate, t)
	}
	slices.SortFunc(bySeqLate, func(a, b *pendingTrace) int { return cmp.Compare(a.minSeq, b.minSeq) })
	p := seqs.head // the first trace of a later write than the one to place
	for _, t := range bySeqLate {
		for p != nil && p.minSeq <= t.minSeq {
			p = p.link[bySeq].next
		}
		seqs.insertBefore(t, p)
	}
}

// take removes and returns the traces due at now: idle for idle, older
// than maxAge, or — while the buffer holds more than limit spans — the
// oldest. reason names why each was taken.
func (s *pendingSet) take(now time.Time, idle, maxAge time.Duration, limit int, out []*pendingTrace, reasons []string) ([]*pendingTrace, []string) {
	age, last := &s.order[byFirst], &s.order[byLast]
	for s.spans > limit && age.head != nil {
		t := age.head
		s.remove(t)
		out, reasons = append(out, t), append(reasons, "early")
	}
	for age.head != nil && now.Sub(age.head.at[byFirst]) >= maxAge {
		t := age.head
		s.remove(t)
		out, reasons = append(out, t), append(reasons, "age")
	}
	for last.head != nil && now.Sub(last.head.at[byLast]) >= idle {
		t := last.head
		s.remove(t)
		out, reasons = append(out, t), append(reasons, "idle")
	}
	return out, reasons
}

// all removes and returns every pending trace, by first arrival.
func (s *pendingSet) all(out []*pendingTrace) []*pendingTrace {
	for t := s.order[byFirst].head; t != nil; {
		next := t.link[byFirst].next
		t.link = [3]struct{ prev, next *pendingTrace }{}
		out = append(out, t)
		t = next
	}
	s.byID = map[graph.TraceID]*pendingTrace{}
	s.order = [3]traceList{{o: byFirst}, {o: byLast}, {o: bySeq}}
	s.spans = 0
	return out
}

func (s *pendingSet) remove(t *pendingTrace) {
	delete(s.byID, t.id)
	for o := range s.order {
		s.order[o].remove(t)
	}
	s.spans -= len(t.spans)
}

// watermark returns the highest write sequence all of whose spans are out
// of the buffer (analysed, or being analysed by the caller now).
func (s *pendingSet) watermark() uint64 {
	w := s.lastSeq
	if t := s.order[bySeq].head; t != nil && t.minSeq-1 < w {
		w = t.minSeq - 1
	}
	return w
}

// traceList is an intrusive doubly linked list of pending traces (through
// link[o]) in non-decreasing order o: of at[o], or of minSeq.
type traceList struct {
	o          int
	head, tail *pendingTrace
}

// later reports whether a comes after b in the list's order.
func (l *traceList) later(a, b *pendingTrace) bool {
	if l.o == bySeq {
		return a.minSeq > b.minSeq
	}
	return a.at[l.o].After(b.at[l.o])
}

// insertFrom places t after the last trace not later than it and returns
// t. Traces arrive in order, so that is nearly always the tail; not quite
// always: a write reads the clock before it takes the buffer's lock, and
// traces put back meanwhile may have read a later time. after, when not
// nil, is a trace that add placed just before, of the same time and
// write as t: t goes right after it, so that a write behind a batch put
// back looks past that batch once, not once per trace.
func (l *traceList) insertFrom(t, after *pendingTrace) *pendingTrace {
	p := after
	if p == nil {
		p = l.tail
		for p != nil && l.later(p, t) {
			p = p.link[l.o].prev
		}
	}
	if p == nil {
		l.insertBefore(t, l.head)
	} else {
		l.insertBefore(t, p.link[l.o].next)
	}
	return t
}

// insertBefore places t before next (at the end when next is nil).
func (l *traceList) insertBefore(t, next *pendingTrace) {
	o := l.o
	lk := &t.link[o]
	lk.next = next
	if next == nil {
		lk.prev = l.tail
		l.tail = t
	} else {
		lk.prev = next.link[o].prev
		next.link[o].prev = t
	}
	if lk.prev == nil {
		l.head = t
	} else {
		lk.prev.link[o].next = t
	}
}

// holds reports whether t is in the list.
func (l *traceList) holds(t *pendingTrace) bool {
	return l.head == t || t.link[l.o].prev != nil
}

func (l *traceList) remove(t *pendingTrace) {
	o := l.o
	lk := &t.link[o]
	if lk.prev == nil {
		l.head = lk.next
	} else {
		lk.prev.link[o].next = lk.next
	}
	if lk.next == nil {
		l.tail = lk.prev
	} else {
		lk.next.link[o].prev = lk.prev
	}
	lk.prev, lk.next = nil, nil
}
