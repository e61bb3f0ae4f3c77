-- The change log: what tells the readers of a database what another
-- process's writes changed, so that each can keep what it read
-- (docs/ARCHITECTURE.md, "The read cache"). Every writing store names
-- itself (writer, a random id per Open) and numbers its rows (seq). A
-- write that changes rollups, summaries or records inserts an intent row
-- (kind 0) before its first insert and a done row (kind 1, same seq) once
-- every insert is acknowledged; span writes are announced by done rows
-- sent behind them, once their spans are acknowledged. A row names the minutes [lo, hi) whose rollups
-- the write changes (lo >= hi: none), the windows [wlo, whi) whose
-- summaries it changes, the stamp buckets of the traces whose spans or
-- records it changes, whether it changes everything (retention), and
-- whether it changes rollup generations (a repair: readers keep them).
-- at is the writer's clock when the row was sent: readers read the rows
-- of the last minute or two by it, in key order, nothing else (no part
-- names, block numbers or merge state). Rows are never replaced; they are
-- dropped with their day (retention, and the store's own trim).
CREATE TABLE IF NOT EXISTS changes (
    day     Date,
    at      Int64,
    writer  String,
    seq     UInt64,
    kind    UInt8,
    lo      Int64,
    hi      Int64,
    wlo     Int64,
    whi     Int64,
    everything UInt8,
    gens    UInt8,
    traces  Array(UInt16)
) ENGINE = MergeTree
PARTITION BY day
ORDER BY (at, writer, seq, kind);
