-- A compact index of the records' trace ids alone: looking up whether
-- traces have a record (every analysed trace asks) probes a few cached
-- pages instead of the wide rows of the records table.
CREATE INDEX IF NOT EXISTS records_ids ON records (trace_id);
