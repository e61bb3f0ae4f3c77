-- Analysis partitions (store.Partitioned); '' is the store's own, which
-- everything stored before them becomes.

-- A record is the partition's that stored it last. The window index gains
-- the partition: a partition's analyser scans its own records of a window,
-- filtered in the index, so the rows are still read for their trace id and
-- edges alone (part, appended at the end of the row, is never read there).
ALTER TABLE records ADD COLUMN part TEXT NOT NULL DEFAULT '';
DROP INDEX IF EXISTS records_by_window;
CREATE INDEX records_by_window ON records (win, part);

-- A window's state is the sum of its partitions' parts, one row each,
-- with when it was written (unix nanoseconds, the writer's clock: what
-- store.Peers.PeerWindows looks for). A part a partition emptied keeps its
-- row with a NULL state until retention drops the window, so that the
-- other partitions see that it changed; it reads as no state. Rows of
-- before are the store's own, written at this migration.
CREATE TABLE states_parts (
    win     INTEGER NOT NULL,
    part    TEXT NOT NULL,
    written INTEGER NOT NULL,
    state   BLOB,
    PRIMARY KEY (win, part)
);
INSERT INTO states_parts (win, part, written, state)
    SELECT win, '', CAST(strftime('%s', 'now') AS INTEGER) * 1000000000, state FROM states;
DROP TABLE states;
ALTER TABLE states_parts RENAME TO states;
CREATE INDEX states_by_written ON states (written, part, win);
