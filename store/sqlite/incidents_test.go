package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// Hot minutes are found through the partial index of minutes with at
// least 10 owned failures, not by walking every node's minutes.
func TestHotMinutesUseTheIndex(t *testing.T) {
	s, err := Open(context.Background(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		minOwned int64
		index    bool
	}{{10, true}, {25, true}, {3, false}} {
		var plan []string
		err := s.scan(context.Background(), "EXPLAIN QUERY PLAN "+hotMinutesSQL(c.minOwned), []any{0, 100, c.minOwned, 0.05},
			func(rows *sql.Rows) error {
				var id, parent, unused any
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					return err
				}
				plan = append(plan, detail)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if uses := strings.Contains(strings.Join(plan, "; "), "rollup_node_hot"); uses != c.index {
			t.Errorf("min owned %d: plan %v", c.minOwned, plan)
		}
	}
}
