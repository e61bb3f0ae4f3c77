package clickhouse

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// Summaries are written in the binary form (any bytes go in a String
// column); the JSON rows earlier releases wrote still read, beside binary
// ones.
func TestSummaryFormats(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
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
	old, _ := json.Marshal(mk(11))
	if err := s.insert(ctx, "put old summary", "summaries", []string{"day", "win", "version", "summary"},
		[]time.Time{dayDate(dayOf(11 * int64(time.Hour)))}, []int64{11}, []uint64{s.versions(1)}, []string{string(old)}); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if err := s.queryRow(ctx, "read summary", `SELECT summary FROM summaries FINAL WHERE win = 10`, &b); err != nil {
		t.Fatal(err)
	}
	if want := mk(10).AppendBinary(nil); string(b) != string(want) {
		t.Fatalf("stored %q, want the binary form", b)
	}
	got, err := s.Summaries(ctx, 10, 11)
	if err != nil || len(got) != 2 {
		t.Fatalf("%d summaries, %v", len(got), err)
	}
	for i, w := range got {
		if want := mk(10 + int64(i)); !reflect.DeepEqual(w, want) {
			t.Errorf("window %d: %+v, want %+v", 10+i, w, want)
		}
	}
}
