//! What an approver looks at (`docs/operations/facilitator.md` §3): the sessions waiting for a
//! sign-off they may give, and one such session. Reads only, held to the same tenancy as a
//! decision: another organization's sessions, and sessions whose waiting step names none of the
//! approver's roles, are not theirs to see.

use std::sync::Arc;

use rimthan_registry::VerifiedRegistry;

use super::Engine;
use crate::{
    error::EngineError,
    model::{
        approval::Approver,
        session::{Session, SessionId, Status},
    },
    store::{SessionQuery, SessionSummary},
};

/// The most waiting sessions one look lists, most recently changed first.
pub const MAX_WAITING_LISTED: u32 = 200;

impl Engine {
    /// The sessions of `approver`'s organization waiting for a sign-off whose step names one of
    /// their roles, most recently changed first, at most [`MAX_WAITING_LISTED`].
    pub async fn waiting_for(
        &self,
        approver: &Approver,
    ) -> Result<Vec<SessionSummary>, EngineError> {
        let organization = approver.principal.organization.clone();
        let query = SessionQuery {
            status: Some(Status::AwaitingApproval),
            organization: organization.clone(),
            limit: MAX_WAITING_LISTED,
            ..SessionQuery::default()
        };
        let registry = self.releases.snapshot();
        Ok(self
            .store
            .list_sessions(&query)
            .await?
            .into_iter()
            .filter(|s| s.organization == organization)
            .filter(|s| {
                names_a_role_of(
                    &registry,
                    approver,
                    [&s.release, &s.workflow, &s.workflow_version],
                    s.step_index,
                )
            })
            .collect())
    }

    /// The session `id` when it waits for a sign-off `approver` holds a role for, in their
    /// organization; none otherwise, as for an id no session has.
    pub async fn awaiting(
        &self,
        id: &SessionId,
        approver: &Approver,
    ) -> Result<Option<Arc<Session>>, EngineError> {
        let Some(session) = self.store.load_session(id).await? else {
            return Ok(None);
        };
        let organization = session
            .principal
            .as_ref()
            .and_then(|p| p.organization.clone());
        let waits = session.status == Status::AwaitingApproval
            && organization == approver.principal.organization
            && names_a_role_of(
                &self.releases.snapshot(),
                approver,
                [
                    session.release.as_str(),
                    session.workflow.as_str(),
                    &session.workflow_version.to_string(),
                ],
                session.step_index as u64,
            );
        Ok(waits.then_some(session))
    }
}

/// Whether the step at `index` of the workflow `[release, workflow, version]` asks for a
/// sign-off naming one of `approver`'s roles.
fn names_a_role_of(
    registry: &VerifiedRegistry,
    approver: &Approver,
    [release, workflow, version]: [&str; 3],
    index: u64,
) -> bool {
    let step = (|| {
        let release = registry.release(&release.parse().ok()?)?;
        let workflow = release.workflow(&workflow.parse().ok()?, &version.parse().ok()?)?;
        workflow.steps().get(usize::try_from(index).ok()?)
    })();
    step.and_then(|s| s.doc().approval.as_ref())
        .is_some_and(|a| a.roles.iter().any(|r| approver.roles.contains(r)))
}
