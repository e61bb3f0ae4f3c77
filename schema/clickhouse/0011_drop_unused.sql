-- Tables no code reads or writes go. Each was replaced by a later
-- migration; a database the store creates runs that migration in the same
-- start, so the table never holds a row there:
--
-- * spans (0001): spans are rows of trace_spans (0005);
-- * writes (0001): the write log is rows of trace_spans (0007);
-- * trace_index (0002): record_index replaced it (0005);
-- * rollup_totals, rollup_api, rollup_radius, rollup_amp, rollup_owner,
--   rollup_service (0003): the one narrow rollups table replaced them
--   (0005).
--
-- Their materialized views are gone already (trace_index_mv in 0005,
-- writes_mv in 0007). The migrations that create them stay as they are:
-- they are this schema's history, and the statements of 0004 and 0005
-- that alter or copy from these tables run before this one.
DROP TABLE IF EXISTS spans;
DROP TABLE IF EXISTS writes;
DROP TABLE IF EXISTS trace_index;
DROP TABLE IF EXISTS rollup_totals;
DROP TABLE IF EXISTS rollup_api;
DROP TABLE IF EXISTS rollup_radius;
DROP TABLE IF EXISTS rollup_amp;
DROP TABLE IF EXISTS rollup_owner;
DROP TABLE IF EXISTS rollup_service;
