package graph

import (
	"encoding/binary"
	"math"
)

// MaxAdjustedCount bounds a trace's adjusted count: a sampling probability
// below 1/MaxAdjustedCount (about one in a million) counts as that
// probability, so that one trace can never stand for an unbounded number
// of requests and the sums of weights and of their squares stay within
// int64 (docs/ANALYSIS.md, "Sampled traffic").
const MaxAdjustedCount = 1 << 20

// Trace sampling flags (Trace.SamplingFlags, TraceResult.SamplingFlags).
const (
	// SamplingConflict: spans of the trace recorded different adjusted
	// counts; the root's counted (docs/SPEC.md §2).
	SamplingConflict uint8 = 1 << iota
	// SamplingUnusable: the span that decides the trace's adjusted count
	// recorded sampling information that could not be used; it counts 1.
	SamplingUnusable
)

// W returns the trace's weight: how many traces of the traffic it stands
// for, an integer ≥ 1 (Weight, or 1 when unset).
func (t *Trace) W() int64 {
	if t.Weight > 1 {
		return t.Weight
	}
	return 1
}

// resolveSampling sets t's adjusted count, weight and sampling flags from
// its spans (docs/SPEC.md §2, "sampling"): the adjusted count of the span
// that decides — the root hop's span, else the earliest tree root's —
// when it has one; else the adjusted count most spans recorded (or, when
// none recorded one, were configured with), the smallest on a tie. Spans
// that recorded different adjusted counts make the trace a conflict.
func resolveSampling(t *Trace) {
	t.AdjustedCount, t.Weight, t.SamplingFlags = 1, 1, 0
	spans := t.Spans
	var first float64 // the first adjusted count recorded
	recorded, conflict, sampled := false, false, false
	for i := range spans {
		s := &spans[i]
		if s.Sampling == SamplingNone {
			continue
		}
		sampled = true
		if s.Sampling != SamplingRecorded {
			continue
		}
		if !recorded {
			first, recorded = s.AdjustedCount, true
		} else if s.AdjustedCount != first {
			conflict = true
		}
	}
	if !sampled {
		return
	}
	if conflict {
		t.SamplingFlags |= SamplingConflict
	}
	decider := int32(-1)
	if t.Root >= 0 {
		decider = t.Hops[t.Root].Span
	} else if len(t.Roots) > 0 {
		decider = t.Hops[t.Roots[0]].Span
	}
	var a float64
	switch {
	case decider >= 0 && spans[decider].Sampling == SamplingInvalid:
		t.SamplingFlags |= SamplingUnusable
		return
	case decider >= 0 && spans[decider].Sampling != SamplingNone:
		a = spans[decider].AdjustedCount
	default:
		var ok bool
		if a, ok = commonCount(spans, SamplingRecorded); !ok {
			if a, ok = commonCount(spans, SamplingConfigured); !ok {
				// Only unusable information: the trace counts once.
				t.SamplingFlags |= SamplingUnusable
				return
			}
		}
	}
	if !(a >= 1) { // NaN, below 1: never from a decoder
		t.SamplingFlags |= SamplingUnusable
		return
	}
	a = min(a, MaxAdjustedCount)
	t.AdjustedCount = a
	t.Weight = RoundWeight(t.ID, a)
}

// commonCount returns the adjusted count most spans of source src carry,
// the smallest on a tie; false when none has that source. Traces are
// small and sources few: a quadratic count in the rare conflicting case,
// linear otherwise.
func commonCount(spans []Span, src Sampling) (float64, bool) {
	best, bestN := 0.0, 0
	for i := range spans {
		s := &spans[i]
		if s.Sampling != src || (bestN > 0 && s.AdjustedCount == best) {
			continue
		}
		n := 0
		for j := range spans {
			if spans[j].Sampling == src && spans[j].AdjustedCount == s.AdjustedCount {
				n++
			}
		}
		if n > bestN || n == bestN && s.AdjustedCount < best {
			best, bestN = s.AdjustedCount, n
		}
	}
	return best, bestN > 0
}

// RoundWeight rounds an adjusted count a (1 ≤ a ≤ MaxAdjustedCount) to an
// integer weight without bias: ⌊a⌋ + 1 with probability a − ⌊a⌋, decided
// by a hash of the trace id, so that the expected weight is a, every sum
// of weights stays an integer (exact to add and subtract), and the same
// trace gets the same weight wherever it is analysed. The hash mixes all
// sixteen bytes of the id, not the bits samplers read their randomness
// from (the low 56), so the rounding is independent of whether a trace
// was kept.
func RoundWeight(id TraceID, a float64) int64 {
	w := math.Floor(a)
	frac := a - w
	if frac > 0 {
		h := mix64(binary.LittleEndian.Uint64(id[:8])^0x9e3779b97f4a7c15) ^ mix64(binary.LittleEndian.Uint64(id[8:]))
		if float64(mix64(h)>>11)*(1.0/(1<<53)) < frac {
			w++
		}
	}
	return int64(w)
}

// mix64 is SplitMix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
