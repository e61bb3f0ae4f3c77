-- One record per analysed trace (store.Record): the result as evaluated
-- (analysis.ResultEncoder)
-- against its window, the facts to evaluate it again, and the edges it
-- uses (8-byte big-endian EdgeKeys, concatenated).
-- edges comes before the large columns: scanning a window for the records
-- that use an edge reads it without following the blobs' overflow pages.
CREATE TABLE IF NOT EXISTS records (
    trace_id BLOB PRIMARY KEY,
    start    INTEGER NOT NULL,
    win      INTEGER NOT NULL,
    api      TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    edges    BLOB NOT NULL,
    result   BLOB NOT NULL,
    facts    BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_by_window ON records (win);
CREATE INDEX IF NOT EXISTS records_by_start ON records (start);

-- Window states (analysis.State as JSON) and summaries (the binary form,
-- analysis.WindowSummary.AppendBinary), replaced whole.
CREATE TABLE IF NOT EXISTS states (
    win   INTEGER PRIMARY KEY,
    state BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS summaries (
    win     INTEGER PRIMARY KEY,
    summary BLOB NOT NULL
);

-- The pipeline's checkpoint and other counters.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);

-- Rollups: the sum of the stored records' results (analysis.Report), per
-- bucket. tier 0: bucket = unix minute; tier 1: bucket = unix hour.
-- Maintained by deltas in the transaction that replaces the records.
CREATE TABLE IF NOT EXISTS rollup_totals (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL,
    spans INTEGER NOT NULL, traces INTEGER NOT NULL, fragments INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_api (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    traces INTEGER NOT NULL, failed INTEGER NOT NULL, root_errors INTEGER NOT NULL,
    remote_parent INTEGER NOT NULL, radius_sum INTEGER NOT NULL, suppressed INTEGER NOT NULL,
    hops INTEGER NOT NULL, counterfactual INTEGER NOT NULL, misattributed INTEGER NOT NULL,
    naive INTEGER NOT NULL, eligible INTEGER NOT NULL, fragments INTEGER NOT NULL, events INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_radius (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    radius INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, radius)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_amp (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    amp REAL NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, amp)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_owner (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    service TEXT NOT NULL, operation TEXT NOT NULL,
    events INTEGER NOT NULL, spurious INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, service, operation)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_service (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, service TEXT NOT NULL,
    correct INTEGER NOT NULL, false_claim INTEGER NOT NULL, false_unclaim INTEGER NOT NULL,
    missing INTEGER NOT NULL, invalid INTEGER NOT NULL, mismatches INTEGER NOT NULL,
    misattributed INTEGER NOT NULL, naive INTEGER NOT NULL, eligible INTEGER NOT NULL,
    context_drops INTEGER NOT NULL, owned INTEGER NOT NULL, requests INTEGER NOT NULL,
    virtual_requests INTEGER NOT NULL, counterfactual INTEGER NOT NULL, spurious INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, service)
) WITHOUT ROWID;
