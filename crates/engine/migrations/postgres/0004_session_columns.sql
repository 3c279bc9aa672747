-- What a facilitator lists and aggregates, as indexed columns (docs/engine.md §7.4), so a list
-- of many sessions never decodes their state.
ALTER TABLE sessions ADD COLUMN workflow TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN workflow_version TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN release TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN harness TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN principal TEXT;
ALTER TABLE sessions ADD COLUMN organization TEXT;
ALTER TABLE sessions ADD COLUMN step_index BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN revise_rounds BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET
    workflow = state::jsonb ->> 'workflow',
    workflow_version = state::jsonb ->> 'workflow_version',
    release = state::jsonb ->> 'release',
    harness = state::jsonb -> 'host' ->> 'harness',
    principal = state::jsonb -> 'principal' ->> 'subject',
    organization = state::jsonb -> 'principal' ->> 'organization',
    step_index = (state::jsonb ->> 'step_index')::bigint,
    revise_rounds = coalesce((state::jsonb ->> 'revise_rounds')::bigint, 0);
CREATE INDEX sessions_updated ON sessions (updated_at);
CREATE INDEX sessions_workflow ON sessions (workflow, status);
CREATE INDEX sessions_organization ON sessions (organization, updated_at);
