package clickhouse

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store/internal/rollup"
)

// Values in SQL text are formatted here, never by the driver, so that the text sent is exactly what
// scripts/chdb-check.sh runs on a current release; many trace ids to look up go as data beside the
// query (withIDs), which the check feeds it as a temporary table.

// quote returns s as a ClickHouse string literal.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

const hexDigits = "0123456789abcdef"

// quoteID returns a trace id as a FixedString(16) literal.
func quoteID(b *strings.Builder, id graph.TraceID) {
	b.WriteByte('\'')
	for _, c := range id {
		b.WriteString(`\x`)
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	b.WriteByte('\'')
}

// idsTable is the external table withIDs sends.
const idsTable = "_ids"

// withIDs returns ctx with ids as the external table _ids (a FixedString(16) column, id), for a query's
// `IN (SELECT id FROM _ids)`.
func (s *Store) withIDs(ctx context.Context, ids []graph.TraceID) (context.Context, error) {
	t, err := ext.NewTable(idsTable, ext.Column("id", "FixedString(16)"))
	for i := 0; err == nil && i < len(ids); i++ {
		err = t.Append(ids[i][:])
	}
	if err != nil {
		return ctx, fmt.Errorf("clickhouse: trace ids as an external table: %w", err)
	}
	if s.sentIDs != nil {
		s.sentIDs(ids)
	}
	return ch.Context(ctx, ch.WithExternalTable(t)), nil
}

// light marks the queries of ctx as light (a point lookup, a few rows, a system table): one thread each
// on the server. A point lookup gains nothing from a second thread, and many queries at once fight for
// a small server's cores (5,651 requests/s against 3,525–4,071; docs/PERFORMANCE.md).
func light(ctx context.Context) context.Context {
	return ch.Context(ctx, ch.WithSettings(ch.Settings{"max_threads": 1}))
}

// idList returns ids as a comma-separated list of literals.
func idList(ids []graph.TraceID) string {
	var b strings.Builder
	b.Grow(len(ids) * 68)
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		quoteID(&b, id)
	}
	return b.String()
}

// intList returns the sorted, distinct xs as a comma-separated list.
func intList[T int64 | uint64](xs []T) string {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	xs = slices.Compact(xs)
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		if v, ok := any(x).(int64); ok {
			b.WriteString(strconv.FormatInt(v, 10))
		} else {
			b.WriteString(strconv.FormatUint(uint64(x), 10))
		}
	}
	return b.String()
}

func itoa(x int64) string  { return strconv.FormatInt(x, 10) }
func utoa(x uint64) string { return strconv.FormatUint(x, 10) }

// Bounds for integers written into SQL: wide enough for any unix minute or window, far from overflow.
const (
	minBound = -1 << 62
	maxBound = 1 << 62
)

func clamp(x, lo, hi int64) int64 { return min(max(x, lo), hi) }

const (
	nsPerMinute = int64(time.Minute)
	nsPerDay    = int64(24 * time.Hour)
	maxDay      = 49710 // the last day every supported server stores in a Date (2106-02-07)
)

// dayOf returns the partition day (days since the epoch) of an instant in unix nanoseconds, clamped to
// what a Date holds.
func dayOf(ns int64) int64 { return clamp(rollup.FloorDiv(ns, nsPerDay), 0, maxDay) }

// dayOfMinute returns the partition day of a unix minute.
func dayOfMinute(m int64) int64 { return clamp(rollup.FloorDiv(m, 24*60), 0, maxDay) }

// dayDate returns day as the time.Time a Date column takes.
func dayDate(d int64) time.Time { return time.Unix(d*86400, 0).UTC() }

// keys returns the keys of a set, sorted.
func keys(m map[int64]struct{}) []int64 {
	out := slices.AppendSeq(make([]int64, 0, len(m)), maps.Keys(m))
	slices.Sort(out)
	return out
}
