-- Analysis partitions (store.Partitioned): every write is one partition's,
-- '' being the store's own (every write made before partitions existed).
-- A partition's analyser replays its own writes after its checkpoint
-- through (part, seq). Sequences stay global: they increase within each
-- partition too.
ALTER TABLE writes ADD COLUMN part TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS writes_by_part ON writes (part, seq);
