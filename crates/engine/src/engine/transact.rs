//! The one compare-and-swap loop (`docs/engine.md` §3): every operation that changes a session
//! opens it through a door ([`Door`]), lets a rule decide on the session as read, and stores
//! the decided change only if the session is still at the revision read; when another call
//! changed it first, the loop reads again and decides again. A retry re-runs every check, so a
//! lost race surfaces as the code the winner's change implies (`stale_checkpoint`,
//! `validation_superseded`, `approval_stale`).

use super::{
    Engine,
    access::{Door, Opened},
};
use std::sync::Arc;
use tracing::Instrument as _;

use crate::{
    error::EngineError,
    model::{audit::AuditEntry, chain::ChainLink, payload::Rejected, session::Session},
};

/// Attempts before a call gives up on a session others keep changing.
const MAX_ATTEMPTS: u32 = 32;

/// What one attempt decided, from the session as it was read.
pub(super) enum Ruling<T> {
    /// Answer without changing the session, after appending the audit entry (a replayed
    /// retry, or a refusal).
    Answer(T, AuditEntry),
    /// Answer without changing the session or recording anything: there was nothing to do
    /// (a timer that another change or replica already took care of).
    Leave(T),
    /// Store `next` one revision on, if the session is still at the revision read, with its
    /// audit entry in the same transaction, then answer; when another call changed it first,
    /// decide again. The rule leaves `next.revision` alone: [`Engine::transact`] moves it.
    Move {
        next: Box<Session>,
        audit: AuditEntry,
        answer: T,
    },
}

/// What a call through the loop came to: its answer and the session it answered about, as read
/// or as stored, with its audit entry's link when this call stored a change.
pub(super) struct Done<T> {
    pub(super) answer: T,
    pub(super) session: Option<Arc<Session>>,
    pub(super) link: Option<ChainLink>,
}

/// The revision a change decided on `read` is stored at: the one place a revision moves.
pub(super) fn stored_revision(read: &Session) -> u64 {
    read.revision + 1
}

impl Engine {
    /// Opens the session through `door` (its refusal becomes `refused`'s answer), lets `decide`
    /// judge it, and stores the change it decides on. A lost race decides again from a fresh
    /// read, at most [`MAX_ATTEMPTS`] times.
    pub(super) async fn transact<T>(
        &self,
        door: Door<'_>,
        refused: impl Fn(Rejected) -> T,
        mut decide: impl FnMut(&Opened) -> Result<Ruling<T>, EngineError>,
    ) -> Result<Done<T>, EngineError> {
        for _ in 0..MAX_ATTEMPTS {
            let opened = match self.open(&door).await? {
                Ok(opened) => opened,
                Err(rejected) => {
                    return Ok(Done {
                        answer: refused(rejected),
                        session: None,
                        link: None,
                    });
                }
            };
            match decide(&opened)? {
                Ruling::Leave(answer) => {
                    return Ok(Done {
                        answer,
                        session: Some(opened.session().clone()),
                        link: None,
                    });
                }
                Ruling::Answer(answer, audit) => {
                    self.store
                        .append_audit(&audit)
                        .instrument(self.store_span("append_audit"))
                        .await?;
                    return Ok(Done {
                        answer,
                        session: Some(opened.session().clone()),
                        link: None,
                    });
                }
                Ruling::Move {
                    mut next,
                    audit,
                    answer,
                } => {
                    let read = opened.session();
                    next.revision = stored_revision(read);
                    let notices = self.notices(&opened, &next, &audit);
                    if let Some(link) = self
                        .store
                        .update_session(read.revision, &next, &audit, &notices)
                        .instrument(self.store_span("update_session"))
                        .await?
                    {
                        super::trace::transition(read, &next);
                        return Ok(Done {
                            answer,
                            session: Some(Arc::from(next)),
                            link: Some(link),
                        });
                    }
                }
            }
        }
        Err(EngineError::Contended {
            attempts: MAX_ATTEMPTS,
        })
    }
}
