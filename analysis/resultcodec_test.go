package analysis_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// Every result of a mixed corpus survives the binary encoding exactly
// (reflect.DeepEqual: stores compare decoded results with fresh ones), and
// every truncation of an encoding is an error.
func TestResultCodecRoundTrip(t *testing.T) {
	traces := corpus(t, 300)
	_, ws := analysis.InMemory(graph.Lists(clone(traces)), analysis.Config{}, 1)
	var asm graph.Assembler
	ev := analysis.NewEvaluator(analysis.Config{})
	var enc analysis.ResultEncoder
	failed := 0
	for i, spans := range clone(traces) {
		tr := asm.Assemble(spans)
		r := ev.Evaluate(tr, ws.State(ws.Of(tr)))
		if r.Failed() {
			failed++
		}
		r.Versions = []analysis.ServiceVersion{{Service: "front", Version: "v2"}}
		r.Split = i%7 == 3 // set aside: a flag bit of its own
		if i%5 == 1 {      // claim counts: a flag bit and a section of their own
			r.VersionClaims = []analysis.VersionClaims{{ServiceVersion: r.Versions[0], FailedHops: 37, ClaimedHops: 1,
				UnclaimedAnswers: 300, RetriedUnclaimed: 2, Suppressed: 1 << 40}}
		}
		b := enc.Append(nil, &r)
		got, err := analysis.DecodeResult(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, &r) {
			t.Fatalf("trace %d does not round-trip:\n got %+v\nwant %+v", i, got, r)
		}
		if i <= 1 {
			for n := 0; n < len(b); n++ {
				if _, err := analysis.DecodeResult(b[:n], nil); !errors.Is(err, analysis.ErrCorruptResult) {
					t.Fatalf("truncated at %d: %v", n, err)
				}
			}
		}
	}
	if failed == 0 {
		t.Fatal("no failed trace in the corpus")
	}
}

func FuzzDecodeResult(f *testing.F) {
	var enc analysis.ResultEncoder
	f.Add(enc.Append(nil, &analysis.TraceResult{API: "a b", Events: []analysis.Event{{Owner: graph.Node{Service: "x"}}}, Services: []analysis.ServiceResult{{Service: "x"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := analysis.DecodeResult(b, nil)
		if err != nil {
			return
		}
		rep := analysis.NewReport()
		rep.Add(r, 1)
		rep.Add(r, -1)
	})
}
