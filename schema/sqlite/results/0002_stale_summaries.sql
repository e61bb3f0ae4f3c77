-- Windows whose state changed since their summary was stored: marked by
-- the batch that changes the state, cleared when the summary is stored.
CREATE TABLE IF NOT EXISTS stale_summaries (
    win INTEGER PRIMARY KEY
);
