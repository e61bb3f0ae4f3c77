package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/stormradius/stormradius/analysis"
)

// rollupTable is a rollup table and the figures it holds, as
// analysis.Figures places them: the counts of one scope (a row per
// bucket and key), or one histogram (a row per bucket, key and value,
// the count in column n). Every table has the columns tier and bucket,
// then the key columns of its scope.
type rollupTable struct {
	name  string
	scope analysis.Scope
	figs  []*analysis.Figure
	keys  []string // key columns, after tier and bucket
	// upsert adds a delta row to the stored one; read (by API: readAPI)
	// sums the rows of a range of buckets of one tier by key; series (an
	// API's tables) sums one API's by step (Store.APISeries).
	upsert, read, readAPI, series string
}

// hist reports whether t holds a histogram.
func (t *rollupTable) hist() bool { return t.scope.Histogram() }

// rollupTables are the rollup tables, in the order of analysis.Figures.
var rollupTables = func() []*rollupTable {
	var out []*rollupTable
	byName := map[string]*rollupTable{}
	for i := range analysis.Figures {
		f := &analysis.Figures[i]
		t := byName[f.SQLite.Table]
		if t == nil {
			t = &rollupTable{name: f.SQLite.Table, scope: f.Scope, keys: scopeKeys(f.Scope)}
			byName[t.name] = t
			out = append(out, t)
		}
		t.figs = append(t.figs, f)
	}
	for _, t := range out {
		cols := append([]string{"tier", "bucket"}, t.keys...)
		conflict := strings.Join(cols, ", ")
		var set []string
		if t.hist() {
			cols = append(cols, t.figs[0].SQLite.Column, analysis.HistCountColumn)
			conflict += ", " + t.figs[0].SQLite.Column
			set = []string{t.figs[0].Upsert()}
		} else {
			for _, f := range t.figs {
				cols = append(cols, f.SQLite.Column)
				set = append(set, f.Upsert())
			}
		}
		t.upsert = `INSERT INTO ` + t.name + ` (` + strings.Join(cols, ", ") + `) VALUES (?` + strings.Repeat(",?", len(cols)-1) +
			`) ON CONFLICT (` + conflict + `) DO UPDATE SET ` + strings.Join(set, ", ")
		const where = `tier = ? AND bucket >= ? AND bucket < ?`
		t.read = t.selectSQL(t.keys, where)
		if t.scope.PerAPI() {
			t.readAPI = t.selectSQL(t.keys, where+` AND api = ?`)
		}
		if t.scope.Aggregate() == analysis.ScopeAPI {
			// i = (bucket·size − lo) / step: the step a bucket falls in.
			t.series = t.selectSQL([]string{`(bucket * ? - ?) / ? AS i`}, where+` AND api = ?`)
		}
	}
	return out
}()

// scopeKeys returns the key columns of the tables of scope s.
func scopeKeys(s analysis.Scope) []string {
	switch s.Aggregate() {
	case analysis.ScopeAPI:
		return []string{"api"}
	case analysis.ScopeOwner:
		return []string{"api", "service", "operation"}
	case analysis.ScopeService:
		return []string{"service"}
	case analysis.ScopeNode:
		return []string{"service", "operation"}
	case analysis.ScopeVersion:
		return []string{"api", "service", "version"}
	}
	return nil
}

// keyArgs appends the values of the key columns of scope s at k.
func keyArgs(args []any, s analysis.Scope, k analysis.Key) []any {
	switch s.Aggregate() {
	case analysis.ScopeAPI:
		return append(args, k.API)
	case analysis.ScopeOwner:
		return append(args, k.API, k.Service, k.Operation)
	case analysis.ScopeService:
		return append(args, k.Service)
	case analysis.ScopeNode:
		return append(args, k.Service, k.Operation)
	case analysis.ScopeVersion:
		return append(args, k.API, k.Service, k.Version)
	}
	return args
}

// keyOf is the inverse of keyArgs: the key of a row's key columns.
func keyOf(s analysis.Scope, v []string) analysis.Key {
	switch s.Aggregate() {
	case analysis.ScopeAPI:
		return analysis.Key{API: v[0]}
	case analysis.ScopeOwner:
		return analysis.Key{API: v[0], Service: v[1], Operation: v[2]}
	case analysis.ScopeService:
		return analysis.Key{Service: v[0]}
	case analysis.ScopeNode:
		return analysis.Key{Service: v[0], Operation: v[1]}
	case analysis.ScopeVersion:
		return analysis.Key{API: v[0], Service: v[1], Version: v[2]}
	}
	return analysis.Key{}
}

