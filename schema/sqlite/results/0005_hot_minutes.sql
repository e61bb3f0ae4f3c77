-- Incidents read the minutes in which a node owned at least 10 failures
-- (SPEC 4.8's count threshold): a partial index holds just those rows of
-- the minute tier, so finding hot minutes costs what there are of them,
-- not a scan of every node's minutes in the range.
CREATE INDEX IF NOT EXISTS rollup_node_hot ON rollup_node (tier, bucket) WHERE owned >= 10;

-- A root API's figures over time read its rows alone.
CREATE INDEX IF NOT EXISTS rollup_api_by_api ON rollup_api (tier, api, bucket);
CREATE INDEX IF NOT EXISTS rollup_radius_by_api ON rollup_radius (tier, api, bucket);
CREATE INDEX IF NOT EXISTS rollup_amp_by_api ON rollup_amp (tier, api, bucket);
