package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// The one-pass series equals a Report per step, on every tier.
func TestAPISeriesEqualsReports(t *testing.T) {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Dir: t.TempDir(), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	c := storetest.NewCorpus(t, 600, start, 20*time.Second) // 22:00–01:20, across a day
	var batch []store.Change
	for i := range c.Traces {
		batch = append(batch, store.Change{New: c.Record(i, 1)})
	}
	if err := s.Apply(context.Background(), store.Batch{Changes: batch}); err != nil {
		t.Fatal(err)
	}
	api := c.Results[0].API
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct{ from, to, step time.Duration }{
		{0, 4 * time.Hour, time.Hour}, {2 * time.Hour, 3 * time.Hour, time.Minute}, {0, 26 * time.Hour, 24 * time.Hour},
		{7 * time.Minute, 3*time.Hour + 11*time.Minute, 13 * time.Minute},
	}
	for i := 0; i < 20; i++ {
		from := time.Duration(rng.Int64N(200)) * time.Minute
		cases = append(cases, struct{ from, to, step time.Duration }{from, from + time.Duration(1+rng.Int64N(200))*time.Minute, time.Duration(1+rng.Int64N(90)) * time.Minute})
	}
	seen := 0
	for _, cs := range cases {
		q := store.Query{From: start.Add(cs.from).UnixNano(), To: start.Add(cs.to).UnixNano(), API: api}
		got, err := s.APISeries(context.Background(), q, int64(cs.step/time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for from := q.From; from < q.To; from += int64(cs.step) {
			rep, err := s.Report(context.Background(), store.Query{From: from, To: min(from+int64(cs.step), q.To), API: api})
			if err != nil {
				t.Fatal(err)
			}
			want := figures(t, rep.APIs[api])
			g := ""
			if n < len(got) {
				g = figures(t, got[n])
			}
			if want != "none" {
				seen++
			}
			if g != want {
				t.Fatalf("%+v step %d:\n got %s\nwant %s", cs, n, g, want)
			}
			n++
		}
		if n != len(got) {
			t.Fatalf("%+v: %d steps, want %d", cs, len(got), n)
		}
	}
	if seen < 100 {
		t.Fatalf("only %d steps held traces", seen)
	}
}

// figures renders what a series reads of an aggregate (not the owners).
func figures(t *testing.T, a *analysis.APIAgg) string {
	if a == nil {
		return "none"
	}
	b, err := json.Marshal([]any{a.Traces, a.Failed, a.RootErrors, a.RemoteParent, a.RadiusSum, a.Suppressed, a.Hops,
		a.Counterfactual, a.Misattributed, a.Naive, a.Eligible, a.Fragments, a.Events, a.Radius, fmt.Sprint(a.Amplification)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
