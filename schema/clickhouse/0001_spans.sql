-- Neither table is used any more: spans and the write log are rows of
-- trace_spans (0005, 0007), and 0011 drops both. As first created:
--
-- Spans as received (graph.AppendSpan in data), plus a few columns for
-- people who query the table with SQL. A span re-sent the same day
-- collapses with the stored copy on merge (same trace id and span id);
-- ReplacingMergeTree keeps the highest keep_rank, the bitwise complement
-- of seq, so the copy of the first write survives. Readers deduplicate by
-- span id. Partitioned by the day the span was written (one partition per
-- write): retention drops partitions. start is unix nanoseconds, duration
-- nanoseconds (18.16 has no DateTime64).
CREATE TABLE IF NOT EXISTS spans (
    day       Date,
    trace_id  FixedString(16),
    span_id   FixedString(8),
    parent_id FixedString(8),
    seq       UInt64,
    keep_rank UInt64,
    start     Int64,
    duration  Int64,
    service   String,
    operation String,
    name      String,
    kind      Enum8('UNSPECIFIED' = 0, 'INTERNAL' = 1, 'SERVER' = 2, 'CLIENT' = 3, 'PRODUCER' = 4, 'CONSUMER' = 5),
    failed    UInt8,
    data      String
) ENGINE = ReplacingMergeTree(keep_rank)
PARTITION BY day
ORDER BY (trace_id, span_id);

-- One row per write, inserted before its spans: its sequence, when, how
-- many spans, and the traces they belong to. Recovery reads the writes
-- after the checkpoint (a range of the primary key) and then their
-- traces' spans (by primary key), never scanning the span table.
CREATE TABLE IF NOT EXISTS writes (
    day        Date,
    seq        UInt64,
    written_at Int64,
    spans      UInt32,
    trace_ids  Array(FixedString(16))
) ENGINE = MergeTree
PARTITION BY day
ORDER BY seq;
