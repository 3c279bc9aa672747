//! What a facilitator counts (`docs/engine.md` §7.5): where a workflow's sessions stand, how
//! often each step and validator sends them back, and how long steps take, all from indexed
//! columns, never from decoding a session's state.

use std::collections::BTreeMap;

use serde::Serialize;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use super::{AuditEntry, StoreError, StoreErrorKind, audit_log::AuditRow};
use crate::model::session::Status;

/// Refused starts a workflow's statistics list at most (the most recent).
pub const REFUSED_STARTS_LISTED: i64 = 20;

/// One workflow version, seen by everyone or by one organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsQuery {
    /// The workflow id.
    pub workflow: String,
    /// Its version.
    pub workflow_version: String,
    /// Only sessions and calls of this organization.
    pub organization: Option<String>,
}

/// Sessions of one workflow version in one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionCount {
    /// The active step's index (the step count once completed).
    pub step_index: u64,
    /// Their status.
    pub status: Status,
    /// The harness they were started on.
    pub harness: String,
    /// How many.
    pub sessions: u64,
}

/// The judged submissions of one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepJudgements {
    /// The step's index.
    pub step_index: u64,
    /// Submissions judged.
    pub judged: u64,
    /// Of them, sent back for revision.
    pub revised: u64,
    /// Passes whose time on the step is known.
    pub timed: u64,
    /// Median seconds from entering the step to passing it (nearest rank).
    pub median_seconds: Option<u64>,
    /// 90th percentile of the same.
    pub p90_seconds: Option<u64>,
}

/// How often one validator sent one step back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValidatorFailures {
    /// The step's index.
    pub step_index: u64,
    /// The validator id.
    pub validator: String,
    /// Submissions it failed.
    pub failed: u64,
}

/// What a facilitator sees of one workflow version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowStats {
    /// Stored sessions by step, status and harness.
    pub sessions: Vec<SessionCount>,
    /// Judged submissions by step, in step order.
    pub steps: Vec<StepJudgements>,
    /// Failures by step and validator.
    pub failures: Vec<ValidatorFailures>,
    /// Starts refused for blockers (they store no session).
    pub refused_starts: u64,
    /// The most recent of them, newest first (at most [`REFUSED_STARTS_LISTED`]).
    pub recent_refused_starts: Vec<AuditEntry>,
}

impl WorkflowStats {
    /// For each of `steps` steps, the sessions that reached it: those whose step index is at
    /// least its index (a completed session has passed every step).
    pub fn reached(&self, steps: usize) -> Vec<u64> {
        (0..steps as u64)
            .map(|i| {
                self.sessions
                    .iter()
                    .filter(|c| c.step_index >= i)
                    .map(|c| c.sessions)
                    .sum()
            })
            .collect()
    }

    /// Sessions in `status`.
    pub fn in_status(&self, status: Status) -> u64 {
        self.sessions
            .iter()
            .filter(|c| c.status == status)
            .map(|c| c.sessions)
            .sum()
    }

    /// Sessions by the harness they were started on.
    pub fn by_harness(&self) -> BTreeMap<&str, u64> {
        let mut counts = BTreeMap::new();
        for c in &self.sessions {
            *counts.entry(c.harness.as_str()).or_default() += c.sessions;
        }
        counts
    }
}

/// A workflow version with stored sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowCount {
    /// The workflow id.
    pub workflow: String,
    /// Its version.
    pub workflow_version: String,
    /// Sessions stored.
    pub sessions: u64,
    /// Of them, completed.
    pub completed: u64,
}

// Each statistics query takes the workflow, its version and the organization or null as its
// first three values.

/// `step_index, status, harness, sessions`.
const SESSIONS: &str = "SELECT step_index, status, harness, count(*) AS sessions FROM sessions \
    WHERE workflow = $1 AND workflow_version = $2 AND (CAST($3 AS TEXT) IS NULL OR organization = $3) \
    GROUP BY step_index, status, harness";
