package e2ekit

import (
	"strings"
	"testing"
)

// The comparison the suite rests on: equal documents give nothing, and
// each kind of difference is named with its path and both values.
func TestDiffDocs(t *testing.T) {
	want := []byte(`{"spans": 10, "fleet": {"max_radius": 2, "mean_radius": 1.5},
		"apis": [{"api": "frontend GET /dispatch", "max_radius": 2, "radius_histogram": {"1": 3, "2": 1}}],
		"incidents": []}`)
	same := []byte(`{"incidents": [], "apis": [{"radius_histogram": {"2": 1, "1": 3}, "max_radius": 2, "api": "frontend GET /dispatch"}],
		"fleet": {"mean_radius": 1.5, "max_radius": 2}, "spans": 10}`)
	if d := DiffDocs(same, want); len(d) != 0 {
		t.Errorf("equal documents (keys reordered): %q", d)
	}
	for _, c := range []struct {
		name, got string
		want      []string
	}{
		{"a figure", `{"spans": 10, "fleet": {"max_radius": 2, "mean_radius": 1.25},
			"apis": [{"api": "frontend GET /dispatch", "max_radius": 2, "radius_histogram": {"1": 3, "2": 1}}], "incidents": []}`,
			[]string{"fleet.mean_radius: got 1.25, want 1.5"}},
		{"a nested figure and a missing field", `{"spans": 10, "fleet": {"max_radius": 2, "mean_radius": 1.5},
			"apis": [{"api": "frontend GET /dispatch", "max_radius": 3, "radius_histogram": {"1": 3}}], "incidents": []}`,
			[]string{`apis[0 "frontend GET /dispatch"].max_radius: got 3, want 2`,
				`apis[0 "frontend GET /dispatch"].radius_histogram.2: missing, want 1`}},
		{"an extra element and field", `{"spans": 10, "fleet": {"max_radius": 2, "mean_radius": 1.5, "apis": 1},
			"apis": [{"api": "frontend GET /dispatch", "max_radius": 2, "radius_histogram": {"1": 3, "2": 1}}], "incidents": [{"id": "x"}]}`,
			[]string{"fleet.apis: got 1, not in the reference", "incidents: 1 elements, want 0",
				`incidents[0 "x"]: got {"id":"x"}, not in the reference`}},
		{"a number as a string", `{"spans": "10", "fleet": {"max_radius": 2, "mean_radius": 1.5},
			"apis": [{"api": "frontend GET /dispatch", "max_radius": 2, "radius_histogram": {"1": 3, "2": 1}}], "incidents": []}`,
			[]string{`spans: got "10", want 10`}},
		{"not a document", `{"spans": 10} trailing`, []string{`not a document (data after the document): {"spans": 10} trailing`}},
	} {
		if got := DiffDocs([]byte(c.got), want); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	// Elements are named by what identifies them.
	got := []byte(`{"edges": [{"caller": "frontend", "callee": "geo GET /geo", "calls": 3}], "services": [{"service": "geo", "requests": 1}]}`)
	ref := []byte(`{"edges": [{"caller": "frontend", "callee": "geo GET /geo", "calls": 4}], "services": [{"service": "geo", "requests": 2}]}`)
	wantDiffs := []string{`edges[0 "frontend -> geo GET /geo"].calls: got 3, want 4`, `services[0 "geo"].requests: got 1, want 2`}
	if d := DiffDocs(got, ref); strings.Join(d, "\n") != strings.Join(wantDiffs, "\n") {
		t.Errorf("named elements:\n got %q\nwant %q", d, wantDiffs)
	}
}
