//! Opening the session a checkpoint names: the checkpoint's signature, the session's owner, and
//! the checkpoint's sequence against the stored one.

use std::sync::Arc;

use rimthan_registry::VerifiedRelease;

use super::{Engine, Evidence};
use crate::{
    error::EngineError,
    model::audit::Operation,
    model::codes::{Code, Failure},
    model::payload::Rejected,
    model::session::{LastChange, Principal, Session},
};

/// A session loaded for a call, or the failures that stop the call (with the session, when
/// one was found, so the rejection is audited against it).
type Opened = Result<(Arc<Session>, Arc<VerifiedRelease>), (Option<Arc<Session>>, Vec<Failure>)>;

impl Engine {
    /// Loads the session `token` names. A checkpoint one behind is current for `retry`, the
    /// request that made the session's latest change.
    async fn load(
        &self,
        token: &str,
        principal: Option<&Principal>,
        retry: Option<&LastChange>,
    ) -> Result<Opened, EngineError> {
        let Some(checkpoint) = self.key.verify(token) else {
            return Ok(Err((
                None,
                vec![Failure::new(
                    Code::InvalidCheckpoint,
                    "the checkpoint is not one this server issued; use the checkpoint from the latest result or session file",
                )],
            )));
        };
        let Some(session) = self.store.load_session(&checkpoint.session).await? else {
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

    /// Loads the session a checkpoint names, or audits and returns the rejection.
    pub(super) async fn open(
        &self,
        tool: Operation,
        token: &str,
        principal: Option<&Principal>,
        evidence: Evidence,
        retry: Option<&LastChange>,
    ) -> Result<Result<(Arc<Session>, Arc<VerifiedRelease>), Rejected>, EngineError> {
        Ok(match self.load(token, principal, retry).await? {
            Ok(opened) => Ok(opened),
            Err((session, failures)) => Err(self
                .reject(tool, session.as_deref(), failures, principal, evidence)
                .await?),
        })
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
