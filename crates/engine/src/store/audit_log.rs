//! The audit log as stored: one row type both backends read entries back through.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use super::{StoreError, StoreErrorKind, decode_codes, decode_operation, decode_outcome};
use crate::{
    model::audit::{AuditCheck, AuditEntry, Judgement},
    model::session::SessionId,
    model::session::WorkflowRef,
};

const OF_SESSION: &str = "SELECT * FROM audit_log WHERE session_id = $1 ORDER BY id";
/// Newest first.
const RECENT: &str = "SELECT * FROM audit_log WHERE session_id = $1 ORDER BY id DESC LIMIT $2";

/// The entries of one session, oldest first.
pub(crate) async fn of_session<DB>(
    pool: &Pool<DB>,
    session: &SessionId,
) -> Result<Vec<AuditEntry>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> AuditRow: FromRow<'r, DB::Row>,
    AuditRow: Send + Unpin,
{
    let rows: Vec<AuditRow> = sqlx::query_as::<DB, AuditRow>(OF_SESSION)
        .bind(session.as_str())
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(AuditEntry::try_from).collect()
}

/// The latest `limit` entries of one session, oldest first.
pub(crate) async fn recent<DB>(
    pool: &Pool<DB>,
    session: &SessionId,
    limit: u32,
) -> Result<Vec<AuditEntry>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> AuditRow: FromRow<'r, DB::Row>,
    AuditRow: Send + Unpin,
{
    let rows: Vec<AuditRow> = sqlx::query_as::<DB, AuditRow>(RECENT)
        .bind(session.as_str())
        .bind(i64::from(limit))
        .fetch_all(pool)
        .await?;
    rows.into_iter().rev().map(AuditEntry::try_from).collect()
}

/// An audit entry as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct AuditRow {
    session_id: Option<String>,
    seq: Option<i64>,
    tool: String,
    outcome: String,
    codes: String,
    attestation_sha256: Option<String>,
    reports_sha256: Option<String>,
    principal: Option<String>,
    at: String,
    organization: Option<String>,
    workflow: Option<String>,
    workflow_version: Option<String>,
    step: Option<String>,
    step_index: Option<i64>,
    failed: Option<String>,
    seconds: Option<i64>,
    checks: Option<String>,
    decision: Option<String>,
}

impl TryFrom<AuditRow> for AuditEntry {
    type Error = StoreError;

    /// Refuses values this server never writes.
    fn try_from(row: AuditRow) -> Result<Self, Self::Error> {
        let corrupt = |what: &str| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("audit entry: stored {what} is not one this server writes"),
            )
        };
        let count = |n: i64, what: &str| u64::try_from(n).map_err(|_| corrupt(what));
        let judgement = match (row.step, row.step_index) {
            (Some(step), Some(index)) => Some(Judgement {
                step,
                step_index: count(index, "step index")?,
                failed: serde_json::from_str(row.failed.as_deref().unwrap_or("[]"))
                    .map_err(|_| corrupt("list of failed validators"))?,
                seconds: row.seconds.map(|s| count(s, "seconds")).transpose()?,
            }),
            _ => None,
        };
        Ok(AuditEntry {
            session_id: row
                .session_id
                .map(|s| s.parse().map_err(|_| corrupt("session id")))
                .transpose()?,
            seq: row.seq.map(|s| count(s, "seq")).transpose()?,
            tool: decode_operation(&row.tool)?,
            outcome: decode_outcome(&row.outcome)?,
            codes: decode_codes(&row.codes)?,
            attestation_sha256: row.attestation_sha256,
            reports_sha256: row.reports_sha256,
            principal: row.principal,
            organization: row.organization,
            workflow: row
                .workflow
                .zip(row.workflow_version)
                .map(|(id, version)| WorkflowRef { id, version }),
            judgement,
            checks: match row.checks.as_deref() {
                None => Vec::new(),
                Some(json) => serde_json::from_str::<Vec<AuditCheck>>(json)
                    .map_err(|_| corrupt("check results"))?,
            },
            decision: row
                .decision
                .map(|json| serde_json::from_str(&json).map_err(|_| corrupt("decision")))
                .transpose()?,
            at: row.at,
        })
    }
}
