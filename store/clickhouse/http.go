package clickhouse

import (
	"context"
	"strings"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Over ClickHouse's HTTP interface the store works as over the native protocol, but for one cost:
// clickhouse-go asks an insert's column types before every insert (DESCRIBE TABLE, a second round trip),
// where the native protocol has the server send them. The store tells it, from types read once per table.

// forgetTypes drops the column types known: the store's DDL may have changed them.
func (c *core) forgetTypes() {
	c.typesMu.Lock()
	c.types = nil
	c.typesMu.Unlock()
}

// insertTypes returns ctx with the types of the columns cols of table for clickhouse-go's HTTP insert
// (ch.WithColumnNamesAndTypes); ctx as it is over the native protocol, or when a column is not known
// (clickhouse-go then asks, and says what is wrong).
func (s *Store) insertTypes(ctx context.Context, table string, cols []string) (context.Context, error) {
	if s.core == nil || !s.http {
		return ctx, nil
	}
	s.typesMu.Lock()
	types := s.types[table]
	s.typesMu.Unlock()
	if types == nil || !hasAll(types, cols) {
		db, name := s.db, table
		if d, t, ok := strings.Cut(table, "."); ok {
			db, name = d, t
		}
		var err error
		if types, err = queryMap[string, string](ctx, s, "read column types", `SELECT name, type FROM system.columns WHERE database = `+
			quote(db)+` AND table = `+quote(name)); err != nil {
			return ctx, err
		}
		s.typesMu.Lock()
		if s.types == nil {
			s.types = map[string]map[string]string{}
		}
		s.types[table] = types
		s.typesMu.Unlock()
		if !hasAll(types, cols) {
			return ctx, nil
		}
	}
	nt := make([]ch.ColumnNameAndType, len(cols))
	for i, col := range cols {
		nt[i] = ch.ColumnNameAndType{Name: col, Type: types[col]}
	}
	return ch.Context(ctx, ch.WithColumnNamesAndTypes(nt)), nil
}

// hasAll reports whether types has every column of cols.
func hasAll(types map[string]string, cols []string) bool {
	for _, c := range cols {
		if _, ok := types[c]; !ok {
			return false
		}
	}
	return true
}
