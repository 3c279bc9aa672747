-- The status column lets operators and /metrics count open sessions without parsing state.
ALTER TABLE sessions ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
UPDATE sessions SET status = state::jsonb ->> 'status';
CREATE INDEX sessions_status ON sessions (status);
