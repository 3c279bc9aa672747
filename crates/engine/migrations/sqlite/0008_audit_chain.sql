-- The hash-chained audit log (docs/engine.md §7.6): every entry written from here on names its
-- chain (its session, or the day of a start refused before it had one), its place in it, the
-- digest of the entry before it and its own digest over a canonical encoding of itself. One row
-- per chain holds the chain's length and head, locked by each append to that chain only, and
-- the signed anchor retention left when it pruned the chain's start. Entries written before
-- this migration (ids below `first_chained`) stay unchained.
ALTER TABLE audit_log ADD COLUMN chain TEXT;
ALTER TABLE audit_log ADD COLUMN chain_index INTEGER;
ALTER TABLE audit_log ADD COLUMN prev_sha256 TEXT;
ALTER TABLE audit_log ADD COLUMN entry_sha256 TEXT;
CREATE INDEX audit_log_chain ON audit_log (chain, chain_index);

CREATE TABLE audit_chains (
    chain   TEXT    PRIMARY KEY NOT NULL,
    length  INTEGER NOT NULL,
    head    TEXT    NOT NULL,
    anchor  TEXT
);

CREATE TABLE audit_chain_start (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    first_chained  INTEGER NOT NULL
);
INSERT INTO audit_chain_start (id, first_chained) SELECT 1, coalesce(max(id), 0) + 1 FROM audit_log;

-- Every provenance key this database has signed with: a rotated key stays here, published and
-- able to verify what it signed (docs/operations/evidence.md).
CREATE TABLE provenance_keys (
    key_id      TEXT PRIMARY KEY NOT NULL,
    public_key  TEXT NOT NULL,
    added_at    TEXT NOT NULL
);
