-- What a facilitator counts (docs/engine.md §7.5): each audit entry names its caller's
-- organization and its workflow, and a judged submission its step, the validators that failed
-- it and, on a pass, the seconds the step took. Entries written before this stay without them.
ALTER TABLE audit_log ADD COLUMN organization TEXT;
ALTER TABLE audit_log ADD COLUMN workflow TEXT;
ALTER TABLE audit_log ADD COLUMN workflow_version TEXT;
ALTER TABLE audit_log ADD COLUMN step TEXT;
ALTER TABLE audit_log ADD COLUMN step_index BIGINT;
ALTER TABLE audit_log ADD COLUMN failed TEXT;
ALTER TABLE audit_log ADD COLUMN seconds BIGINT;
CREATE INDEX audit_log_judged ON audit_log
    (workflow, workflow_version, step_index, seconds, organization, outcome)
    WHERE step_index IS NOT NULL;
CREATE INDEX audit_log_refused_starts ON audit_log (workflow, workflow_version, organization)
    WHERE tool = 'start_workflow' AND outcome = 'blocked';
CREATE INDEX sessions_funnel ON sessions
    (workflow, workflow_version, organization, step_index, status, harness);
