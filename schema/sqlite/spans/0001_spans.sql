-- Spans as received: one row per trace per write, data holding that
-- trace's spans of the write (graph.TraceEncoder.AppendSpans: names once,
-- then the spans). Rows are appended in write order, so rowid order is
-- write order. A span sent twice is dropped when its trace is read back
-- (by trace id and span id).
CREATE TABLE IF NOT EXISTS spans (
    trace_id BLOB NOT NULL,
    seq      INTEGER NOT NULL,
    n        INTEGER NOT NULL,
    data     BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_by_trace ON spans (trace_id);

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
