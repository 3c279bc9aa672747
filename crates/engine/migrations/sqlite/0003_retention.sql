-- Retention (docs/engine.md §7.3): an audit row may be deleted only when it is older than the
-- cutoff the server records for the prune it runs; any other delete is still refused.
CREATE TABLE retention (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    before  TEXT NOT NULL
);
INSERT INTO retention (id, before) VALUES (1, '');

DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN OLD.at >= (SELECT before FROM retention WHERE id = 1)
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only: rows leave it only by retention'); END;

CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX sessions_status_updated ON sessions (status, updated_at);
