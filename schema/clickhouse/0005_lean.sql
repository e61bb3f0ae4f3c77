-- Cheaper writes. Every insert costs the server a part (a directory, two
-- files per column, a merge later), so the store now makes fewer, narrower
-- ones:
--
-- * spans: one row per trace per write (trace_spans), holding that trace's
--   spans of the write with their names once (graph.TraceEncoder.AppendSpans),
--   instead of a 14-column row per span; the write log row comes from the
--   same insert through a materialized view, so a write and its log row
--   land together, and keeps only what recovery reads;
-- * records: the columnar copies of the results that the rollups were
--   recomputed from in SQL are dropped (rollups are now kept from Go);
-- * rollups: one narrow table, kept by deltas (SummingMergeTree) in three tiers —
--   minute, hour, day — written by the same Apply as the records; a bucket
--   an interrupted Apply may have left wrong is recomputed from the records
--   under a new generation (rollup_gens), and readers only sum the rows of
--   each bucket's current generation, so a delta that lands late, after
--   the repair, counts for nothing.
--
-- The rows of the old rollup_* tables are copied below; those tables and
-- spans are not used after this migration (0011 drops them).

-- Spans of one write, one row per trace: data is
-- graph.TraceEncoder.AppendSpans of the trace's spans in the write.
-- Partitioned by the day of the write; a small index granularity keeps a
-- point read of one trace short (a few hundred rows of data per granule,
-- not 8192).
CREATE TABLE IF NOT EXISTS trace_spans (
    day      Date,
    trace_id FixedString(16),
    seq      UInt64,
    data     String
) ENGINE = MergeTree
PARTITION BY day
ORDER BY (trace_id, seq)
SETTINGS index_granularity = 256;

-- The write log (writes, 0001) is filled from the span insert itself: one
-- row per insert block, which is one write. Its columns written_at and
-- spans go (retention reads day; the store never read spans).
ALTER TABLE writes DROP COLUMN written_at, DROP COLUMN spans;

CREATE MATERIALIZED VIEW IF NOT EXISTS writes_mv TO writes AS
SELECT day, seq, groupArray(trace_id) AS trace_ids FROM trace_spans GROUP BY day, seq;

-- Rollups: the sum of the stored records' results (analysis.Report) per
-- bucket, one row per figure: tier 0: bucket = unix minute; 1: unix hour;
-- 2: unix day (UTC). Every Apply inserts the change it makes to each
-- bucket it touches, in all three tiers; merges sum the rows of a key
-- (and drop those that sum to zero). stat names the figure; api, service,
-- operation and value are its keys where it has them: the api_* figures
-- and radius, amp (value: the radius, the amplification; n counts failed
-- traces) and owner_* (service, operation: the owner) per API; svc_* per
-- service; spans, traces and fragments in total.
--
-- A bucket counts the rows of its current generation only: 0, or the
-- latest gen rollup_gens holds for it. Sum with GROUP BY, never FINAL.
-- On a cluster, every row of a bucket lies on one shard (with its
-- rollup_gens rows, and the node_minutes and trace_buckets rows their
-- views fill from them): see store/clickhouse/cluster.go.
-- shard by: cityHash64(tier, bucket)
CREATE TABLE IF NOT EXISTS rollups (
    tier      UInt8,
    bucket    Int64,
    day       Date,
    gen       UInt64,
    stat      Enum8('spans' = 0, 'traces' = 1, 'fragments' = 2,
                    'api_traces' = 10, 'api_failed' = 11, 'api_root_errors' = 12, 'api_remote_parent' = 13,
                    'api_radius_sum' = 14, 'api_suppressed' = 15, 'api_hops' = 16, 'api_counterfactual' = 17,
                    'api_misattributed' = 18, 'api_naive' = 19, 'api_eligible' = 20, 'api_fragments' = 21,
                    'api_events' = 22, 'radius' = 30, 'amp' = 31, 'owner_events' = 40, 'owner_spurious' = 41,
                    'svc_correct' = 50, 'svc_false_claim' = 51, 'svc_false_unclaim' = 52, 'svc_missing' = 53,
                    'svc_invalid' = 54, 'svc_mismatches' = 55, 'svc_misattributed' = 56, 'svc_naive' = 57,
                    'svc_eligible' = 58, 'svc_context_drops' = 59, 'svc_owned' = 60, 'svc_requests' = 61,
                    'svc_virtual_requests' = 62, 'svc_counterfactual' = 63, 'svc_spurious' = 64),
    api       String,
    service   String,
    operation String,
    value     Float64,
    n         Int64
) ENGINE = SummingMergeTree((n))
PARTITION BY day
ORDER BY (tier, bucket, gen, stat, api, service, operation, value);

