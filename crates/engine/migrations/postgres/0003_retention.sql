-- Retention (docs/engine.md §7.3): an audit row may be deleted only when it is older than the
-- cutoff the server records for the prune it runs; any other delete is still refused.
CREATE TABLE retention (
    id      INT  PRIMARY KEY CHECK (id = 1),
    before  TEXT NOT NULL
);
INSERT INTO retention (id, before) VALUES (1, '');

DROP TRIGGER audit_log_no_change ON audit_log;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE FUNCTION audit_log_retained() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.at >= (SELECT before FROM retention WHERE id = 1) THEN
        RAISE EXCEPTION 'audit_log is append-only: rows leave it only by retention';
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_log_retained();

CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX sessions_status_updated ON sessions (status, updated_at);
