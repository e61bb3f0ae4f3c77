package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
)

// Every figure's stored place exists in a fresh store (migrations
// applied): its table, the key columns of its scope and its column (a
// histogram's value and count columns).
func TestFiguresSchema(t *testing.T) {
	x := context.Background()
	s, err := Open(x, Options{Dir: t.TempDir(), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	columns := func(table string) map[string]bool {
		t.Helper()
		rows, err := s.resR.QueryContext(x, `SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]bool{}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			out[name] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, f := range analysis.Figures {
		have := columns(f.SQLite.Table)
		if len(have) == 0 {
			t.Errorf("figure %s: no table %s", f.Name, f.SQLite.Table)
			continue
		}
		want := append([]string{"tier", "bucket", f.SQLite.Column}, scopeKeys(f.Scope)...)
		if f.Scope.Histogram() {
			want = append(want, analysis.HistCountColumn)
		}
		for _, c := range want {
			if !have[c] {
				t.Errorf("figure %s: table %s has no column %s", f.Name, f.SQLite.Table, c)
			}
		}
	}
}
