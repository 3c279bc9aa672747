-- The readiness probe's row (docs/engine.md §7.2): after a commit failed on a storage fault,
-- `/readyz` commits 64 KiB here, and calls the store ready again only once that succeeds.
CREATE TABLE writer_probe (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    room  BYTEA
);
