package e2ekit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// SameDoc returns nil when got is the document want, else an error
// listing the fields that differ (got, want; the first 40 of them).
func SameDoc(got, want []byte) error {
	diffs := DiffDocs(got, want)
	if len(diffs) == 0 {
		return nil
	}
	const shown = 40
	n, more := len(diffs), ""
	if n > shown {
		more = fmt.Sprintf("\n... and %d more", n-shown)
		diffs = diffs[:shown]
	}
	return fmt.Errorf("%d field(s) (got, want):\n%s%s", n, strings.Join(diffs, "\n"), more)
}

// DecodeInto decodes one JSON value from b into v, numbers kept as
// written (json.Number), refusing trailing data.
func DecodeInto(b []byte, v any) error {
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

// DecodeDoc decodes a docs/SPEC.md §5.2 document as a JSON object.
func DecodeDoc(b []byte) (map[string]any, error) {
	var d map[string]any
	if err := DecodeInto(b, &d); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("not a JSON object")
	}
	return d, nil
}

// DiffDocs lists the fields in which the document got differs from want,
// one line each: "path: got G, want W". Numbers compare as written, so
// 1.5 and 1.50 differ (both documents come from the same encoder).
func DiffDocs(got, want []byte) []string {
	w, err := DecodeDoc(want)
	if err != nil {
		return []string{"the reference is not a document: " + err.Error()}
	}
	g, err := DecodeDoc(got)
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
