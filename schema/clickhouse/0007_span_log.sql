-- The write log moves into trace_spans: each write inserts, with the rows
-- of its traces, one row under the all-zero trace id (no span has it)
-- holding its sequence and the ids of its traces. Those rows lead every
-- part's key order, so recovery reads them by primary key, and a write
-- costs one part instead of two: the materialized view that filled writes
-- from every span insert (0005) goes, and nothing writes or reads the
-- table writes any more (0011 drops it).
DROP TABLE IF EXISTS writes_mv;
