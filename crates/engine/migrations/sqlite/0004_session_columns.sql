-- What a facilitator lists and aggregates, as indexed columns (docs/engine.md §7.4), so a list
-- of many sessions never decodes their state.
ALTER TABLE sessions ADD COLUMN workflow TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN workflow_version TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN release TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN harness TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN principal TEXT;
ALTER TABLE sessions ADD COLUMN organization TEXT;
ALTER TABLE sessions ADD COLUMN step_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN revise_rounds INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET
    workflow = json_extract(state, '$.workflow'),
    workflow_version = json_extract(state, '$.workflow_version'),
    release = json_extract(state, '$.release'),
    harness = json_extract(state, '$.host.harness'),
    principal = json_extract(state, '$.principal.subject'),
    organization = json_extract(state, '$.principal.organization'),
    step_index = json_extract(state, '$.step_index'),
    revise_rounds = coalesce(json_extract(state, '$.revise_rounds'), 0);
CREATE INDEX sessions_updated ON sessions (updated_at);
CREATE INDEX sessions_workflow ON sessions (workflow, status);
CREATE INDEX sessions_organization ON sessions (organization, updated_at);
