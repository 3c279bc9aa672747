//! What a facilitator reads: sessions listed from their indexed columns, most recently changed
//! first, without decoding any session's state (`docs/engine.md` §7.4).

use std::str::FromStr;

use rimthan_registry::VerifiedRegistry;
use serde::Serialize;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use crate::model::session::{SessionId, Status};

/// How far back a listing looks, written `30m`, `12h` or `7d` (1 to 100,000 of the unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Age(time::Duration);

impl FromStr for Age {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            format!(
                "{:?}: give a number and a unit, as 30m, 12h or 7d",
                text.chars().take(32).collect::<String>()
            )
        };
        let Some((last, _)) = text.char_indices().last() else {
            return Err(invalid());
        };
        let (number, unit) = text.split_at(last);
        let n: i64 = number.parse().map_err(|_| invalid())?;
        if !(1..=100_000).contains(&n) {
            return Err(invalid());
        }
        match unit {
            "m" => Ok(Age(time::Duration::minutes(n))),
            "h" => Ok(Age(time::Duration::hours(n))),
            "d" => Ok(Age(time::Duration::days(n))),
            _ => Err(invalid()),
        }
    }
}

impl Age {
    /// `days` days.
    pub fn days(days: u32) -> Self {
        Age(time::Duration::days(days.into()))
    }

    /// The time this long ago, spelled as the store spells times (RFC 3339, UTC, whole
    /// seconds), so it compares with stored times as text.
    pub fn cutoff(self) -> String {
        // Before year 1 (an age of over 2,000 years), nothing is older: the earliest time.
        time::OffsetDateTime::now_utc()
            .checked_sub(self.0)
            .filter(|t| t.year() >= 1)
            .and_then(|t| {
                t.replace_nanosecond(0)
                    .ok()?
                    .format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_owned())
    }
}

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

impl SessionSummary {
    /// How many steps the session's workflow has, when `registry` still holds its release.
    pub fn steps(&self, registry: &VerifiedRegistry) -> Option<usize> {
        let release = registry.release(&self.release.parse().ok()?)?;
        let workflow = release.workflow(
            &self.workflow.parse().ok()?,
            &self.workflow_version.parse().ok()?,
        )?;
        Some(workflow.steps().len())
    }

    /// Where the session stands, as `2/4` ([`position`]).
    pub fn position(&self, steps: Option<usize>) -> String {
        position(self.status, self.step_index, steps)
    }
}

/// Where a session stands, as `2/4`: the active step's number, or all of them once completed;
/// `?` for a count `steps` does not know.
pub fn position(status: Status, step_index: u64, steps: Option<usize>) -> String {
    let total = steps.map_or_else(|| "?".to_owned(), |n| n.to_string());
    let at = match status {
        Status::Completed => steps.map_or(step_index, |n| n as u64),
        _ => step_index + 1,
    };
    format!("{at}/{total}")
}

/// Lists sessions on either backend. The `WHERE` clause names only the filters that are set,
/// so each query can use the index that fits it; the SQL text holds column names and
/// placeholders, never a value.
pub(crate) async fn list<DB>(
    pool: &Pool<DB>,
    query: &SessionQuery,
) -> Result<Vec<SessionSummary>, super::StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> SummaryRow: FromRow<'r, DB::Row>,
    SummaryRow: Send + Unpin,
{
    let filters = [
        ("status = ", query.status.map(Status::as_str)),
        ("workflow = ", query.workflow.as_deref()),
        ("organization = ", query.organization.as_deref()),
        ("updated_at >= ", query.changed_since.as_deref()),
    ];
    let mut placeholders = (1..).map(|n| format!("${n}"));
    let set: Vec<String> = filters
        .iter()
        .filter(|(_, value)| value.is_some())
        .zip(&mut placeholders)
        .map(|((column, _), placeholder)| format!("{column}{placeholder}"))
        .collect();
    let clause = if set.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", set.join(" AND "))
    };
    let sql = format!(
        "SELECT id, principal, organization, workflow, workflow_version, release, harness, \
         status, step_index, revise_rounds, created_at, updated_at FROM sessions {clause} \
         ORDER BY updated_at DESC, id LIMIT {} OFFSET {}",
        placeholders.next().expect("endless"),
        placeholders.next().expect("endless"),
    );
    let mut statement = sqlx::query_as::<DB, SummaryRow>(&sql);
    for value in filters.iter().filter_map(|(_, value)| *value) {
        statement = statement.bind(value);
    }
    let rows: Vec<SummaryRow> = statement
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
