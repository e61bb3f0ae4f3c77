-- One record per analysed trace (store.Record): the result (in
-- analysis.ResultEncoder's binary form), the facts, the edges it uses,
-- and columnar copies of what the rollups sum (dropped by 0005).
-- Keyed by (window, minute, trace id): a window's records and a minute's
-- records are ranges of the primary key. A replaced record is a new row
-- with a higher version; a deleted one, or one whose start moved to
-- another minute, leaves a row with deleted = 1 under its old key.
-- Readers take the latest version per key (FINAL), then drop deleted rows.
CREATE TABLE IF NOT EXISTS records (
    day             Date,
    win             Int64,
    minute          Int64,
    trace_id        FixedString(16),
    version         UInt64,
    deleted         UInt8,
    start           Int64,
    api             String,
    seq             UInt64,
    result          String,
    facts           String,
    edges           Array(UInt64),
    spans           Int64,
    fragments       Int64,
    failed          UInt8,
    root_failed     UInt8,
    remote_parent   UInt8,
    radius          Int64,
    amp             Float64,
    events          Int64,
    suppressed      Int64,
    hops            Int64,
    counterfactual  Int64,
    misattributed   Int64,
    naive           Int64,
    eligible        Int64,
    owner_service   Array(String),
    owner_operation Array(String),
    owner_events    Array(Int64),
    owner_spurious  Array(Int64),
    svc_name             Array(String),
    svc_correct          Array(Int64),
    svc_false_claim      Array(Int64),
    svc_false_unclaim    Array(Int64),
    svc_missing          Array(Int64),
    svc_invalid          Array(Int64),
    svc_mismatches       Array(Int64),
    svc_misattributed    Array(Int64),
    svc_naive            Array(Int64),
    svc_eligible         Array(Int64),
    svc_context_drops    Array(Int64),
    svc_owned            Array(Int64),
    svc_requests         Array(Int64),
    svc_virtual_requests Array(Int64),
    svc_counterfactual   Array(Int64),
    svc_spurious         Array(Int64)
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (win, minute, trace_id);

-- Where each trace's record lives, by trace id: point lookups read this
-- small table first. (Replaced by record_index in 0005; dropped by 0011.) Filled by a materialized view from every insert into
-- records, tombstones included, so it cannot disagree with them.
CREATE TABLE IF NOT EXISTS trace_index (
    day      Date,
    trace_id FixedString(16),
    win      Int64,
    minute   Int64,
    start    Int64,
    version  UInt64,
    deleted  UInt8
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY trace_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_index_mv TO trace_index AS
SELECT day, trace_id, win, minute, start, version, deleted FROM records;

-- Window states (analysis.State as JSON) and summaries (the binary form,
-- analysis.WindowSummary.AppendBinary), replaced whole.
-- day is the day the window starts.
CREATE TABLE IF NOT EXISTS states (
    day     Date,
    win     Int64,
    version UInt64,
    deleted UInt8,
    state   String
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY win;

CREATE TABLE IF NOT EXISTS summaries (
    day     Date,
    win     Int64,
    version UInt64,
    summary String
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY win;

-- Work begun and not known to be finished: a minute whose records
-- changed and whose rollups may not have been recomputed yet, an hour
-- whose minutes changed since its hourly rollups were recomputed, a
-- window whose records changed and whose state may not have been written
-- yet, a window whose state changed since its summary was put. Apply sets
-- dirty = 1 before it writes anything and 0 once done (summaries:
-- PutSummaries does). A dirty minute is recomputed by the next Apply; a
-- dirty hour by the first Apply that does not touch it, and reports read
-- it from the minutes meanwhile; a dirty window's state is not exact
-- (store.Windows.State); a dirty summary is stale
-- (store.Windows.StaleSummaries).
CREATE TABLE IF NOT EXISTS dirty (
    kind    Enum8('minute' = 0, 'window' = 1, 'summary' = 2, 'hour' = 3),
    id      Int64,
    day     Date,
    dirty   UInt8,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY day
ORDER BY (kind, id);

-- The checkpoint, the window length, the retention floor, the TTL.
CREATE TABLE IF NOT EXISTS meta (
    key     String,
    value   Int64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY key;
