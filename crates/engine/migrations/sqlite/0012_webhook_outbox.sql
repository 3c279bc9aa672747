-- The webhook outbox (docs/operations/deploy.md, Webhooks): each event for each receiver,
-- written in the same transaction as the change that caused it, delivered at least once with
-- backoff until `created_at` + 24 hours, then kept as `failed`. A delivered row is deleted.
-- `claimed_until` leases a row to the replica attempting it; a lease that ran out (the replica
-- died) is claimed again.
CREATE TABLE webhook_outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL,
    endpoint        TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    event_type      TEXT    NOT NULL,
    body            TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    next_attempt_at BIGINT  NOT NULL,
    claimed_until   BIGINT,
    attempts        BIGINT  NOT NULL DEFAULT 0,
    state           TEXT    NOT NULL DEFAULT 'pending',
    last_error      TEXT,
    UNIQUE (event_id, endpoint)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_outbox_session ON webhook_outbox (session_id);
