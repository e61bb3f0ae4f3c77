package clickhouse

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// A new database holds the tables the store uses and none of those later
// migrations replaced (migrations 0011 and 0013 drop them); every table
// the TTL and retention name exists.
func TestTables(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	var tables []string
	err := s.query(context.Background(), "list tables", `SELECT name FROM system.tables WHERE database = `+quote(s.db),
		func(r driver.Rows) error {
			var name string
			if err := r.Scan(&name); err != nil {
				return err
			}
			tables = append(tables, name)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"spans", "writes", "trace_index", "rollup_totals", "rollup_api", "rollup_radius",
		"rollup_amp", "rollup_owner", "rollup_service", "writes_mv", "trace_index_mv", "states", "dirty", "rollup_gens"} {
		if slices.Contains(tables, gone) {
			t.Errorf("table %s is still there (tables: %v)", gone, tables)
		}
	}
	for _, want := range append(slices.Clone(ttlTables), "meta", "leases", "schema_migrations") {
		if !slices.Contains(tables, want) {
			t.Errorf("no table %s (tables: %v)", want, tables)
		}
	}
}
