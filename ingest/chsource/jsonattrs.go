package chsource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stormradius/stormradius/ingest"
)

// The exporter's json: true tables keep attributes in the JSON type: a key
// with dots is a path of nested objects ("http.route" is {"http":
// {"route": …}}), and values keep their types. The source reads them as
// JSON text (toJSONString) and flattens them here: keys joined with '.',
// values written as the Map tables write them (pcommon.Value.AsString: a
// number as its decimal, a bool as true or false, an array as JSON), so
// that ingest.Decoder.AppendRow reads both kinds of table alike.

// attrFilter keeps the span attributes the decoder reads.
type attrFilter struct {
	keys     map[string]bool
	prefixes []string
}

func newAttrFilter(ra ingest.RowAttributes) attrFilter {
	f := attrFilter{keys: map[string]bool{}, prefixes: ra.SpanPrefixes}
	for _, k := range ra.Span {
		f.keys[k] = true
	}
	return f
}

func (f attrFilter) keep(k string) bool {
	if f.keys[k] {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// flattenJSON appends, sorted by key, the leaves of the JSON object text
// that keep keeps, as the Map tables would hold them.
func flattenJSON(text string, keep func(string) bool, keys, vals []string) ([]string, []string, error) {
	if text == "" || text == "{}" {
		return keys, vals, nil
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return keys, vals, fmt.Errorf("attributes %.80q: %w", text, err)
	}
	start := len(keys)
	var walk func(prefix string, m map[string]any) error
	walk = func(prefix string, m map[string]any) error {
		for k, v := range m {
			path := prefix + k
			if sub, ok := v.(map[string]any); ok {
				if err := walk(path+".", sub); err != nil {
					return err
				}
				continue
			}
			if !keep(path) || v == nil {
				continue
			}
			s, err := asString(v)
			if err != nil {
				return err
			}
			keys, vals = append(keys, path), append(vals, s)
		}
		return nil
	}
	if err := walk("", m); err != nil {
		return keys, vals, err
	}
	sortPairs(keys[start:], vals[start:])
	return keys, vals, nil
}

// asString writes a JSON value as pcommon.Value.AsString writes the value
// it came from.
func asString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// sortPairs sorts keys, and vals with them.
func sortPairs(keys, vals []string) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	k2, v2 := slices.Clone(keys), slices.Clone(vals)
	for i, j := range idx {
		keys[i], vals[i] = k2[j], v2[j]
	}
}
