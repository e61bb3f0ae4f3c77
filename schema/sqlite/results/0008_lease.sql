-- The analysis lease (store.Leaser): the one process that analyses this
-- directory, until when. Taken and renewed in write transactions, which
-- SQLite serialises across processes: a check and a replace are atomic.
-- Times are unix nanoseconds of the host's clock (one host: WAL mode
-- needs shared memory, so the directory cannot be shared across hosts).
CREATE TABLE IF NOT EXISTS lease (
    name      TEXT PRIMARY KEY,
    holder    TEXT NOT NULL,
    host      TEXT NOT NULL,
    pid       INTEGER NOT NULL,
    started   INTEGER NOT NULL,
    namespace TEXT NOT NULL,
    expires   INTEGER NOT NULL
);
