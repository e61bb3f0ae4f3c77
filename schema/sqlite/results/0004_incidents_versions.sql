-- Per node: hops and owned failure events (incidents: the owned-failure
-- rate of an owner per minute).
CREATE TABLE IF NOT EXISTS rollup_node (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL,
    service TEXT NOT NULL, operation TEXT NOT NULL,
    requests INTEGER NOT NULL, owned INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, service, operation)
) WITHOUT ROWID;

-- Per owner of a root API: its traces, their suppressed retries, its
-- events' radius (sum and histogram) and its amplification (histogram):
-- an incident's figures.
ALTER TABLE rollup_owner ADD COLUMN traces INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_owner ADD COLUMN suppressed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_owner ADD COLUMN radius_sum INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS rollup_owner_radius (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    service TEXT NOT NULL, operation TEXT NOT NULL, radius INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, service, operation, radius)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_owner_amp (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    service TEXT NOT NULL, operation TEXT NOT NULL, amp REAL NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, service, operation, amp)
) WITHOUT ROWID;

-- Per root API, service and service.version: the traces that version ran
-- in (the rollout gate compares versions).
CREATE TABLE IF NOT EXISTS rollup_version (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    service TEXT NOT NULL, version TEXT NOT NULL,
    traces INTEGER NOT NULL, failed INTEGER NOT NULL, root_errors INTEGER NOT NULL, radius_sum INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, service, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_version_radius (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    service TEXT NOT NULL, version TEXT NOT NULL, radius INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, service, version, radius)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rollup_version_amp (
    tier INTEGER NOT NULL, bucket INTEGER NOT NULL, api TEXT NOT NULL,
    service TEXT NOT NULL, version TEXT NOT NULL, amp REAL NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (tier, bucket, api, service, version, amp)
) WITHOUT ROWID;
