-- The deterministic checks a preparation ran (docs/engine.md §5.1): per check its id, the
-- digest of its signed document and of each file it read, its verdict and each finding's rule,
-- severity, path and line, as JSON. Never the text a check read, nor a finding's message,
-- which may quote it. Entries written before this, and entries of other calls, have none.
ALTER TABLE audit_log ADD COLUMN checks TEXT;
