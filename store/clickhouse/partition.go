package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/fence"
)

// Analysis partitions (store.Partitioned). Several processes write one
// database at once, each the partitions whose lease it holds; what a
// partition keeps for itself carries its name (the part columns, see
// schema/clickhouse/0012_partitions.sql):
//
//   - its span log: the rows of its writes, sequences its own (a view
//     continues from its log's highest, read before its first write and
//     when it takes its lease);
//   - its records (WindowRecords reads them; Records reads every
//     partition's), states (one per window and partition, with the
//     writer's clock), checkpoint (a meta key of its own) and lease (one
//     per partition name);
//   - its rollups: each partition's rows are its own generations of each
//     bucket, so that a partition whose Apply failed recomputes its own
//     records' contribution under a new generation of its own while the
//     others go on adding deltas to theirs; reports sum every partition's
//     current generation. Its minute and window markers are its own too.
//
// Summaries, their stale marks, retention and compaction are the store's.
// A record that another partition re-opens moves to it (record_moves):
// the taker's rows hold the old record taken away, the giver's keep it,
// and repairs of either compute their rows so.

var (
	_ store.Partitioned    = (*Store)(nil)
	_ store.PartitionStore = (*Store)(nil)
)

// newPart returns the state of partition name, nothing read yet.
func newPart(name string, clock func() time.Time) *part {
	return &part{name: name, base: baseGen(name), lease: fence.Fence{Now: clock},
		repair: map[int64]struct{}{}, clean: map[int64]struct{}{}}
}

// baseFlag marks a base generation of a partition other than the
// default: repair generations are row versions (the clock in
// nanoseconds), below it until the year 2262.
const baseFlag = uint64(1) << 63

// baseGen returns partition p's base rollup generation: 0 for the default
// partition (the rows written before partitions existed), baseFlag plus
// 63 bits of a hash of the name for the others. Two names that hash alike
// would share their rollup rows (one chance in 2^63 for a pair).
func baseGen(p string) uint64 {
	if p == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(p))
	return baseFlag | h.Sum64()&(baseFlag-1)
}

// Partition returns partition p's view of the store. Views of one
// partition in one store share its state and its lease (closing one
// releases it); "" is the store's own partition.
func (s *Store) Partition(p string) (store.PartitionStore, error) {
	if err := store.CheckPartition(p); err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	if err := s.checkOpen("open partition"); err != nil {
		return nil, err
	}
	s.partsMu.Lock()
	defer s.partsMu.Unlock()
	pt := s.parts[p]
	if pt == nil {
		pt = newPart(p, s.leaseClock)
		s.parts[p] = pt
	}
	pt.views++
	return &Store{conn: s.conn, db: s.db, core: s.core, part: pt, view: true}, nil
}

// leaseName is the key of the partition's lease: "analysis" for the
// default partition (as before partitions), "analysis/" + its name.
func (p *part) leaseName() string {
	if p.name == "" {
		return leaseName
	}
	return leaseName + "/" + p.name
}

// watermarkKey is the meta key of the partition's checkpoint.
func (p *part) watermarkKey() string {
	if p.name == "" {
		return metaWatermark
	}
	return metaWatermark + "/" + p.name
}

// PeerState returns the sum of the states of window w the other
// partitions stored, each its latest (FINAL).
func (s *Store) PeerState(ctx context.Context, w int64) (*analysis.State, error) {
	if err := s.checkOpen("read peer states"); err != nil {
		return nil, err
	}
	sum := analysis.NewState()
	if f := s.retentionFloor(ctx); f != 0 && w < analysis.WindowOf(f, s.window) {
		return sum, nil
	}
	err := s.query(ctx, "read peer states", `SELECT part, state FROM (SELECT part, deleted, state FROM states_by_part FINAL
		WHERE win = `+itoa(w)+` AND part != `+quote(s.name)+`) WHERE deleted = 0`, func(r driver.Rows) error {
		var p, enc string
		if err := r.Scan(&p, &enc); err != nil {
			return err
		}
		st := analysis.NewState()
		if err := json.Unmarshal([]byte(enc), st); err != nil {
			return fmt.Errorf("clickhouse: state of window %d, partition %q: %w: %w", w, p, store.ErrCorrupt, err)
		}
		sum.Merge(st, 1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// PeerWindows returns the windows (from the retention floor on) whose
// state another partition wrote at or after since, by its writer's clock.
func (s *Store) PeerWindows(ctx context.Context, since int64) ([]int64, error) {
	if err := s.checkOpen("read peer windows"); err != nil {
		return nil, err
	}
	lo := int64(minBound)
	if f := s.retentionFloor(ctx); f != 0 {
		lo = analysis.WindowOf(f, s.window)
	}
	out := []int64{}
	err := s.query(ctx, "read peer windows", `SELECT DISTINCT win FROM states_by_part WHERE part != `+quote(s.name)+
		` AND written >= `+itoa(since)+` AND win >= `+itoa(lo)+` ORDER BY win`, func(r driver.Rows) error {
		var w int64
		if err := r.Scan(&w); err != nil {
			return err
		}
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
