package analysis

import (
	"slices"
	"time"

	"github.com/stormradius/stormradius/graph"
)

// DefaultWindow is the failure memory's default sliding window (SPEC §4.3).
const DefaultWindow = time.Hour

// Window keeps a State per minute, by trace start time, so that a sliding
// window of states can be summed, expired and recomputed when a trace is
// re-opened by late spans. Add and Remove with the same trace are exact
// inverses. Not safe for concurrent use.
type Window struct {
	// Size is the window's length (DefaultWindow when zero).
	Size    time.Duration
	buckets map[int64]*State
}

// NewWindow returns an empty window of the given size.
func NewWindow(size time.Duration) *Window {
	return &Window{Size: size, buckets: map[int64]*State{}}
}

func (w *Window) size() time.Duration {
	if w.Size <= 0 {
		return DefaultWindow
	}
	return w.Size
}

func bucketOf(unixNano int64) int64 { return unixNano / int64(time.Minute) }

// Add adds trace t to its minute's state.
func (w *Window) Add(t *graph.Trace) { w.add(t, 1) }

// Remove removes trace t, added earlier, from its minute's state.
func (w *Window) Remove(t *graph.Trace) { w.add(t, -1) }

func (w *Window) add(t *graph.Trace, sign int64) {
	if w.buckets == nil {
		w.buckets = map[int64]*State{}
	}
	b := bucketOf(t.Start())
	s := w.buckets[b]
	if s == nil {
		s = NewState()
		w.buckets[b] = s
	}
	s.Add(t, sign)
	if s.Traces == 0 {
		delete(w.buckets, b)
	}
}

// State returns the sum of the minutes in the window that ends at end
// (unix nanoseconds): the minutes from the one holding end − Size to the one
// holding end.
func (w *Window) State(end int64) *State {
	out := NewState()
	lo, hi := bucketOf(end-int64(w.size())), bucketOf(end)
	keys := make([]int64, 0, len(w.buckets))
	for k := range w.buckets {
		if k >= lo && k <= hi {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out.Merge(w.buckets[k], 1)
	}
	return out
}

// Expire drops the minutes that can no longer be part of a window ending
// at or after end.
func (w *Window) Expire(end int64) {
	lo := bucketOf(end - int64(w.size()))
	for k := range w.buckets {
		if k < lo {
			delete(w.buckets, k)
		}
	}
}

// Buckets returns the minutes held, oldest first, as unix minutes.
func (w *Window) Buckets() []int64 {
	keys := make([]int64, 0, len(w.buckets))
	for k := range w.buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
