-- Sessions: one row each, state as JSON; `revision` is the compare-and-swap key.
CREATE TABLE sessions (
    id          TEXT    PRIMARY KEY NOT NULL,
    revision    INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    state       TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
);

-- Append-only: rows are inserted, never updated or deleted.
CREATE TABLE audit_log (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id          TEXT,
    seq                 INTEGER,
    tool                TEXT NOT NULL,
    outcome             TEXT NOT NULL,
    codes               TEXT NOT NULL,
    attestation_sha256  TEXT,
    reports_sha256      TEXT,
    principal           TEXT,
    at                  TEXT NOT NULL
);
CREATE INDEX audit_log_session ON audit_log (session_id, id);

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;

CREATE TABLE secrets (
    name   TEXT PRIMARY KEY NOT NULL,
    value  BLOB NOT NULL
);
