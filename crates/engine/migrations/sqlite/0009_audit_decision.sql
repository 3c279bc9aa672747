-- An approver's decision on a step waiting for sign-off (docs/engine.md §6.2): the step, the
-- note or reason they gave, and for a waiver the check, rule, output path and output digest,
-- as JSON. Who decided is the entry's principal and organization. Entries of the four tools
-- have none.
ALTER TABLE audit_log ADD COLUMN decision TEXT;
