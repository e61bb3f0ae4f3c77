
create table IF NOT EXISTS {db}.{table}_trace_id_ts (
     TraceId String CODEC(ZSTD(1)),
     Start DateTime64(9) CODEC(Delta, ZSTD(1)),
     End DateTime64(9) CODEC(Delta, ZSTD(1)),
     INDEX idx_trace_id TraceId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE MergeTree()

ORDER BY (TraceId, toUnixTimestamp(Start))
SETTINGS index_granularity=8192;