// selectSQL returns the query summing t's figures over the rows cond
// selects, grouped by the key expressions keys (and a histogram's value;
// a key "expr AS name" is grouped by its name):
// its columns are the keys, a histogram's value, then the figures.
// Without keys it returns one row, of zeros when nothing matched.
func (t *rollupTable) selectSQL(keys []string, cond string) string {
	sel := append([]string(nil), keys...)
	var group []string
	for _, k := range keys {
		// An expression named "… AS x" is grouped by its name.
		if i := strings.LastIndex(k, " AS "); i >= 0 {
			k = k[i+len(" AS "):]
		}
		group = append(group, k)
	}
	var sums []string
	for _, f := range t.figs {
		agg := f.Aggregate(analysis.SQLite)
		if len(keys) == 0 {
			agg = "coalesce(" + agg + ", 0)"
		}
		sums = append(sums, agg)
	}
	having := ""
	if t.hist() {
		sel = append(sel, t.figs[0].SQLite.Column)
		group = append(group, t.figs[0].SQLite.Column)
		// A value whose counts cancel out over the range is not in it.
		having = ` HAVING ` + t.figs[0].Aggregate(analysis.SQLite) + ` <> 0`
	}
	q := `SELECT ` + strings.Join(append(sel, sums...), ", ") + ` FROM ` + t.name + ` WHERE ` + cond
	if len(group) > 0 {
		q += ` GROUP BY ` + strings.Join(group, ", ") + having
	}
	return q
}

// write adds the figures of aggregate a (at key k, of t's scope) to the
// rollups of (tier, bucket).
func (t *rollupTable) write(ctx context.Context, tx *txStatements, tier int, bucket int64, k analysis.Key, a analysis.Agg) error {
	args := keyArgs([]any{tier, bucket}, t.scope, k)
	if t.hist() {
		f := t.figs[0]
		var err error
		f.Hist(a).Each(func(v float64, n int64) {
			if err != nil {
				return
			}
			var value any = v
			if f.Type == analysis.TypeIntHist {
				value = int64(v)
			}
			_, err = tx.ExecContext(ctx, t.upsert, append(args, value, n)...)
		})
		return err
	}
	zero := true
	for _, f := range t.figs {
		n := *f.Count(a)
		zero = zero && n == 0
		args = append(args, n)
	}
	if zero && len(t.keys) == 0 {
		return nil // the totals row of a bucket is written when something counted
	}
	_, err := tx.ExecContext(ctx, t.upsert, args...)
	return err
}

// upsertReport adds report d to the rollups of (tier, bucket).
func upsertReport(ctx context.Context, tx *txStatements, tier int, bucket int64, d *analysis.Report) error {
	for _, t := range rollupTables {
		var err error
		d.Each(t.scope, func(k analysis.Key, a analysis.Agg) {
			if err == nil {
				err = t.write(ctx, tx, tier, bucket, k, a)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// scanTable runs q, a selectSQL of t, and calls fn with every row: its
// keys scanned into keys, then a histogram's value and the figures'
// sums, in the order of t.figs.
func (s *Store) scanTable(ctx context.Context, t *rollupTable, q string, args []any, keys []any,
	fn func(value float64, sums []int64) error) error {
	var value float64
	sums := make([]int64, len(t.figs))
	dest := append([]any(nil), keys...)
	if t.hist() {
		dest = append(dest, &value)
	}
	for i := range sums {
		dest = append(dest, &sums[i])
	}
	return s.scan(ctx, q, args, func(rows *sql.Rows) error {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		return fn(value, sums)
	})
}

// readTable adds the rollups of t in one bucket range to rep, the per-API
// ones of api only unless it is "".
func (s *Store) readTable(ctx context.Context, t *rollupTable, br bucketRange, api string, rep *analysis.Report) error {
	q, args := t.read, []any{br.tier, br.lo, br.hi}
	if api != "" && t.scope.PerAPI() {
		q, args = t.readAPI, append(args, api)
	}
	keys := make([]string, len(t.keys))
	dest := make([]any, len(keys))
	for i := range keys {
		dest[i] = &keys[i]
	}
	return s.scanTable(ctx, t, q, args, dest, func(value float64, sums []int64) error {
		t.add(rep.At(t.scope, keyOf(t.scope, keys)), value, sums)
		return nil
	})
}

// add adds a row of t read back (its histogram value, its sums) to a.
func (t *rollupTable) add(a analysis.Agg, value float64, sums []int64) {
	for i, f := range t.figs {
		f.Add(a, value, sums[i])
	}
}
