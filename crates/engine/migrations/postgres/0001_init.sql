-- Sessions: one row each, state as JSON; `revision` is the compare-and-swap key.
CREATE TABLE sessions (
    id          TEXT        PRIMARY KEY,
    revision    BIGINT      NOT NULL,
    seq         BIGINT      NOT NULL,
    state       TEXT        NOT NULL,
    created_at  TEXT        NOT NULL,
    updated_at  TEXT        NOT NULL
);

-- Append-only: rows are inserted, never updated or deleted.
CREATE TABLE audit_log (
    id                  BIGSERIAL PRIMARY KEY,
    session_id          TEXT,
    seq                 BIGINT,
    tool                TEXT NOT NULL,
    outcome             TEXT NOT NULL,
    codes               TEXT NOT NULL,
    attestation_sha256  TEXT,
    reports_sha256      TEXT,
    principal           TEXT,
    at                  TEXT NOT NULL
);
CREATE INDEX audit_log_session ON audit_log (session_id, id);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$;
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

CREATE TABLE secrets (
    name   TEXT  PRIMARY KEY,
    value  BYTEA NOT NULL
);
