package main

import (
	"encoding/json"
	"io"

	"github.com/stormradius/stormradius/analysis"
)

// writeJSON writes v as indented JSON, as every command's --format json.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeDocument writes the docs/SPEC.md §5.2 document as `analyze` and
// `report` print it: the table, or JSON.
func writeDocument(w io.Writer, doc *analysis.Document, format string) error {
	if format == "table" {
		return doc.WriteTable(w)
	}
	return writeJSON(w, doc)
}
