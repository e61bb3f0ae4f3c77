-- Per node (service, operation) and minute, its hops and owned failures,
-- narrow and in key order, for incident detection: finding the hot
-- minutes of a week in the rollups read every rollup row of ~10,000
-- minute buckets (~30 M rows for 100 APIs, seconds); this table holds two
-- numbers per node and minute. A materialized view fills it from every
-- insert into the rollups, recomputed buckets included (same tier, bucket
-- and gen, so a bucket's current generation selects its rows here too).
-- Summed with GROUP BY, never FINAL.
-- On a cluster, sharded as the rollups its view reads (one node's rows
-- of a minute on one shard).
-- shard by: cityHash64(tier, bucket)
CREATE TABLE IF NOT EXISTS node_minutes (
    tier      UInt8,
    bucket    Int64,
    day       Date,
    gen       UInt64,
    service   String,
    operation String,
    requests  Int64,
    owned     Int64
) ENGINE = SummingMergeTree((requests, owned))
PARTITION BY day
ORDER BY (tier, bucket, gen, service, operation);

-- What the rollups already hold (only while the table is empty: running
-- the migration again after an interruption copies nothing twice).
INSERT INTO node_minutes (tier, bucket, day, gen, service, operation, requests, owned)
SELECT tier, bucket, day, gen, service, operation,
    sumIf(n, stat = 'node_requests'), sumIf(n, stat = 'node_owned')
FROM rollups
WHERE tier = 0 AND stat IN ('node_requests', 'node_owned') AND (SELECT count() FROM node_minutes) = 0
GROUP BY tier, bucket, day, gen, service, operation;

CREATE MATERIALIZED VIEW IF NOT EXISTS node_minutes_mv TO node_minutes AS
SELECT tier, bucket, day, gen, service, operation,
    sumIf(n, stat = 'node_requests') AS requests, sumIf(n, stat = 'node_owned') AS owned
FROM rollups
WHERE tier = 0 AND stat IN ('node_requests', 'node_owned')
GROUP BY tier, bucket, day, gen, service, operation;
