//! Opening a session, through one of two doors: a participant's harness by the checkpoint it
//! holds (the checkpoint's signature, the session's owner, and the checkpoint's sequence against
//! the stored one), or an approver by the session's id (the organization is the boundary). What
//! either door lets through is an [`Opened`], which only this module makes.

use std::sync::Arc;
use tracing::Instrument as _;

use rimthan_registry::VerifiedRelease;

use super::{Engine, Evidence};
use crate::{
    error::EngineError,
    model::approval::{Approver, unknown_session},
    model::audit::Operation,
    model::codes::{Code, Failure},
    model::payload::Rejected,
    model::session::{LastRequest, Principal, Session, SessionId},
};

/// A session loaded for a call, or the failures that stop the call (with the session, when
/// one was found, so the rejection is audited against it).
type Loaded = Result<(Arc<Session>, Arc<VerifiedRelease>), (Option<Arc<Session>>, Vec<Failure>)>;

/// A session a door let a caller into, with the release it is pinned to.
pub(super) struct Opened {
    session: Arc<Session>,
    release: Arc<VerifiedRelease>,
}

impl Opened {
    /// The session as read.
    pub(super) fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The release it is pinned to.
    pub(super) fn release(&self) -> &Arc<VerifiedRelease> {
        &self.release
    }
}

/// The ways into a session.
pub(super) enum Door<'a> {
    /// A participant's harness, by the checkpoint it holds; a refusal is audited. A checkpoint
    /// one behind is current for `retry`, the request that made the session's latest change.
    Checkpoint {
        tool: Operation,
        token: &'a str,
        principal: Option<&'a Principal>,
        evidence: Evidence,
        retry: Option<&'a LastRequest>,
    },
    /// An approver or facilitator, by the session's id. Another organization's session answers
    /// as no session at all, and its chain records nothing of the attempt.
    Approver {
        session: &'a SessionId,
        approver: &'a Approver,
    },
    /// The server itself, firing a session's due timer by its id.
    Timer { session: &'a SessionId },
}

impl Engine {
    /// The release `session` is pinned to; releases are never removed, so one missing is the
    /// registry changed outside the server.
    pub(super) fn pinned_release(
        &self,
        session: &Session,
    ) -> Result<Arc<VerifiedRelease>, EngineError> {
        self.releases
            .snapshot()
            .release(&session.release)
            .cloned()
            .ok_or_else(|| EngineError::PinnedReleaseMissing(session.release.to_string()))
    }

    /// Loads the session `token` names. A checkpoint one behind is current for `retry`, the
    /// request that made the session's latest change.
    async fn load(
        &self,
        token: &str,
        principal: Option<&Principal>,
        retry: Option<&LastRequest>,
    ) -> Result<Loaded, EngineError> {
        let Some(checkpoint) = self.key.verify(token) else {
            return Ok(Err((
                None,
                vec![Failure::new(
                    Code::InvalidCheckpoint,
                    "the checkpoint is not one this server issued; use the checkpoint from the latest result or session file",
                )],
            )));
        };
        let Some(session) = self
            .store
            .load_session(&checkpoint.session)
            .instrument(self.store_span("load_session"))
            .await?
        else {
            return Ok(Err((
                None,
                vec![
                    Failure::new(
                        Code::SessionNotFound,
                        format!("session {} is not stored here", checkpoint.session),
                    )
                    .with("session_id", checkpoint.session.as_str()),
                ],
            )));
        };
        if !may_act(session.principal.as_ref(), principal) {
            return Ok(Err((Some(session), vec![access_denied()])));
        }
        let retried = retry.is_some()
            && session.last_change.as_ref() == retry
            && checkpoint.seq.checked_add(1) == Some(session.seq);
        if checkpoint.seq != session.seq && !retried {
            let failure = if checkpoint.seq < session.seq {
                Failure::new(
                    Code::StaleCheckpoint,
                    "a newer checkpoint exists; call rimthan.get_active_step with the latest one",
                )
                .with("checkpoint_seq", checkpoint.seq)
                .with("session_seq", session.seq)
            } else {
                Failure::new(
                    Code::InvalidCheckpoint,
                    "the checkpoint is ahead of the stored session",
                )
            };
            return Ok(Err((Some(session), vec![failure])));
        }
        let release = self.pinned_release(&session)?;
        Ok(Ok((session, release)))
    }

    /// Opens a session through `door`, or returns the refusal (audited at the checkpoint door);
    /// the session opened is named on the request's span.
    pub(super) async fn open(
        &self,
        door: &Door<'_>,
    ) -> Result<Result<Opened, Rejected>, EngineError> {
        let opened = self.open_door(door).await?;
        if let Ok(opened) = &opened {
            super::trace::record_session(&opened.session, &opened.release);
        }
        Ok(opened)
    }

    async fn open_door(&self, door: &Door<'_>) -> Result<Result<Opened, Rejected>, EngineError> {
        match *door {
            Door::Checkpoint {
                tool,
                token,
                principal,
                evidence,
                retry,
            } => Ok(match self.load(token, principal, retry).await? {
                Ok((session, release)) => Ok(Opened { session, release }),
                Err((session, failures)) => Err(self
                    .reject(tool, session.as_deref(), failures, principal, evidence)
                    .await?),
            }),
            Door::Approver { session, approver } => {
                let known = self
                    .store
                    .load_session(session)
                    .instrument(self.store_span("load_session"))
                    .await?;
                let Some(session) = known.filter(|s| approver.may_know(s.principal.as_ref()))
                else {
                    return Ok(Err(Rejected::new(vec![unknown_session(session.as_str())])));
                };
                let release = self.pinned_release(&session)?;
                Ok(Ok(Opened { session, release }))
            }
            Door::Timer { session } => {
                let Some(session) = self
                    .store
                    .load_session(session)
                    .instrument(self.store_span("load_session"))
                    .await?
                else {
                    return Ok(Err(Rejected::new(vec![unknown_session(session.as_str())])));
                };
                let release = self.pinned_release(&session)?;
                Ok(Ok(Opened { session, release }))
            }
        }
    }
}

pub(super) fn access_denied() -> Failure {
    Failure::new(
        Code::SessionAccessDenied,
        "this session belongs to another principal outside your organization",
    )
}

/// Whether `caller` may act on a session owned by `owner`. The organization is the tenant, and
/// a principal of none is a tenant apart (`docs/engine.md` §3.2): only the owner's tenant may
/// act, any subject of the owner's organization (the authenticated Git handoff), or the owner
/// itself. Unowned sessions are open to any caller.
pub(super) fn may_act(owner: Option<&Principal>, caller: Option<&Principal>) -> bool {
    match (owner, caller) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(owner), Some(caller)) => {
            owner.organization == caller.organization
                && (owner.organization.is_some() || owner.subject == caller.subject)
        }
    }
}
