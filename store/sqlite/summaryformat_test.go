package sqlite

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
)

// Summaries are written in the binary form; the JSON rows earlier
// releases wrote still read, beside binary ones.
func TestSummaryFormats(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	if _, err := s.resW.ExecContext(ctx, `INSERT INTO summaries (win, summary) VALUES (?, ?)`, 11, old); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if err := s.resR.QueryRowContext(ctx, `SELECT summary FROM summaries WHERE win = 10`).Scan(&b); err != nil {
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
	// A corrupt row is an error, not a panic.
	if _, err := s.resW.ExecContext(ctx, `INSERT OR REPLACE INTO summaries (win, summary) VALUES (?, ?)`, 12, b[:len(b)-2]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Summaries(ctx, 12, 12); err == nil {
		t.Fatal("a truncated summary read")
	}
}
