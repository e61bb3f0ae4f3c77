package clickhouse

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An insert of more than insertChunk bytes of strings, sent as several
// blocks, is stored as one part (level 0: not a merge of several) holding
// every row as sent.
func TestChunkedInsertOnePart(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	ctx := context.Background()
	if err := s.exec(ctx, "create probe", `CREATE TABLE chunk_probe (k UInt64, v String) ENGINE = MergeTree ORDER BY k`); err != nil {
		t.Fatal(err)
	}
	const n, width = 3000, 1000 // 3 MB of strings
	ks, vs := make([]uint64, n), make([]string, n)
	for i := range ks {
		ks[i], vs[i] = uint64(i), strings.Repeat(string(rune('a'+i%26)), width)
	}
	if rows, chunk := s.chunkRows([]any{ks, vs}); rows != n || (!s.http && s.cluster == "" && chunk >= n) {
		t.Fatalf("chunkRows: %d rows in blocks of %d, want %d rows in several blocks", rows, chunk, n)
	}
	if err := s.insert(ctx, "probe", "chunk_probe", []string{"k", "v"}, ks, vs); err != nil {
		t.Fatal(err)
	}
	var parts, level, rows uint64
	if err := s.queryRow(ctx, "parts", `SELECT count(), toUInt64(max(level)), sum(rows) FROM system.parts WHERE database = `+quote(s.db)+
		` AND table = 'chunk_probe' AND active`, &parts, &level, &rows); err != nil {
		t.Fatal(err)
	}
	if parts != 1 || level != 0 || rows != n {
		t.Fatalf("%d parts (max level %d) of %d rows, want one part of level 0 of %d rows", parts, level, rows, n)
	}
	// What was sent, computed here: the lengths, the distinct values (26
	// letters repeated) and the keys.
	var count, length, distinct, keys uint64
	if err := s.queryRow(ctx, "check rows", `SELECT count(), sum(length(v)), uniqExact(v), sum(k) FROM chunk_probe`,
		&count, &length, &distinct, &keys); err != nil {
		t.Fatal(err)
	}
	if count != n || length != n*width || distinct != 26 || keys != n*(n-1)/2 {
		t.Fatalf("read %d rows, %d bytes, %d values, keys summing to %d; want %d, %d, 26, %d", count, length, distinct, keys,
			n, n*width, n*(n-1)/2)
	}
}
