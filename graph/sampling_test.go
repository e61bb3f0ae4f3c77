package graph_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

// chain returns a root A calling B calling C, with opts on A's SERVER
// span, on B's SERVER span and on C's SERVER span.
func chain(n byte, root, mid, leaf []Opt) *Trace {
	b := New(n)
	a := b.Root("A", "GET /a", 0, 10*ms, root...)
	s := b.Call(a, "A", "B", "GET /b", 1*ms, 8*ms, nil, mid...)
	b.Call(s, "B", "C", "GET /c", 2*ms, 6*ms, nil, leaf...)
	return b
}

func TestTraceSampling(t *testing.T) {
	rec := func(a float64) []Opt { return []Opt{Sampled(graph.SamplingRecorded, a)} }
	conf := func(a float64) []Opt { return []Opt{Sampled(graph.SamplingConfigured, a)} }
	bad := []Opt{Sampled(graph.SamplingInvalid, 1)}
	for _, c := range []struct {
		name            string
		root, mid, leaf []Opt
		adjusted        float64
		weight          int64
		flags           uint8
	}{
		{"unsampled", nil, nil, nil, 1, 1, 0},
		{"every span 10", rec(10), rec(10), rec(10), 10, 10, 0},
		{"root decides a conflict", rec(4), rec(10), rec(10), 4, 4, graph.SamplingConflict},
		{"root configured over recorded children", conf(2), rec(10), rec(10), 2, 2, 0},
		{"no root info: most spans", nil, rec(10), rec(10), 10, 10, 0},
		{"no root info: a tie takes the smaller", nil, rec(10), rec(4), 4, 4, graph.SamplingConflict},
		{"recorded before configured", nil, conf(2), rec(8), 8, 8, 0},
		{"configured only", nil, conf(5), conf(5), 5, 5, 0},
		{"root unusable counts once", bad, rec(10), rec(10), 1, 1, graph.SamplingUnusable},
		{"only unusable", nil, bad, nil, 1, 1, graph.SamplingUnusable},
		{"capped", rec(1e9), nil, nil, graph.MaxAdjustedCount, graph.MaxAdjustedCount, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := assemble(chain(1, c.root, c.mid, c.leaf).Spans)
			if tr.AdjustedCount != c.adjusted || tr.W() != c.weight || tr.SamplingFlags != c.flags {
				t.Fatalf("adjusted %v weight %d flags %b, want %v %d %b", tr.AdjustedCount, tr.W(), tr.SamplingFlags, c.adjusted, c.weight, c.flags)
			}
			// The weight and flags survive the facts' encoding; an
			// unsampled trace is encoded as before (version 1).
			enc := tr.AppendBinary(nil)
			if want := byte(1); c.weight == 1 && c.flags == 0 && enc[0] != want {
				t.Fatalf("unsampled facts have version %d", enc[0])
			}
			back, err := graph.DecodeTrace(enc)
			if err != nil {
				t.Fatal(err)
			}
			if back.W() != c.weight || back.SamplingFlags != c.flags {
				t.Fatalf("decoded weight %d flags %b", back.W(), back.SamplingFlags)
			}
		})
	}
}

// The fragment-only trace takes its earliest root's.
func TestTraceSamplingWithoutRoot(t *testing.T) {
	b := New(2)
	b.Span(graph.SpanID{}, graph.KindClient, "A", "GET /b", 0, 5*ms, Sampled(graph.SamplingRecorded, 3))
	tr := assemble(b.Spans)
	if tr.Root != -1 || tr.W() != 3 {
		t.Fatalf("root %d weight %d", tr.Root, tr.W())
	}
}

// RoundWeight is unbiased: over many trace ids the mean weight of an
// adjusted count a is a, within binomial error, and an integer a is
// exact.
func TestRoundWeight(t *testing.T) {
	var id graph.TraceID
	for _, a := range []float64{1, 2, 10, 1 / 0.3, 1 / 0.7, 9.99939, 20.5} {
		const n = 200_000
		var sum int64
		lo, hi := int64(math.Floor(a)), int64(math.Ceil(a))
		for i := uint64(0); i < n; i++ {
			binary.BigEndian.PutUint64(id[8:], i*0x9e3779b97f4a7c15)
			binary.BigEndian.PutUint64(id[:8], i)
			w := graph.RoundWeight(id, a)
			if w != lo && w != hi {
				t.Fatalf("a=%v: weight %d", a, w)
			}
			sum += w
		}
		frac := a - math.Floor(a)
		se := math.Sqrt(frac*(1-frac)/n) + 1e-12
		if mean := float64(sum) / n; math.Abs(mean-a) > 5*se {
			t.Errorf("a=%v: mean weight %v (±%v)", a, mean, se)
		}
	}
}

// Spans keep their sampling through the span codec; a list without any
// is written as before (version 2).
func TestSpanCodecSampling(t *testing.T) {
	b := chain(3, []Opt{Sampled(graph.SamplingRecorded, 9.99939)}, []Opt{Sampled(graph.SamplingConfigured, 4)}, []Opt{Sampled(graph.SamplingInvalid, 1)})
	var e graph.TraceEncoder
	enc := e.AppendSpans(nil, b.Spans)
	if enc[0] != 3 {
		t.Fatalf("version %d", enc[0])
	}
	got, err := graph.DecodeSpans(enc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i].Sampling != b.Spans[i].Sampling || got[i].AdjustedCount != b.Spans[i].AdjustedCount {
			t.Fatalf("span %d: %v %v, want %v %v", i, got[i].Sampling, got[i].AdjustedCount, b.Spans[i].Sampling, b.Spans[i].AdjustedCount)
		}
	}
	plain := chain(4, nil, nil, nil)
	if enc := e.AppendSpans(nil, plain.Spans); enc[0] != 2 {
		t.Fatalf("unsampled version %d", enc[0])
	}
	// A truncated adjusted count is an error, not a panic.
	if _, err := graph.DecodeSpans(enc[:len(enc)-3], nil, nil); err == nil {
		t.Fatal("truncated list decoded")
	}
}

// Grouping spans by trace keeps their sampling.
func TestGroupKeepsSampling(t *testing.T) {
	b := chain(5, []Opt{Sampled(graph.SamplingRecorded, 9.5)}, []Opt{Sampled(graph.SamplingConfigured, 4)}, []Opt{Sampled(graph.SamplingInvalid, 1)})
	got := graph.GroupTraces(b.Spans)
	if len(got) != 1 || len(got[0]) != len(b.Spans) {
		t.Fatalf("%d traces", len(got))
	}
	for i := range got[0] {
		if g, w := got[0][i], b.Spans[i]; g.Sampling != w.Sampling || g.AdjustedCount != w.AdjustedCount {
			t.Errorf("span %d: %v %v, want %v %v", i, g.Sampling, g.AdjustedCount, w.Sampling, w.AdjustedCount)
		}
	}
	if tr := assemble(got[0]); tr.W() != 10 && tr.W() != 9 {
		t.Errorf("weight %d of an adjusted count of 9.5", tr.W())
	}
}
