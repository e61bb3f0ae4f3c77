-- Records move to a rowid table: a batch's records are appended at the
-- table's end (rowids increase) instead of being inserted at random places
-- of a B-tree keyed by trace id, which dirtied about one page of wide rows
-- per record, every one of them written to the WAL at commit. The trace id
-- is looked up in a unique index of its own (records_ids, narrow: a record
-- costs it a few bytes). Rows are copied in start order.
CREATE TABLE records_appended (
    trace_id BLOB NOT NULL,
    start    INTEGER NOT NULL,
    win      INTEGER NOT NULL,
    api      TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    edges    BLOB NOT NULL,
    result   BLOB NOT NULL,
    facts    BLOB NOT NULL
);
INSERT INTO records_appended (trace_id, start, win, api, seq, edges, result, facts)
    SELECT trace_id, start, win, api, seq, edges, result, facts FROM records ORDER BY start;
DROP TABLE records;
ALTER TABLE records_appended RENAME TO records;
CREATE UNIQUE INDEX records_ids ON records (trace_id);
CREATE INDEX records_by_window ON records (win);
CREATE INDEX records_by_start ON records (start);