/// `step_index, judged, revised, timed`, by step index.
const STEPS: &str = "SELECT step_index, count(*) AS judged, \
    sum(CASE WHEN outcome = 'revise' THEN 1 ELSE 0 END) AS revised, count(seconds) AS timed \
    FROM audit_log WHERE step_index IS NOT NULL AND workflow = $1 AND workflow_version = $2 \
    AND (CAST($3 AS TEXT) IS NULL OR organization = $3) GROUP BY step_index ORDER BY step_index";
/// One step's known times in order, one row from an offset (values 4 and 5: step index, offset).
const NTH_SECONDS: &str = "SELECT seconds FROM audit_log WHERE step_index IS NOT NULL \
    AND workflow = $1 AND workflow_version = $2 AND (CAST($3 AS TEXT) IS NULL OR organization = $3) \
    AND step_index = $4 AND seconds IS NOT NULL ORDER BY seconds LIMIT 1 OFFSET $5";
/// `refused`.
const REFUSED: &str = "SELECT count(*) FROM audit_log WHERE tool = 'start_workflow' \
    AND outcome = 'blocked' AND workflow = $1 AND workflow_version = $2 \
    AND (CAST($3 AS TEXT) IS NULL OR organization = $3)";
/// Audit rows of the most recent refused starts (value 4: how many).
const RECENT_REFUSED: &str = "SELECT * FROM audit_log WHERE tool = 'start_workflow' \
    AND outcome = 'blocked' AND workflow = $1 AND workflow_version = $2 \
    AND (CAST($3 AS TEXT) IS NULL OR organization = $3) ORDER BY id DESC LIMIT $4";
/// `workflow, workflow_version, sessions, completed` (1 value: the organization or null).
const WORKFLOWS: &str = "SELECT workflow, workflow_version, count(*) AS sessions, \
    sum(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS completed FROM sessions \
    WHERE (CAST($1 AS TEXT) IS NULL OR organization = $1) \
    GROUP BY workflow, workflow_version ORDER BY workflow, workflow_version";

/// The query for `step_index, validator, failed`, with a backend's `FROM` item spreading each
/// row's failed validators ([`Backend::FAILED_VALIDATORS`](super::Backend::FAILED_VALIDATORS)).
pub(crate) fn failures(failed_validators: &str) -> String {
    format!(
        "SELECT a.step_index, f.value AS validator, count(*) AS failed FROM audit_log a \
         CROSS JOIN {failed_validators} WHERE a.step_index IS NOT NULL AND a.workflow = $1 \
         AND a.workflow_version = $2 AND (CAST($3 AS TEXT) IS NULL OR a.organization = $3) \
         AND a.outcome = 'revise' GROUP BY a.step_index, f.value ORDER BY a.step_index, f.value"
    )
}

#[derive(Debug, FromRow)]
pub(crate) struct SessionCountRow {
    step_index: i64,
    status: String,
    harness: String,
    sessions: i64,
}

#[derive(Debug, FromRow)]
pub(crate) struct StepRow {
    step_index: i64,
    judged: i64,
    revised: i64,
    timed: i64,
}

#[derive(Debug, FromRow)]
pub(crate) struct FailureRow {
    step_index: i64,
    validator: String,
    failed: i64,
}

#[derive(Debug, FromRow)]
pub(crate) struct WorkflowRow {
    workflow: String,
    workflow_version: String,
    sessions: i64,
    completed: i64,
}

fn count(n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| {
        StoreError::new(
            StoreErrorKind::Corrupt,
            format!("a stored count or index is negative ({n})"),
        )
    })
}

/// The nearest-rank offset of percentile `p` (of 100) among `n` ordered values.
fn rank_offset(n: u64, p: u64) -> i64 {
    i64::try_from((n * p).div_ceil(100).max(1) - 1).unwrap_or(i64::MAX)
}

