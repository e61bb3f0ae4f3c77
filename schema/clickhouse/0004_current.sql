-- Extras for current releases (docs/SPEC.md §6): a statement after a line
-- "-- requires: X.Y" runs only on ClickHouse X.Y or later; on older
-- servers (Debian's 18.16) it is skipped. The tables are new and empty
-- when this runs, so the changes cost nothing; a database created on an
-- older server keeps its plain columns when the server is upgraded (the
-- migration is recorded as applied). TTL is not here: it follows the
-- store's ttl option, set at Open.

-- Repeated names stored once per part (dictionary-coded); blobs and
-- numbers compressed with ZSTD.
-- requires: 21.8
ALTER TABLE spans
    MODIFY COLUMN service LowCardinality(String),
    MODIFY COLUMN operation LowCardinality(String),
    MODIFY COLUMN name LowCardinality(String),
    MODIFY COLUMN seq UInt64 CODEC(T64, ZSTD(1)),
    MODIFY COLUMN start Int64 CODEC(ZSTD(1)),
    MODIFY COLUMN data String CODEC(ZSTD(1));

-- requires: 21.8
ALTER TABLE writes
    MODIFY COLUMN trace_ids Array(FixedString(16)) CODEC(ZSTD(1));

-- requires: 21.8
ALTER TABLE records
    MODIFY COLUMN api LowCardinality(String),
    MODIFY COLUMN result String CODEC(ZSTD(1)),
    MODIFY COLUMN facts String CODEC(ZSTD(1)),
    MODIFY COLUMN edges Array(UInt64) CODEC(ZSTD(1)),
    MODIFY COLUMN owner_service Array(LowCardinality(String)),
    MODIFY COLUMN owner_operation Array(LowCardinality(String)),
    MODIFY COLUMN svc_name Array(LowCardinality(String));

-- Records are keyed by window and minute; SQL users looking a trace up
-- by id alone skip most granules with a bloom filter.
-- requires: 21.8
ALTER TABLE records ADD INDEX IF NOT EXISTS trace_id_bloom trace_id TYPE bloom_filter(0.01) GRANULARITY 4;

-- requires: 21.8
ALTER TABLE states MODIFY COLUMN state String CODEC(ZSTD(1));

-- requires: 21.8
ALTER TABLE summaries MODIFY COLUMN summary String CODEC(ZSTD(1));

-- requires: 21.8
ALTER TABLE rollup_api MODIFY COLUMN api LowCardinality(String);

-- requires: 21.8
ALTER TABLE rollup_radius MODIFY COLUMN api LowCardinality(String);

-- requires: 21.8
ALTER TABLE rollup_amp MODIFY COLUMN api LowCardinality(String);

-- requires: 21.8
ALTER TABLE rollup_owner
    MODIFY COLUMN api LowCardinality(String),
    MODIFY COLUMN service LowCardinality(String),
    MODIFY COLUMN operation LowCardinality(String);

-- requires: 21.8
ALTER TABLE rollup_service MODIFY COLUMN service LowCardinality(String);

-- With a TTL, expired parts are dropped whole (every table is partitioned
-- by day), never rewritten row by row.
-- requires: 21.8
ALTER TABLE spans MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE writes MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE records MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE trace_index MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE states MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE summaries MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE dirty MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_totals MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_api MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_radius MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_amp MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_owner MODIFY SETTING ttl_only_drop_parts = 1;
-- requires: 21.8
ALTER TABLE rollup_service MODIFY SETTING ttl_only_drop_parts = 1;
