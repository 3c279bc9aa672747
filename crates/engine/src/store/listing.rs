//! What a facilitator reads: sessions listed from their indexed columns, most recently changed
//! first, without decoding any session's state (`docs/engine.md` §7.4).

use serde::Serialize;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};

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

/// Lists sessions on either backend with its spelling of the list query (6 values: status,
/// workflow, organization, changed-since, each or null; limit; offset).
pub(crate) async fn list<DB>(
    pool: &Pool<DB>,
    sql: &str,
    query: &SessionQuery,
) -> Result<Vec<SessionSummary>, super::StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> SummaryRow: FromRow<'r, DB::Row>,
    SummaryRow: Send + Unpin,
{
    let rows: Vec<SummaryRow> = sqlx::query_as::<DB, SummaryRow>(sql)
        .bind(query.status.map(|s| s.as_str()))
        .bind(query.workflow.as_deref())
        .bind(query.organization.as_deref())
        .bind(query.changed_since.as_deref())
        .bind(i64::from(query.limit.clamp(1, MAX_PAGE)))
        .bind(i64::try_from(query.offset).unwrap_or(i64::MAX))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(SessionSummary::try_from).collect()
}

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
