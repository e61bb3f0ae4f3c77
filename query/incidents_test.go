package query_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
)

// The watch reports the rollout's incidents as a live service would see
// them, checking every minute: each opens, grows, then closes five quiet
// minutes after its last hot one.
func TestIncidentWatch(t *testing.T) {
	traces, err := fixture.Rollout("")
	if err != nil {
		t.Fatal(err)
	}
	// Load the rollout minute by minute and check after each.
	slices.SortFunc(traces, func(a, b []graph.Span) int { return cmp.Compare(minStart(a), minStart(b)) })
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := query.NewIncidentWatch(query.New(st))
	var log []string
	next := 0
	for m := 1; m <= 30; m++ {
		end := fixture.Start.Add(time.Duration(m) * time.Minute)
		lo := next
		for next < len(traces) && minStart(traces[next]) < end.UnixNano() {
			next++
		}
		fixture.Load(t, st, traces[lo:next])
		changes, err := w.Check(context.Background(), end)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			log = append(log, end.Format("15:04")+" "+c.Change+" "+c.Incident.Start.Format("15:04")+"–"+c.Incident.End.Format("15:04"))
		}
	}
	// By hand (internal/fixture): hot minutes 3–6, 12–15 and 22–25. Data
	// up to minute m is checked at m: a hot minute shows at its end;
	// "now" is the minute after the last one with data, so an incident
	// closes at its last hot minute + 5 quiet minutes.
	want := []string{
		"10:04 opened 10:03–10:04", "10:05 updated 10:03–10:05", "10:06 updated 10:03–10:06", "10:07 updated 10:03–10:07",
		"10:12 closed 10:03–10:07",
		"10:13 opened 10:12–10:13", "10:14 updated 10:12–10:14", "10:15 updated 10:12–10:15", "10:16 updated 10:12–10:16",
		"10:21 closed 10:12–10:16",
		"10:23 opened 10:22–10:23", "10:24 updated 10:22–10:24", "10:25 updated 10:22–10:25", "10:26 updated 10:22–10:26",
	}
	if len(log) != len(want) {
		t.Fatalf("changes:\n%v\nwant\n%v", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Errorf("change %d: %s, want %s", i, log[i], want[i])
		}
	}
}

func minStart(spans []graph.Span) int64 {
	m := spans[0].Start
	for _, s := range spans {
		m = min(m, s.Start)
	}
	return m
}