-- The current generation of the buckets that were ever recomputed (after
-- an Apply that did not finish): the latest version per bucket.
CREATE TABLE IF NOT EXISTS rollup_gens (
    tier    UInt8,
    bucket  Int64,
    day     Date,
    gen     UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket);

-- What the old rollup tables hold: their minute rollups (the latest
-- version of each row; minutes left dirty are recomputed by the first
-- Apply, from the dirty table), then hours and days summed from them. Each statement runs only while its part is missing, so running
-- the migration again after an interruption copies nothing twice.
INSERT INTO rollups (tier, bucket, day, gen, stat, n)
SELECT 0, bucket, day, 0, stat, n FROM rollup_totals FINAL
ARRAY JOIN ['spans', 'traces', 'fragments'] AS stat, [spans, traces, fragments] AS n
WHERE tier = 0 AND n != 0 AND (SELECT count() FROM rollups WHERE stat = 'traces') = 0;

INSERT INTO rollups (tier, bucket, day, gen, stat, api, n)
SELECT 0, bucket, day, 0, stat, api, n FROM rollup_api FINAL
ARRAY JOIN ['api_traces', 'api_failed', 'api_root_errors', 'api_remote_parent', 'api_radius_sum', 'api_suppressed',
    'api_hops', 'api_counterfactual', 'api_misattributed', 'api_naive', 'api_eligible', 'api_fragments', 'api_events'] AS stat,
    [traces, failed, root_errors, remote_parent, radius_sum, suppressed, hops, counterfactual, misattributed, naive,
    eligible, fragments, events] AS n
WHERE tier = 0 AND n != 0 AND (SELECT count() FROM rollups WHERE stat = 'api_traces') = 0;

INSERT INTO rollups (tier, bucket, day, gen, stat, api, value, n)
SELECT 0, bucket, day, 0, 'radius', api, toFloat64(radius), n FROM rollup_radius FINAL
WHERE tier = 0 AND n != 0 AND (SELECT count() FROM rollups WHERE stat = 'radius') = 0;

INSERT INTO rollups (tier, bucket, day, gen, stat, api, value, n)
SELECT 0, bucket, day, 0, 'amp', api, amp, n FROM rollup_amp FINAL
WHERE tier = 0 AND n != 0 AND (SELECT count() FROM rollups WHERE stat = 'amp') = 0;

INSERT INTO rollups (tier, bucket, day, gen, stat, api, service, operation, n)
SELECT 0, bucket, day, 0, stat, api, service, operation, n FROM rollup_owner FINAL
ARRAY JOIN ['owner_events', 'owner_spurious'] AS stat, [events, spurious] AS n
WHERE tier = 0 AND n != 0 AND (SELECT count() FROM rollups WHERE stat IN ('owner_events', 'owner_spurious')) = 0;

INSERT INTO rollups (tier, bucket, day, gen, stat, service, n)
SELECT 0, bucket, day, 0, stat, service, n FROM rollup_service FINAL
ARRAY JOIN ['svc_correct', 'svc_false_claim', 'svc_false_unclaim', 'svc_missing', 'svc_invalid', 'svc_mismatches',
    'svc_misattributed', 'svc_naive', 'svc_eligible', 'svc_context_drops', 'svc_owned', 'svc_requests',
    'svc_virtual_requests', 'svc_counterfactual', 'svc_spurious'] AS stat,
    [correct, false_claim, false_unclaim, missing, invalid, mismatches, misattributed, naive, eligible, context_drops,
    owned, requests, virtual_requests, counterfactual, spurious] AS n
