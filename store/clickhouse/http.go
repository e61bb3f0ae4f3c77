package clickhouse

import (
	"context"
	"strings"
	"sync"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Over ClickHouse's HTTP interface (a DSN of http:// or https://, see
// Options.DSN) the store works as over the native protocol: clickhouse-go
// sends a query's settings as URL parameters, the trace ids of withIDs as
// an external table in a multipart body, an insert's block in the Native
// format. One thing costs more: an insert's column types, which the
// native protocol has the server send when the insert starts, are asked
// for by clickhouse-go before every insert (DESCRIBE TABLE), a second
// round trip each. The store tells it instead, from the types it reads
// once per table (insertTypes).

// columnTypes holds the column types of the tables the store inserts
// into over HTTP.
type columnTypes struct {
	mu     sync.Mutex
	tables map[string]map[string]string // by table as inserts name it, by column
}

// forget drops what is known: the store's DDL may have changed it.
func (c *columnTypes) forget() {
	c.mu.Lock()
	c.tables = nil
	c.mu.Unlock()
}

// insertTypes returns ctx with the types of the columns cols of table for
// clickhouse-go's HTTP insert (ch.WithColumnNamesAndTypes); ctx as it is
// over the native protocol, or when a column is not known (clickhouse-go
// then asks, and says what is wrong).
func (s *Store) insertTypes(ctx context.Context, table string, cols []string) (context.Context, error) {
	if s.core == nil || !s.http {
		return ctx, nil
	}
	c := &s.types
	c.mu.Lock()
	types := c.tables[table]
	c.mu.Unlock()
	if types == nil || !hasAll(types, cols) {
		db, name := s.db, table
		if d, t, ok := strings.Cut(table, "."); ok {
			db, name = d, t
		}
		types = map[string]string{}
		if err := s.query(ctx, "read column types", `SELECT name, type FROM system.columns WHERE database = `+quote(db)+
			` AND table = `+quote(name), func(r driver.Rows) error {
			var col, typ string
			if err := r.Scan(&col, &typ); err != nil {
				return err
			}
			types[col] = typ
			return nil
		}); err != nil {
			return ctx, err
		}
		c.mu.Lock()
		if c.tables == nil {
			c.tables = map[string]map[string]string{}
		}
		c.tables[table] = types
		c.mu.Unlock()
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
