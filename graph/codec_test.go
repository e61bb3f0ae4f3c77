package graph_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/stormradius/stormradius/graph"
	. "github.com/stormradius/stormradius/graph/graphtest"
)

// checkRoundTrip encodes tr and decodes it again: everything but the spans
// must come back equal.
func checkRoundTrip(t *testing.T, tr *graph.Trace) {
	t.Helper()
	b := tr.AppendBinary(nil)
	got, err := graph.DecodeTrace(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	want := *tr
	want.Spans = nil
	norm := func(x *graph.Trace) {
		// Empty and nil slices are the same trace.
		for _, p := range []any{&x.Hops, &x.Calls, &x.Attempts, &x.Roots} {
			v := reflect.ValueOf(p).Elem()
			if v.Len() == 0 {
				v.Set(reflect.Zero(v.Type()))
			}
		}
	}
	norm(&want)
	norm(got)
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, &want)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	b := New(1)
	a := b.Span(SpanID(77), graph.KindServer, "frontend", "GET /dispatch", 1_000, 90_000, Failed, Claim(graph.ClaimUnclaimed))
	for i := int64(0); i < 2; i++ {
		s := b.Call(a, "frontend", "route", "GET /route", 2_000+i*10_000, 8_000+i*10_000, C(Failed, Resend(int32(i)), Criteria), Failed, Claim(graph.ClaimClaimed))
		b.Span(s, graph.KindClient, "route", "GET", 3_000+i*10_000, 4_000+i*10_000, Peer("redis"), Failed, FailOpen(true))
	}
	b.Span(SpanID(88), graph.KindClient, "dropper", "call", 50_000, 60_000, Suppressed)
	for i := range b.Spans {
		b.Spans[i].Version = "v1.2"
	}
	var asm graph.Assembler
	tr := asm.Assemble(b.Spans)
	if !tr.RemoteParent || tr.Hops[tr.Root].Version != "v1.2" || len(tr.Calls) < 3 {
		t.Fatalf("test trace: remote %v hops %+v", tr.RemoteParent, tr.Hops)
	}
	checkRoundTrip(t, tr)
	checkRoundTrip(t, asm.Assemble(nil))
}

// Corrupt input never panics and is reported as ErrCorruptTrace; every
// truncation of a valid encoding is an error.
func TestCodecCorrupt(t *testing.T) {
	b := New(2)
	a := b.Root("A", "op", 0, 10)
	b.Call(a, "A", "B", "op", 1, 2, nil)
	var asm graph.Assembler
	enc := asm.Assemble(b.Spans).AppendBinary(nil)
	for n := 0; n < len(enc); n++ {
		if _, err := graph.DecodeTrace(enc[:n]); !errors.Is(err, graph.ErrCorruptTrace) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
	if _, err := graph.DecodeTrace(append(enc, 0)); !errors.Is(err, graph.ErrCorruptTrace) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func FuzzDecodeTrace(f *testing.F) {
	b := New(3)
	a := b.Root("A", "op", 0, 10, Failed)
	s := b.Call(a, "A", "B", "op", 1, 2, C(Failed), Failed)
	b.Call(s, "B", "C", "op", 1, 2, C(Failed), Failed)
	var asm graph.Assembler
	f.Add(asm.Assemble(b.Spans).AppendBinary(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := graph.DecodeTrace(data)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		if again := tr.AppendBinary(nil); string(again) != string(data) {
			t.Skip("non-canonical encoding") // varints with padding decode too
		}
	})
}

func TestSpansCodec(t *testing.T) {
	b := New(5)
	a := b.Span(SpanID(9), graph.KindServer, "frontend", "GET /x", 1_000, 90_000, Failed, Claim(graph.ClaimClaimed))
	b.Call(a, "frontend", "route", "GET /r", 2_000, 8_000, C(Failed, Resend(1), Criteria, FailOpen(true), Target(77)), Failed)
	b.Span(a, graph.KindClient, "frontend", "GET", 3_000, 2_500, Peer("redis"), Suppressed)
	var e graph.TraceEncoder
	enc := e.AppendSpans(nil, b.Spans)
	got, err := graph.DecodeSpans(enc, nil, nil)
	if err != nil || !slices.Equal(got, b.Spans) {
		t.Fatalf("%v\n got %+v\nwant %+v", err, got, b.Spans)
	}
	for n := 0; n < len(enc); n++ {
		if _, err := graph.DecodeSpans(enc[:n], nil, nil); err == nil {
			t.Fatalf("truncated at %d decodes", n)
		}
	}
	// AppendSpansOf: the spans an order picks, as AppendSpans of them.
	order := []int32{int32(len(b.Spans) - 1), 0}
	picked := []graph.Span{b.Spans[len(b.Spans)-1], b.Spans[0]}
	if of, want := e.AppendSpansOf(nil, b.Spans, order), e.AppendSpans(nil, picked); string(of) != string(want) {
		t.Fatalf("AppendSpansOf %x, want %x", of, want)
	}
}