WHERE tier = 0 AND n != 0 AND (SELECT count() FROM rollups WHERE toInt8(stat) >= 50) = 0;

INSERT INTO rollups (tier, bucket, day, gen, stat, api, service, operation, value, n)
SELECT 1, intDiv(bucket, 60) AS hour, any(day), 0, stat, api, service, operation, value, sum(n)
FROM rollups
WHERE tier = 0 AND (SELECT count() FROM rollups WHERE tier = 1) = 0
GROUP BY hour, stat, api, service, operation, value;

INSERT INTO rollups (tier, bucket, day, gen, stat, api, service, operation, value, n)
SELECT 2, intDiv(bucket, 1440) AS d, any(day), 0, stat, api, service, operation, value, sum(n)
FROM rollups
WHERE tier = 0 AND (SELECT count() FROM rollups WHERE tier = 2) = 0
GROUP BY d, stat, api, service, operation, value;

-- Where each trace's record lives, for the lookups every analysed batch
-- makes (mostly of traces that have none): by trace id, with small
-- granules (a lookup reads a granule per id and part) and month
-- partitions (fewer parts than days; retention drops whole months, and
-- readers ignore what lies before the retention floor). It replaces
-- trace_index, whose view stops and whose rows are copied (again, if the
-- migration runs again: the copies are the same rows).
CREATE TABLE IF NOT EXISTS record_index (
    day      Date,
    trace_id FixedString(16),
    win      Int64,
    minute   Int64,
    start    Int64,
    version  UInt64,
    deleted  UInt8
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(day)
ORDER BY trace_id
SETTINGS index_granularity = 128;

CREATE MATERIALIZED VIEW IF NOT EXISTS record_index_mv TO record_index AS
SELECT day, trace_id, win, minute, start, version, deleted FROM records;

DROP TABLE IF EXISTS trace_index_mv;

INSERT INTO record_index (day, trace_id, win, minute, start, version, deleted)
SELECT day, trace_id, win, minute, start, version, deleted FROM trace_index;

-- The columnar copies of the results go, in statements that each modify
-- fewer files than 18.16 allows one ALTER to (max_files_to_modify_in_alter_columns);
-- the store runs such a statement again harmlessly when its columns are
-- already gone.
ALTER TABLE records
    DROP COLUMN spans, DROP COLUMN fragments, DROP COLUMN failed, DROP COLUMN root_failed,
    DROP COLUMN remote_parent, DROP COLUMN radius, DROP COLUMN amp, DROP COLUMN events,
    DROP COLUMN suppressed, DROP COLUMN hops, DROP COLUMN counterfactual, DROP COLUMN misattributed,
    DROP COLUMN naive, DROP COLUMN eligible;

ALTER TABLE records
    DROP COLUMN owner_service, DROP COLUMN owner_operation, DROP COLUMN owner_events, DROP COLUMN owner_spurious,
    DROP COLUMN svc_name, DROP COLUMN svc_correct, DROP COLUMN svc_false_claim, DROP COLUMN svc_false_unclaim,
    DROP COLUMN svc_missing, DROP COLUMN svc_invalid;

ALTER TABLE records
    DROP COLUMN svc_mismatches, DROP COLUMN svc_misattributed, DROP COLUMN svc_naive, DROP COLUMN svc_eligible,
    DROP COLUMN svc_context_drops, DROP COLUMN svc_owned, DROP COLUMN svc_requests, DROP COLUMN svc_virtual_requests,
    DROP COLUMN svc_counterfactual, DROP COLUMN svc_spurious;

-- Extras for current releases (see 0004).
-- requires: 21.8
ALTER TABLE trace_spans
    MODIFY COLUMN seq UInt64 CODEC(T64, ZSTD(1)),
    MODIFY COLUMN data String CODEC(ZSTD(1));

-- requires: 21.8
ALTER TABLE rollups
    MODIFY COLUMN api LowCardinality(String),
    MODIFY COLUMN service LowCardinality(String),
    MODIFY COLUMN operation LowCardinality(String);

-- requires: 21.8
ALTER TABLE trace_spans MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollups MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_gens MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE record_index MODIFY SETTING ttl_only_drop_parts = 1;
