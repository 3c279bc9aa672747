//! `rimthan.get_active_step`: the session's active step, for the checkpoint that is current.

use super::{Engine, Evidence, SERVER_NAME};
use crate::{
    audit::Operation,
    error::EngineError,
    payload::StepResult,
    request::ActiveStepRequest,
    session::{Principal, SessionId},
    view::Pinned,
};

/// The stored state an answer was computed from: the same session at the same revision, under
/// the same registry and caller, gets the same answer (`docs/mcp.md` §3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnsweredAt {
    /// The session.
    pub session: SessionId,
    /// Its revision.
    pub revision: u64,
}

impl Engine {
    /// `rimthan.get_active_step`.
    pub async fn active_step(
        &self,
        req: ActiveStepRequest,
        principal: Option<&Principal>,
    ) -> Result<StepResult, EngineError> {
        Ok(self.active_step_at(req, principal).await?.0)
    }

    /// `rimthan.get_active_step`, with the revision a successful answer was computed from.
    pub async fn active_step_at(
        &self,
        req: ActiveStepRequest,
        principal: Option<&Principal>,
    ) -> Result<(StepResult, Option<AnsweredAt>), EngineError> {
        let (session, release) = match self
            .open(
                Operation::GetActiveStep,
                &req.checkpoint,
                principal,
                Evidence::None,
                None,
            )
            .await?
        {
            Ok(opened) => opened,
            Err(rejected) => return Ok((StepResult::Rejected(rejected), None)),
        };
        let pinned = Pinned::resolve(&release, &session, &self.policies)?;
        let mut payload = pinned.active_payload(&session, &self.key, SERVER_NAME);
        // A completed session's statement stays readable: a harness that lost the completing
        // answer gets it here.
        payload.provenance = self.provenance(&session).await?;
        // A read that succeeds changes nothing and proves nothing new: it is counted in the
        // metrics, not logged row by row (docs/engine.md §7). A refused read was audited above.
        let at = AnsweredAt {
            session: session.id.clone(),
            revision: session.revision,
        };
        Ok((StepResult::Active(Box::new(payload)), Some(at)))
    }

    /// The stored revision of a session, from memory when the store can prove it current
    /// (`docs/engine.md` §7.1); `None` when it is not stored.
    pub async fn revision(&self, session: &SessionId) -> Result<Option<u64>, EngineError> {
        Ok(self.store.load_session(session).await?.map(|s| s.revision))
    }
}
