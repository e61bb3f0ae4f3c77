-- Sampled traffic (docs/SPEC.md §4.9): every count is an estimate, each
-- trace weighted by W, the traces of the traffic it stands for. Beside
-- the weighted counts the rollups keep what weighting added (Σ(W−1):
-- received = traces − excess) and the sums the estimates' variances are
-- computed from (c = W(W−1) times a trace's values). Every one is zero
-- for an unsampled trace, so rows stored before hold what they held:
-- their traces were all received, unweighted.
ALTER TABLE rollup_totals ADD COLUMN traces_excess INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_totals ADD COLUMN spans_excess INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_totals ADD COLUMN traces_var INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_totals ADD COLUMN sampling_conflicts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_totals ADD COLUMN sampling_unusable INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN excess INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var_failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var_root INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var_radius INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var_radius2 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var_mis2 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var_mis_elig INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN var_elig2 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_version ADD COLUMN excess INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_version ADD COLUMN var INTEGER NOT NULL DEFAULT 0;
-- Traces that stood for themselves alone (W = 1), by where the tail
-- sampling policy's hash puts their ids (analysis.TailCounts): what
-- tells tail sampling that recorded no probability.
ALTER TABLE rollup_api ADD COLUMN tail_clean_16 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN tail_clean_2 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN tail_clean INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN tail_failed_2 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_api ADD COLUMN tail_failed INTEGER NOT NULL DEFAULT 0;
