//! Timers (`docs/engine.md` §6.3): a sign-off's reminder and expiry and a step's deadline, fired
//! by the server, never by a model. A timer is not a row of its own: it is a time the session
//! holds (`PendingApproval::remind_at`, `expires_at`, `Session::deadline`), copied into an
//! indexed column at every write. So a decision or a submission that comes first cancels it by
//! changing the state it belongs to, a restart finds what came due while it was down, and
//! firing one is a change like any other: through the one compare-and-swap loop, with its audit
//! entry in the same transaction. Of replicas firing the same timer, the first swap wins; the
//! others read the session again, find nothing due, and record nothing. A replica killed while
//! firing committed nothing, so the timer is still due for the next.

use super::{Engine, access::Door, transact::Ruling};
use crate::{
    error::EngineError,
    model::session::{SessionId, now_rfc3339, unix_seconds},
    rules::{timer, view::Pinned},
};

/// Sessions one pass fires at most; a pass that fires this many is followed by another.
pub const TIMER_BATCH: u32 = 64;

/// What one pass over the due timers did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimersFired {
    /// Sessions found due.
    pub due: usize,
    /// Timers this pass fired (the rest another change or replica took first).
    pub fired: usize,
}

impl Engine {
    /// Fires the timers due at `now` (RFC 3339; the server passes its clock, tests any time
    /// they like), at most [`TIMER_BATCH`] sessions, one timer each.
    pub async fn fire_due(&self, now: &str) -> Result<TimersFired, EngineError> {
        let Some(at) = unix_seconds(now) else {
            return Ok(TimersFired::default());
        };
        let due = self.store.due_sessions(at, TIMER_BATCH).await?;
        let mut pass = TimersFired {
            due: due.len(),
            fired: 0,
        };
        for id in &due {
            if self.fire(id, now).await? {
                pass.fired += 1;
            }
        }
        Ok(pass)
    }

    /// Fires the timers due now, by the server's clock.
    pub async fn fire_due_now(&self) -> Result<TimersFired, EngineError> {
        self.fire_due(&now_rfc3339()).await
    }

    /// Fires the timer of session `id` due at `now`, if one still is.
    async fn fire(&self, id: &SessionId, now: &str) -> Result<bool, EngineError> {
        let door = Door::Timer { session: id };
        let done = self
            .transact(
                door,
                |_| false,
                |opened| {
                    let session = opened.session();
                    let pinned = Pinned::resolve(opened.release(), session, &self.policies)?;
                    let Some((next, fired, record)) = timer::fired(&pinned, session, now) else {
                        return Ok(Ruling::Leave(false));
                    };
                    let mut audit =
                        self.audit(fired.operation(), Some(&next), next.status.into(), None);
                    audit.organization = session
                        .principal
                        .as_ref()
                        .and_then(|p| p.organization.clone());
                    audit.decision = Some(record);
                    Ok(Ruling::Move {
                        next: Box::new(next),
                        audit,
                        answer: true,
                    })
                },
            )
            .await?;
        Ok(done.answer)
    }
}
