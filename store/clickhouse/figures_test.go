package clickhouse

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
)

// Every figure is a stat of a fresh store's rollups table (migrations
// applied), its Name the label of its code; and every stat is a
// figure's (a row of another would be read as nothing).
func TestFiguresSchema(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	var typ string
	if err := s.queryRow(context.Background(), "read the stat column", `SELECT type FROM system.columns WHERE database = `+
		quote(s.db)+` AND table = 'rollups' AND name = 'stat'`, &typ); err != nil {
		t.Fatal(err)
	}
	labels := map[string]int8{}
	for _, m := range regexp.MustCompile(`'([^']*)' = (-?\d+)`).FindAllStringSubmatch(typ, -1) {
		code, err := strconv.ParseInt(m[2], 10, 8)
		if err != nil {
			t.Fatal(err)
		}
		labels[m[1]] = int8(code)
	}
	if len(labels) == 0 {
		t.Fatalf("no Enum8 labels in the stat column's type %q", typ)
	}
	figures := map[string]bool{}
	for _, f := range analysis.Figures {
		figures[f.Name] = true
		if code, ok := labels[f.Name]; !ok || code != f.Stat {
			t.Errorf("figure %s: stat %d, the rollups table has %q = %d (%v)", f.Name, f.Stat, f.Name, code, ok)
		}
	}
	for label, code := range labels {
		if !figures[label] {
			t.Errorf("stat %q = %d is no figure's", label, code)
		}
	}
}
