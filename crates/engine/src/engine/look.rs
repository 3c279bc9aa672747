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
        approval::{Approver, FacilitatorOf},
        session::{Session, SessionId, Status},
    },
    rules::approval::may_decide,
    store::{SessionQuery, SessionSummary},
};

/// The most waiting sessions one look lists, most recently changed first.
pub const MAX_WAITING_LISTED: u32 = 200;

/// A session waiting for a sign-off someone may give, with its timers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    /// The session as listed.
    #[serde(flatten)]
    pub summary: SessionSummary,
    /// The step waiting.
    pub step: String,
    /// RFC 3339 time the sign-off was asked for, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    /// RFC 3339 time it expires undecided, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl Engine {
    /// The sessions waiting for a sign-off `approver` may give (by a role the step names, or as
    /// a facilitator it admits; never their own session unless the step allows it), the ones
    /// that expire soonest first, then the longest waiting; at most [`MAX_WAITING_LISTED`].
    pub async fn waiting_for(&self, approver: &Approver) -> Result<Vec<Waiting>, EngineError> {
        let organization = match approver.facilitator {
            FacilitatorOf::Everyone => None,
            FacilitatorOf::OwnOrganization | FacilitatorOf::Nobody => {
                approver.principal.organization.clone()
            }
        };
        let query = SessionQuery {
            status: Some(Status::AwaitingApproval),
            organization: organization.clone(),
            limit: MAX_WAITING_LISTED,
            ..SessionQuery::default()
        };
        let mut waiting = Vec::new();
        for summary in self.store.list_sessions(&query).await? {
            if organization.is_some() && summary.organization != organization {
                continue;
            }
            let Some(session) = self.store.load_session(&summary.id).await? else {
                continue;
            };
            let Some(pending) = session.approval.as_ref() else {
                continue;
            };
            let approval = self.pinned_release(&session).ok().and_then(|release| {
                let workflow = release.workflow(&session.workflow, &session.workflow_version)?;
                let step = workflow.steps().get(session.step_index)?;
                step.doc().approval.clone()
            });
            let decided = pending
                .approvals
                .iter()
                .any(|a| a.subject == approver.principal.subject);
            let mine = !decided
                && approval
                    .is_some_and(|a| may_decide(&a, approver, session.principal.as_ref()).is_ok());
            if mine {
                waiting.push(Waiting {
                    summary,
                    step: pending.step.to_string(),
                    requested_at: pending.requested_at.clone(),
                    expires_at: pending.expires_at.clone(),
                });
            }
        }
        // Soonest expiry first (RFC 3339 UTC times of one spelling order as strings); those
        // that never expire last, longest waiting first.
        waiting.sort_by(|a, b| {
            (
                a.expires_at.is_none(),
                &a.expires_at,
                &a.requested_at,
                &a.summary.updated_at,
            )
                .cmp(&(
                    b.expires_at.is_none(),
                    &b.expires_at,
                    &b.requested_at,
                    &b.summary.updated_at,
                ))
        });
        Ok(waiting)
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