/// Counts one workflow version on either backend.
pub(crate) async fn workflow_stats<DB>(
    pool: &Pool<DB>,
    failures_query: &str,
    query: &StatsQuery,
) -> Result<WorkflowStats, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB>,
    i64: Type<DB>,
    usize: ColumnIndex<DB::Row>,
    for<'r> SessionCountRow: FromRow<'r, DB::Row>,
    for<'r> StepRow: FromRow<'r, DB::Row>,
    for<'r> FailureRow: FromRow<'r, DB::Row>,
    for<'r> AuditRow: FromRow<'r, DB::Row>,
    SessionCountRow: Send + Unpin,
    StepRow: Send + Unpin,
    FailureRow: Send + Unpin,
    AuditRow: Send + Unpin,
{
    let workflow = query.workflow.as_str();
    let version = query.workflow_version.as_str();
    let organization = query.organization.as_deref();
    let sessions = sqlx::query_as::<DB, SessionCountRow>(SESSIONS)
        .bind(workflow)
        .bind(version)
        .bind(organization)
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| {
            Ok(SessionCount {
                step_index: count(row.step_index)?,
                status: Status::from_wire(&row.status).ok_or_else(|| {
                    StoreError::new(StoreErrorKind::Corrupt, "a stored status is unknown")
                })?,
                harness: row.harness,
                sessions: count(row.sessions)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let step_rows = sqlx::query_as::<DB, StepRow>(STEPS)
        .bind(workflow)
        .bind(version)
        .bind(organization)
        .fetch_all(pool)
        .await?;
    let mut steps = Vec::with_capacity(step_rows.len());
    for row in step_rows {
        let timed = count(row.timed)?;
        let nth = async |p: u64| -> Result<Option<u64>, StoreError> {
            if timed == 0 {
                return Ok(None);
            }
            let seconds: i64 = sqlx::query_scalar::<DB, i64>(NTH_SECONDS)
                .bind(workflow)
                .bind(version)
                .bind(organization)
                .bind(row.step_index)
                .bind(rank_offset(timed, p))
                .fetch_one(pool)
                .await?;
            count(seconds).map(Some)
        };
        let median_seconds = nth(50).await?;
        let p90_seconds = nth(90).await?;
        steps.push(StepJudgements {
            step_index: count(row.step_index)?,
            judged: count(row.judged)?,
            revised: count(row.revised)?,
            timed,
            median_seconds,
            p90_seconds,
        });
    }
    let failures = sqlx::query_as::<DB, FailureRow>(failures_query)
        .bind(workflow)
        .bind(version)
        .bind(organization)
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| {
            Ok(ValidatorFailures {
                step_index: count(row.step_index)?,
                validator: row.validator,
                failed: count(row.failed)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let refused: i64 = sqlx::query_scalar::<DB, i64>(REFUSED)
        .bind(workflow)
        .bind(version)
        .bind(organization)
        .fetch_one(pool)
        .await?;
    let recent_refused_starts = sqlx::query_as::<DB, AuditRow>(RECENT_REFUSED)
        .bind(workflow)
        .bind(version)
        .bind(organization)
        .bind(REFUSED_STARTS_LISTED)
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(AuditEntry::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(WorkflowStats {
        sessions,
        steps,
        failures,
        refused_starts: count(refused)?,
        recent_refused_starts,
    })
}

/// The workflow versions with stored sessions, on either backend.
pub(crate) async fn workflows<DB>(
    pool: &Pool<DB>,
    organization: Option<&str>,
) -> Result<Vec<WorkflowCount>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'r> WorkflowRow: FromRow<'r, DB::Row>,
    WorkflowRow: Send + Unpin,
{
    sqlx::query_as::<DB, WorkflowRow>(WORKFLOWS)
        .bind(organization)
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|row| {
            Ok(WorkflowCount {
                workflow: row.workflow,
                workflow_version: row.workflow_version,
                sessions: count(row.sessions)?,
                completed: count(row.completed)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::rank_offset;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        assert_eq!(rank_offset(1, 50), 0);
        assert_eq!(rank_offset(1, 90), 0);
        assert_eq!(rank_offset(2, 50), 0);
        assert_eq!(rank_offset(10, 50), 4);
        assert_eq!(rank_offset(10, 90), 8);
        assert_eq!(rank_offset(11, 90), 9);
        assert_eq!(rank_offset(100, 90), 89);
    }
}
