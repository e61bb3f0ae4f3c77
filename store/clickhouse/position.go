package clickhouse

import (
	"context"
	"fmt"
	"time"
)

// The write position (store.Store.Position) follows the database's active
// parts, one query on system.parts: every insert makes a part with a block
// number above every other of its table's, and retention drops parts, so
// the sum of each table's highest block number, with the parts and rows
// counted, moves with every write that changes what a read returns (a
// background merge moves it for nothing: a cache miss). The span tables
// are left out, as the contract says: ingestion does not move it. On a
// cluster, whose other shards' parts this server does not list, every
// read of the fingerprint moves the position: answers are then reused
// within position.DefaultEvery only.
const positionQuery = `SELECT toUInt64(sum(m)), toUInt64(sum(c)), toUInt64(sum(r)) FROM (SELECT table, max(max_block_number) AS m, count() AS c, sum(rows) AS r
	FROM system.parts WHERE database = %s AND active AND table NOT IN ('trace_spans', 'spans', 'writes') GROUP BY table)`

// readPosition returns the database's fingerprint for the position
// tracker.
func (s *Store) readPosition(ctx context.Context) (uint64, error) {
	if s.cluster != "" {
		return uint64(time.Now().UnixNano()), nil
	}
	var blocks, parts, rows uint64
	var b, p, r any = &blocks, &parts, &rows
	if err := s.queryRow(ctx, "read write position", fmt.Sprintf(positionQuery, quote(s.db)), b, p, r); err != nil {
		return 0, err
	}
	// Mixed so that a change of any moves the whole.
	return blocks*0x9e3779b97f4a7c15 ^ parts<<48 ^ rows, nil
}

// Position returns the store's write position (store.Store.Position).
func (s *Store) Position(ctx context.Context) (uint64, error) {
	if err := s.checkOpen("position"); err != nil {
		return 0, err
	}
	return s.pos.Position(ctx)
}
