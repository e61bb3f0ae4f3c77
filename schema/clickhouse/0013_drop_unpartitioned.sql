-- The tables 0012 replaced with tables keyed by partition go: states
-- (states_by_part), dirty (dirty_by_part), rollup_gens
-- (rollup_gens_by_part). 0012 copied their rows; nothing reads or writes
-- them any more.
DROP TABLE IF EXISTS states;
DROP TABLE IF EXISTS dirty;
DROP TABLE IF EXISTS rollup_gens;
