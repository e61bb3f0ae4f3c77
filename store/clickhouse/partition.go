package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/store/internal/fence"
)

// Analysis partitions (store.Partitioned; see the package doc): what a
// partition keeps for itself carries its name in the part columns
// (schema/clickhouse/0012_partitions.sql). A view continues its span log
// from the highest sequence, read before its first write and when it
// takes its lease. A record another partition re-opens moves to it
// (record_moves): the taker's rollups hold the old record taken away, the
// giver's keep it, and repairs of either compute their rows so.

var (
	_ store.Partitioned    = (*Store)(nil)
	_ store.PartitionStore = (*Store)(nil)
)

// newPart returns the state of partition name, nothing read yet.
func newPart(name string, clock func() time.Time) *part {
	return &part{name: name, base: baseGen(name), lease: fence.Fence{Now: clock},
		repair: map[int64]struct{}{}, clean: map[int64]struct{}{}}
}

// baseFlag marks the base generation of a partition other than the
// default: repair generations (clock nanoseconds) stay below it until 2262.
const baseFlag = uint64(1) << 63

// baseGen returns partition p's base rollup generation: 0 for the default
// (rows from before partitions), else baseFlag and 63 bits of the name's
// hash (two names that hash alike would share rollup rows: 2^-63 a pair).
func baseGen(p string) uint64 {
	if p == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(p))
	return baseFlag | h.Sum64()&(baseFlag-1)
}

// Partition returns partition p's view of the store ("" is the store's
// own). Views of one partition share its state and lease (closing one releases it).
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

// leaseName is the key of the partition's lease.
func (p *part) leaseName() string { return p.ownKey(leaseName) }

// watermarkKey is the meta key of the partition's checkpoint.
func (p *part) watermarkKey() string { return p.ownKey(metaWatermark) }

// ownKey returns the partition's key of a kind: key itself for the default
// partition (as before partitions), else key + "/" + its name.
func (p *part) ownKey(key string) string {
	if p.name == "" {
		return key
	}
	return key + "/" + p.name
}

// PeerState returns the sum of the other partitions' latest states of w.
func (s *Store) PeerState(ctx context.Context, w int64) (*analysis.State, error) {
	if err := s.checkOpen("read peer states"); err != nil {
		return nil, err
	}
	sum := analysis.NewState()
	if w < s.floorWindow(ctx) {
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
	out, err := queryColumn[int64](ctx, s, "read peer windows", `SELECT DISTINCT win FROM states_by_part WHERE part != `+quote(s.name)+
		` AND written >= `+itoa(since)+` AND win >= `+itoa(s.floorWindow(ctx))+` ORDER BY win`)
	if err == nil && out == nil {
		out = []int64{}
	}
	return out, err
}

// SharedTraces returns, of ids, those whose spans another partition also
// wrote (store.Routing), each with one such partition's name: trace_spans
// is ordered by trace id, so this reads the ids' granules alone. The ids
// go as data (withIDs), not literals: parsing 1,000 literals was most of
// the query's cost, and a Kafka partition's analyser asks it of every
// trace it closes.
func (s *Store) SharedTraces(ctx context.Context, ids []graph.TraceID) (map[graph.TraceID]string, error) {
	if err := s.checkOpen("read shared traces"); err != nil {
		return nil, err
	}
	out := map[graph.TraceID]string{}
	for chunk := range slices.Chunk(ids, 10000) {
		idctx, err := s.withIDs(light(ctx), chunk)
		if err != nil {
			return nil, err
		}
		err = s.query(idctx, "read shared traces", `SELECT trace_id, min(part) FROM trace_spans WHERE trace_id IN (SELECT id FROM `+
			idsTable+`) AND part != `+quote(s.name)+` GROUP BY trace_id`, func(r driver.Rows) error {
			var id graph.TraceID
			var part string
			if err := r.Scan(&id, &part); err != nil {
				return err
			}
			out[id] = part
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PartitionName is the view's partition (store.Routing).
func (s *Store) PartitionName() string { return s.name }

// SourcePosition returns the partition's source position (store.SourcePositions).
func (s *Store) SourcePosition(ctx context.Context) (int64, bool, error) {
	if err := s.checkOpen("read source position"); err != nil {
		return 0, false, err
	}
	var n uint64
	var v int64
	err := s.queryRow(ctx, "read source position", `SELECT count(), argMax(value, version) FROM meta WHERE key = `+
		quote(s.ownKey(metaSourcePosition)), &n, &v)
	return v, n > 0, err
}

// SetSourcePosition stores the partition's source position (store.SourcePositions).
func (s *Store) SetSourcePosition(ctx context.Context, v int64) error {
	if err := s.checkWrite("put source position"); err != nil {
		return err
	}
	return s.putMeta(ctx, map[string]int64{s.ownKey(metaSourcePosition): v})
}
