//! `rimthan.get_active_step`: the session's active step, for the checkpoint that is current.

use super::{Engine, Evidence, SERVER_NAME};
use crate::{
    audit::Operation, error::EngineError, payload::StepResult, request::ActiveStepRequest,
    session::Principal, view::Pinned,
};

impl Engine {
    /// `rimthan.get_active_step`.
    pub async fn active_step(
        &self,
        req: ActiveStepRequest,
        principal: Option<&Principal>,
    ) -> Result<StepResult, EngineError> {
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
            Err(rejected) => return Ok(StepResult::Rejected(rejected)),
        };
        let pinned = Pinned::resolve(&release, &session, &self.policies)?;
        let payload = pinned.active_payload(&session, &self.key, SERVER_NAME);
        // A read that succeeds changes nothing and proves nothing new: it is counted in the
        // metrics, not logged row by row (docs/engine.md §7). A refused read was audited above.
        Ok(StepResult::Active(Box::new(payload)))
    }
}
