-- The analysis lease (store.Leaser): ClickHouse has no transactions and no
-- compare-and-set, so each claimant inserts rows of its own (one key per
-- holder, the latest version wins) and every claimant reads them all:
-- 'intent' (0) while it waits to see who else claims, 'held' (1) once it
-- won, renewed by heartbeats, 'released' (2) when it gives up. Times are
-- unix nanoseconds of the server's clock (now(): whole seconds), so that
-- the instances' own clocks do not matter. See store/clickhouse/lease.go.
-- One row per holder once merged: a handful per process start.
-- On a cluster, every claim of a lease lies on one shard.
-- shard by: cityHash64(name)
CREATE TABLE IF NOT EXISTS leases (
    name    String,
    holder  String,
    host    String,
    pid     UInt32,
    started Int64,
    ns      String,
    state   UInt8,
    claimed Int64,
    expires Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (name, holder);
