//! What a facilitator reads: sessions listed from their indexed columns, most recently changed
//! first, without decoding any session's state (`docs/engine.md` §7.4).

use serde::Serialize;

use crate::session::{SessionId, Status};

/// Sessions one page lists at most.
pub const MAX_PAGE: u32 = 1000;

/// A filter and a page over stored sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionQuery {
    /// Only sessions in this status.
    pub status: Option<Status>,
    /// Only sessions of this workflow id.
    pub workflow: Option<String>,
    /// Only sessions whose owner belongs to this organization.
    pub organization: Option<String>,
    /// Only sessions changed at or after this RFC 3339 time.
    pub changed_since: Option<String>,
    /// Rows per page (1 to [`MAX_PAGE`]).
    pub limit: u32,
    /// Rows skipped before the page.
    pub offset: u64,
}

/// One listed session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    /// The session.
    pub id: SessionId,
    /// The owner's subject, when auth was on.
    pub principal: Option<String>,
    /// The owner's organization, when the token named one.
    pub organization: Option<String>,
    /// The workflow id.
    pub workflow: String,
    /// Its version.
    pub workflow_version: String,
    /// The release the session is pinned to.
    pub release: String,
    /// The harness it was started on.
    pub harness: String,
    /// Where it stands.
    pub status: Status,
    /// Steps passed so far (the active step's index).
    pub step_index: u64,
    /// Times a validator sent a step back.
    pub revise_rounds: u64,
    /// RFC 3339 time of the start.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub updated_at: String,
}

/// The columns a list selects, in [`SessionSummary`]'s order.
pub(crate) const SUMMARY_COLUMNS: &str = "id, principal, organization, workflow, \
    workflow_version, release, harness, status, step_index, revise_rounds, created_at, updated_at";

/// A listed row as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct SummaryRow {
    id: String,
    principal: Option<String>,
    organization: Option<String>,
    workflow: String,
    workflow_version: String,
    release: String,
    harness: String,
    status: String,
    step_index: i64,
    revise_rounds: i64,
    created_at: String,
    updated_at: String,
}

impl TryFrom<SummaryRow> for SessionSummary {
    type Error = super::StoreError;

    /// Refuses values this server never writes.
    fn try_from(row: SummaryRow) -> Result<Self, Self::Error> {
        let corrupt = |what: &str| {
            super::StoreError::new(
                super::StoreErrorKind::Corrupt,
                format!(
                    "session {:.64}: stored {what} is not one this server writes",
                    row.id
                ),
            )
        };
        Ok(SessionSummary {
            id: row.id.parse().map_err(|_| corrupt("id"))?,
            status: Status::from_wire(&row.status).ok_or_else(|| corrupt("status"))?,
            step_index: u64::try_from(row.step_index).map_err(|_| corrupt("step index"))?,
            revise_rounds: u64::try_from(row.revise_rounds).map_err(|_| corrupt("revise count"))?,
            principal: row.principal,
            organization: row.organization,
            workflow: row.workflow,
            workflow_version: row.workflow_version,
            release: row.release,
            harness: row.harness,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}
