-- Per bucket of every tier, its traces, for finding the last minute that
-- holds one (incidents are judged by the data's own clock): read from the
-- rollups, the 'traces' rows of a week's hours sat among every other
-- figure of those buckets (~700,000 rows read for 168 numbers); this
-- table holds one number per bucket and generation. A materialized view
-- fills it from every insert into the rollups, recomputed buckets
-- included (a bucket's current generation selects its rows here too).
-- Summed with GROUP BY, never FINAL.
-- On a cluster, sharded as the rollups its view reads.
-- shard by: cityHash64(tier, bucket)
CREATE TABLE IF NOT EXISTS trace_buckets (
    tier   UInt8,
    bucket Int64,
    day    Date,
    gen    UInt64,
    n      Int64
) ENGINE = SummingMergeTree((n))
PARTITION BY day
ORDER BY (tier, bucket, gen);

-- What the rollups already hold (only while the table is empty: running
-- the migration again after an interruption copies nothing twice).
INSERT INTO trace_buckets (tier, bucket, day, gen, n)
SELECT tier, bucket, day, gen, sum(n)
FROM rollups
WHERE stat = 'traces' AND (SELECT count() FROM trace_buckets) = 0
GROUP BY tier, bucket, day, gen;

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_buckets_mv TO trace_buckets AS
SELECT tier, bucket, day, gen, sum(n) AS n
FROM rollups
WHERE stat = 'traces'
GROUP BY tier, bucket, day, gen;
