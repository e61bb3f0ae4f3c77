-- Traces whose spans reached more than one partition (a collector not
-- routing by trace id): set aside, each a record of its own that adds to
-- this count alone (docs/ARCHITECTURE.md, "Scaling out"). Zero in the
-- rows stored before.
ALTER TABLE rollup_totals ADD COLUMN traces_split INTEGER NOT NULL DEFAULT 0;
