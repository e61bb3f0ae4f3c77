package clickhouse

import (
	"context"
	"fmt"
)

// The write position (store.Store.Position) follows the database's active
// parts, one query on system.parts: every insert makes a part with a block
// number above every other of its table's, and retention drops partitions,
// while a background merge keeps each partition's lowest and highest block
// numbers. So the partitions of each table with their block number ranges,
// hashed and summed, move with every write that changes what a read
// returns and not with merges. The span tables are left out, as the
// contract says: ingestion does not move it. On a cluster the parts are
// listed on every shard (partsSource: one replica of each) and kept apart
// by server, for block numbers are the shard's own: a write to a shard
// whose numbers are below another's must still move the sum.
const positionQuery = `SELECT toUInt64(sum(cityHash64(host, table, partition_id, lo, hi))) FROM (
	SELECT hostName() AS host, table, partition_id, min(min_block_number) AS lo, max(max_block_number) AS hi FROM %s
	WHERE database = %s AND active AND table NOT IN ('trace_spans', 'spans', 'writes', 'trace_spans_local', 'spans_local', 'writes_local')
	GROUP BY host, table, partition_id)`

// readPosition returns the database's fingerprint for the position
// tracker (under its lock), and reads the minute markers when it moved.
func (s *Store) readPosition(ctx context.Context) (uint64, error) {
	ctx = light(ctx)
	var fp uint64
	if err := s.queryRow(ctx, "read write position", fmt.Sprintf(positionQuery, s.partsSource(), quote(s.db)), &fp); err != nil {
		return 0, err
	}
	if s.marks != nil && (!s.marks.known || fp != s.marks.fp) {
		// What moved it, for the tiers kept (tiers.go).
		if err := s.readMarks(ctx); err != nil {
			s.forgetMarks()
			return 0, err
		}
		s.marks.fp = fp
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
