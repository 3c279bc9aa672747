-- When each session's next timer is due (docs/engine.md §6.3): a reminder or an expiry of the
-- sign-off it waits for, or the deadline of the step it works on, in seconds since the Unix
-- epoch; null when nothing is timed. The timer task finds due sessions by this index without
-- reading any state; sessions stored before timers existed have none.
ALTER TABLE sessions ADD COLUMN due_at BIGINT;
CREATE INDEX sessions_due ON sessions (due_at) WHERE due_at IS NOT NULL;
