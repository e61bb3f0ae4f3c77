-- These tables are not used any more: 0005 copies what they hold into the
-- one narrow rollups table that replaces them, and 0011 drops them. As
-- first created:
--
-- Rollups: the sum of the stored records' results (analysis.Report) per
-- bucket. tier 0: bucket = unix minute; tier 1: bucket = unix hour. Not
-- kept by deltas (there are no multi-table transactions): Apply recomputes
-- the minutes whose records changed from the records, and the hours from
-- their minutes once no Apply touches them any more (the table dirty says
-- which hours are behind; reports read those from the minutes), inserting
-- every key with a new version — including a zero row for a key that no
-- longer has records. Recomputing is idempotent, so an Apply cut short is
-- repaired by recomputing again. Readers take the latest version per key
-- (FINAL) and sum.
CREATE TABLE IF NOT EXISTS rollup_totals (
    tier UInt8, bucket Int64, day Date,
    spans Int64, traces Int64, fragments Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket);

CREATE TABLE IF NOT EXISTS rollup_api (
    tier UInt8, bucket Int64, day Date, api String,
    traces Int64, failed Int64, root_errors Int64, remote_parent Int64, radius_sum Int64,
    suppressed Int64, hops Int64, counterfactual Int64, misattributed Int64, naive Int64,
    eligible Int64, fragments Int64, events Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket, api);

CREATE TABLE IF NOT EXISTS rollup_radius (
    tier UInt8, bucket Int64, day Date, api String,
    radius Int64, n Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket, api, radius);

CREATE TABLE IF NOT EXISTS rollup_amp (
    tier UInt8, bucket Int64, day Date, api String,
    amp Float64, n Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket, api, amp);

CREATE TABLE IF NOT EXISTS rollup_owner (
    tier UInt8, bucket Int64, day Date, api String,
    service String, operation String, events Int64, spurious Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket, api, service, operation);

CREATE TABLE IF NOT EXISTS rollup_service (
    tier UInt8, bucket Int64, day Date, service String,
    correct Int64, false_claim Int64, false_unclaim Int64, missing Int64, invalid Int64,
    mismatches Int64, misattributed Int64, naive Int64, eligible Int64, context_drops Int64,
    owned Int64, requests Int64, virtual_requests Int64, counterfactual Int64, spurious Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (tier, bucket, service);
