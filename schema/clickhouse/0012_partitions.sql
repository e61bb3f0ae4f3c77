-- Analysis partitions (store.Partitioned, docs/ARCHITECTURE.md "Scaling
-- out"): several analysers write one database at once, each the
-- partitions it holds the lease of (leases.name 'analysis/' + the
-- partition; 'analysis' is the default partition, ''). What an analyser
-- keeps for its partition alone carries the partition's name, part; what
-- the database held before is the default partition's (part '').
--
-- * trace_spans: every row of a write (its traces' rows and its log row)
--   carries the writer's partition; sequences increase per partition, so
--   the write log is read by partition.
-- * records: the partition whose analyser stored the record (its window
--   records are that partition's); the key stays (win, minute, trace_id),
--   so a record another partition re-opens is replaced and becomes its.
ALTER TABLE trace_spans ADD COLUMN part String;

ALTER TABLE records ADD COLUMN part String;

-- Window states per window and partition (a window's state is the sum of
-- its partitions'), with the writer's clock when written (unix
-- nanoseconds: which windows other partitions changed lately). Replaces
-- states (keyed by window alone), whose rows are copied as the default
-- partition's, written at their version (the writer's clock too); 0013
-- drops it.
CREATE TABLE IF NOT EXISTS states_by_part (
    day     Date,
    win     Int64,
    part    String,
    version UInt64,
    written Int64,
    deleted UInt8,
    state   String
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (win, part);

INSERT INTO states_by_part (day, win, part, version, written, deleted, state)
SELECT day, win, '', version, toInt64(version), deleted, state FROM states
WHERE (SELECT count() FROM states_by_part) = 0;

-- Markers (see dirty, 0002) per partition: a minute's rollups and a
-- window's state are each partition's own (a minute left dirty is
-- recomputed from its partition's records, a window's state is exact
-- when its partition wrote it after its partition's latest marker); the
-- summary markers are shared (part ''), as summaries are. Replaces dirty
-- (its rows copied as the default partition's, but the hour markers no
-- longer written); 0013 drops it.
CREATE TABLE IF NOT EXISTS dirty_by_part (
    kind    Enum8('minute' = 0, 'window' = 1, 'summary' = 2),
    id      Int64,
    part    String,
    day     Date,
    dirty   UInt8,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (kind, id, part);

INSERT INTO dirty_by_part (kind, id, part, day, dirty, version)
SELECT kind, id, '', day, dirty, version FROM dirty
WHERE kind != 'hour' AND (SELECT count() FROM dirty_by_part) = 0;

-- Rollup generations per partition. Each partition's rollup rows are its
-- own generations of each bucket: its base generation (base: 0 for the
-- default partition, 2^63 plus a hash of the name for the others), or,
-- once a bucket of its was recomputed from its records, the generation
-- of that repair (a row version: below 2^63). So rows of two partitions
-- never share a key in the rollups, node_minutes or trace_buckets, and a
-- bucket counts, of each partition, its current generation only: the
-- latest gen here of (bucket, partition), its base without one. A repair
-- by one partition leaves the others' deltas, written at the same time,
-- as they are. Replaces rollup_gens (its rows copied as the default
-- partition's); 0013 drops it.
CREATE TABLE IF NOT EXISTS rollup_gens_by_part (
    tier    UInt8,
    bucket  Int64,
    part    String,
    day     Date,
    base    UInt64,
    gen     UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket, part);

INSERT INTO rollup_gens_by_part (tier, bucket, part, day, base, gen, version)
SELECT tier, bucket, '', day, 0, gen, version FROM rollup_gens
WHERE (SELECT count() FROM rollup_gens_by_part) = 0;

-- Records re-opened by another partition: the record of trace_id that
-- from_part stored (its seq old_seq, its result, in minute) became
-- to_part's. Its contribution stays in from_part's rollup rows and the
-- taker's rows hold it taken away (the taker's Apply wrote the change
-- from the old record to the new one), so that neither analyser writes
-- the other's rows: a partition's rollups of a minute are its records'
-- results, less those it took, plus those taken from it, and a repair
-- recomputes them so. One row per move, whichever Apply retried it.
CREATE TABLE IF NOT EXISTS record_moves (
    day       Date,
    minute    Int64,
    trace_id  FixedString(16),
    from_part String,
    old_seq   UInt64,
    to_part   String,
    result    String,
    version   UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (minute, trace_id, from_part, old_seq);

-- Extras for current releases (see 0004), on the new tables only: the
-- part columns of trace_spans and records stay plain strings (one value
-- per insert, they compress to nothing; changing their type would
-- rewrite every part).
-- requires: 21.8
ALTER TABLE states_by_part
    MODIFY COLUMN part LowCardinality(String),
    MODIFY COLUMN state String CODEC(ZSTD(1));

-- requires: 21.8
ALTER TABLE dirty_by_part MODIFY COLUMN part LowCardinality(String);

-- requires: 21.8
ALTER TABLE rollup_gens_by_part MODIFY COLUMN part LowCardinality(String);

-- requires: 21.8
ALTER TABLE record_moves
    MODIFY COLUMN from_part LowCardinality(String),
    MODIFY COLUMN to_part LowCardinality(String),
    MODIFY COLUMN result String CODEC(ZSTD(1));

-- requires: 21.8
ALTER TABLE states_by_part MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE dirty_by_part MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_gens_by_part MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE record_moves MODIFY SETTING ttl_only_drop_parts = 1;
