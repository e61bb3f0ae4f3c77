// The field-by-field comparison of two docs/SPEC.md §5.2 documents: a
// copy of e2e/collector/diff_test.go, with its test.

package loadbalancing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
)

// decodeInto decodes one JSON value from b into v, numbers kept as
// written (json.Number), refusing trailing data.
func decodeInto(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the document")
	}
	return nil
}

// decodeDoc decodes a docs/SPEC.md §5.2 document as a JSON object.
func decodeDoc(b []byte) (map[string]any, error) {
	var d map[string]any
	if err := decodeInto(b, &d); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("not a JSON object")
	}
	return d, nil
}

// diffDocs lists the fields in which the document got differs from want,
// one line each: "path: got G, want W". Numbers compare as written, so
// 1.5 and 1.50 differ (both documents come from the same encoder).
func diffDocs(got, want []byte) []string {
	w, err := decodeDoc(want)
	if err != nil {
		return []string{"the reference is not a document: " + err.Error()}
	}
	g, err := decodeDoc(got)
	if err != nil {
		return []string{fmt.Sprintf("not a document (%v): %s", err, short(string(got)))}
	}
	var out []string
	diffValue("", g, w, &out)
	return out
}

func diffValue(path string, got, want any, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			gv, gok := g[k]
			wv, wok := w[k]
			switch {
			case !gok:
				*out = append(*out, fmt.Sprintf("%s: missing, want %s", p, render(wv)))
			case !wok:
				*out = append(*out, fmt.Sprintf("%s: got %s, not in the reference", p, render(gv)))
			default:
				diffValue(p, gv, wv, out)
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok {
			break
		}
		if len(g) != len(w) {
			*out = append(*out, fmt.Sprintf("%s: %d elements, want %d", path, len(g), len(w)))
		}
		for i := 0; i < max(len(g), len(w)); i++ {
			switch {
			case i >= len(g):
				*out = append(*out, fmt.Sprintf("%s: missing, want %s", elem(path, i, w[i]), render(w[i])))
			case i >= len(w):
				*out = append(*out, fmt.Sprintf("%s: got %s, not in the reference", elem(path, i, g[i]), render(g[i])))
			default:
				diffValue(elem(path, i, w[i]), g[i], w[i], out)
			}
		}
		return
	default:
		if fmt.Sprint(got) == fmt.Sprint(want) && sameKind(got, want) {
			return
		}
	}
	*out = append(*out, fmt.Sprintf("%s: got %s, want %s", path, render(got), render(want)))
}

// sameKind reports whether two decoded scalars are of one JSON type (so
// that "1" and 1 differ).
func sameKind(a, b any) bool { return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) }

// elem names element i of the array at path, with what identifies it in
// the document when the element says: an API, an incident id, an edge's
// caller and callee, a service (and operation).
func elem(path string, i int, v any) string {
	s := fmt.Sprintf("%s[%d]", path, i)
	m, ok := v.(map[string]any)
	if !ok {
		return s
	}
	str := func(k string) string { x, _ := m[k].(string); return x }
	var id string
	switch {
	case str("api") != "":
		id = str("api")
	case str("id") != "":
		id = str("id")
	case str("caller") != "" || str("callee") != "":
		id = str("caller") + " -> " + str("callee")
	case str("service") != "":
		id = strings.TrimSpace(str("service") + " " + str("operation"))
	default:
		return s
	}
	return fmt.Sprintf("%s[%d %q]", path, i, id)
}

func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return short(string(b))
}

func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// The comparison the suite rests on: equal documents give nothing, and
// each kind of difference is named with its path and both values.
func TestDiffDocs(t *testing.T) {
	want := []byte(`{"spans": 10, "fleet": {"max_radius": 2, "mean_radius": 1.5},
		"apis": [{"api": "frontend GET /dispatch", "max_radius": 2, "radius_histogram": {"1": 3, "2": 1}}],
		"incidents": []}`)
	same := []byte(`{"incidents": [], "apis": [{"radius_histogram": {"2": 1, "1": 3}, "max_radius": 2, "api": "frontend GET /dispatch"}],
		"fleet": {"mean_radius": 1.5, "max_radius": 2}, "spans": 10}`)
	if d := diffDocs(same, want); len(d) != 0 {
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
		if got := diffDocs([]byte(c.got), want); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	// Elements are named by what identifies them.
	got := []byte(`{"edges": [{"caller": "frontend", "callee": "geo GET /geo", "calls": 3}], "services": [{"service": "geo", "requests": 1}]}`)
	ref := []byte(`{"edges": [{"caller": "frontend", "callee": "geo GET /geo", "calls": 4}], "services": [{"service": "geo", "requests": 2}]}`)
	wantDiffs := []string{`edges[0 "frontend -> geo GET /geo"].calls: got 3, want 4`, `services[0 "geo"].requests: got 1, want 2`}
	if d := diffDocs(got, ref); strings.Join(d, "\n") != strings.Join(wantDiffs, "\n") {
		t.Errorf("named elements:\n got %q\nwant %q", d, wantDiffs)
	}
}
