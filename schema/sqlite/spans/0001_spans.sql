-- Spans as received, one row per (trace id, span id): a span sent again is
-- ignored. data is graph.AppendSpan. Rows are appended in write order, so
-- rowid order is write order.
CREATE TABLE IF NOT EXISTS spans (
    trace_id BLOB NOT NULL,
    span_id  BLOB NOT NULL,
    seq      INTEGER NOT NULL,
    data     BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS spans_by_id ON spans (trace_id, span_id);

-- One row per write: its sequence, the rowids it added and when it was
-- written. Recovery reads the spans of writes after the checkpoint;
-- retention deletes whole writes by rowid range, never scanning.
CREATE TABLE IF NOT EXISTS writes (
    seq        INTEGER PRIMARY KEY,
    first_row  INTEGER NOT NULL,
    last_row   INTEGER NOT NULL,
    written_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS writes_by_time ON writes (written_at);
