package summarycache

import (
	"testing"

	"github.com/stormradius/stormradius/analysis"
)

func TestCache(t *testing.T) {
	enc := func(w *analysis.WindowSummary) []byte { return w.AppendBinary(nil) }
	v1 := enc(&analysis.WindowSummary{Window: 7, APIs: map[string]analysis.APIPotential{"a GET /x": {With: 1, Without: 4}}})
	v2 := enc(&analysis.WindowSummary{Window: 7, APIs: map[string]analysis.APIPotential{"a GET /x": {With: 2, Without: 5}}})
	var c Cache
	a, err := c.Decode(7, v1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Decode(7, append([]byte(nil), v1...))
	if a != b {
		t.Error("the same bytes were decoded again")
	}
	n, _ := c.Decode(7, v2)
	if n == a || n.APIs["a GET /x"].Without != 5 {
		t.Errorf("changed bytes gave %+v, want the new summary (without 5)", n.APIs)
	}
	o, _ := c.Decode(8, v1)
	if o == a || o.APIs["a GET /x"].Without != 4 {
		t.Errorf("another window shared a decoded summary: %+v", o.APIs)
	}
	if _, err := c.Decode(9, []byte("{broken")); err == nil {
		t.Error("a broken summary decoded")
	}
	// A summary's JSON is not a stored form: an error.
	js, err := n.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decode(9, js); err == nil {
		t.Error("a summary's JSON decoded")
	}
	if _, err := c.Decode(9, v2[:len(v2)-1]); err == nil {
		t.Error("a truncated binary summary decoded")
	}
	for w := int64(0); w < maxCachedSummaries+10; w++ {
		if _, err := c.Decode(100+w, v1); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > maxCachedSummaries {
		t.Errorf("cache holds %d summaries, bound %d", len(c.m), maxCachedSummaries)
	}
}
