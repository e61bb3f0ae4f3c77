package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// SummaryFormats checks that s writes window summaries in the binary form
// (analysis.WindowSummary.AppendBinary) and reads them back, and that a
// row in any other form — a summary's JSON included — is reported corrupt
// (store.ErrCorrupt), not read as a summary. putRaw stores b as window
// win's summary row as it is; readRaw reads the row of window win back as
// stored.
func SummaryFormats(t *testing.T, s store.Store, putRaw func(win int64, b []byte) error, readRaw func(win int64) ([]byte, error)) {
	t.Helper()
	ctx := context.Background()
	mk := func(win int64) *analysis.WindowSummary {
		db := graph.Node{Service: "db", Operation: "query"}
		g := graph.NewAPIGraph("front GET /")
		g.Traces = win
		g.Nodes[db] = &graph.NodeStats{Hops: 3, Failed: 1, FailedBy: [4]int64{0, 1}}
		g.Edges[graph.Pair{From: graph.Node{Service: "front", Operation: "GET /"}, To: db}] = &graph.EdgeStats{Calls: 2, Attempts: 3, ByAttempts: [graph.MaxAttemptBuckets]int64{1, 1}}
		return &analysis.WindowSummary{Window: win,
			Edges:  map[graph.Edge]*graph.EdgeStats{{Caller: "front", Callee: db}: {Calls: win, Attempts: win}},
			APIs:   map[string]analysis.APIPotential{"front GET /": {With: 1, Without: 2}},
			Graphs: map[string]*graph.APIGraph{"front GET /": g}}
	}
	if err := s.PutSummaries(ctx, []*analysis.WindowSummary{mk(10)}); err != nil {
		t.Fatal(err)
	}
	b, err := readRaw(10)
	if err != nil {
		t.Fatal(err)
	}
	if want := mk(10).AppendBinary(nil); string(b) != string(want) {
		t.Fatalf("stored %q, want the binary form", b)
	}
	got, err := s.Summaries(ctx, 10, 11)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], mk(10)) {
		t.Fatalf("summaries %+v, %v; want window 10's", got, err)
	}
	js, err := json.Marshal(mk(11))
	if err != nil {
		t.Fatal(err)
	}
	if err := putRaw(11, js); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Summaries(ctx, 10, 11); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a summary stored as JSON gave %d summaries, %v; want an error wrapping store.ErrCorrupt", len(got), err)
	}
	// The row beside it still reads.
	if got, err := s.Summaries(ctx, 10, 10); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], mk(10)) {
		t.Fatalf("window 10 beside a corrupt row: %+v, %v", got, err)
	}
}
