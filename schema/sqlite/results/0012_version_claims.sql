-- How each service.version's hops answered claims and honoured those they
-- received (the rollout gate's claim checks, docs/ANALYSIS.md "Rollout
-- gate"): its failed hops and those that answered a valid claim; the
-- unclaimed answers its retry-enabled calls received and those retried;
-- its calls that declined a retry of an unclaimed answer. Zero in the
-- rows stored before: the gate judges no claim check on them.
ALTER TABLE rollup_version ADD COLUMN failed_hops INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_version ADD COLUMN claimed_hops INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_version ADD COLUMN unclaimed_answers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_version ADD COLUMN retried_unclaimed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rollup_version ADD COLUMN suppressed INTEGER NOT NULL DEFAULT 0;
