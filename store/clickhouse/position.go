package clickhouse

import (
	"context"
	"fmt"
	"time"
)

// The write position (store.Store.Position) follows the database's active
// parts, one query on system.parts: every insert makes a part with a block
// number above every other of its table's, and retention drops partitions,
// while a background merge keeps each partition's lowest and highest block
// numbers. So the partitions of each table with their block number ranges,
// hashed and summed, move with every write that changes what a read
// returns and not with merges. The span tables are left out, as the
// contract says: ingestion does not move it. On a cluster, whose other
// shards' parts this server does not list, every read of the fingerprint
// moves the position: answers are then reused within
// position.DefaultEvery only.
const positionQuery = `SELECT toUInt64(sum(cityHash64(table, partition_id, lo, hi))) FROM (
	SELECT table, partition_id, min(min_block_number) AS lo, max(max_block_number) AS hi FROM system.parts
	WHERE database = %s AND active AND table NOT IN ('trace_spans', 'spans', 'writes') GROUP BY table, partition_id)`

// readPosition returns the database's fingerprint for the position
// tracker.
func (s *Store) readPosition(ctx context.Context) (uint64, error) {
	if s.cluster != "" {
		return uint64(time.Now().UnixNano()), nil
	}
	var fp uint64
	if err := s.queryRow(ctx, "read write position", fmt.Sprintf(positionQuery, quote(s.db)), &fp); err != nil {
		return 0, err
	}
	return fp, nil
}

// Position returns the store's write position (store.Store.Position).
func (s *Store) Position(ctx context.Context) (uint64, error) {
	if err := s.checkOpen("position"); err != nil {
		return 0, err
	}
	return s.pos.Position(ctx)
}
