-- Seals over the audit chains' heads (docs/engine.md §7.6): each a signed record of the length
-- and head of every chain that changed since the seal before, numbered and linked to it, so a
-- chain cut back or deleted after it was sealed is named. `sealed_length` marks what the last
-- seal recorded of each chain; the seals themselves are the evidence.
CREATE TABLE audit_seals (
    seq   INTEGER PRIMARY KEY NOT NULL,
    body  TEXT    NOT NULL
);
ALTER TABLE audit_chains ADD COLUMN sealed_length INTEGER;
