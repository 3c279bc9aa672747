//! The webhook outbox's own statements, the same on both backends (`docs/operations/deploy.md`,
//! Webhooks). Events join it with the change that causes them (`store/writes.rs`); here a
//! replica leases the due ones, and records how each attempt ended. A lease is a time, not a
//! lock: the replica that took it and died leaves a row another claims once it runs out.

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::StoreError;
use crate::model::{
    notify::{DeliveryOutcome, DeliveryRecord, OutboxCounts, WebhookDelivery},
    session::SessionId,
};

/// Longest error text kept of an attempt, in bytes.
pub(crate) const MAX_ERROR_BYTES: usize = 512;

/// Leases due rows (4 values: lease end, now, now, limit; then the backend's skip-locked
/// clause closes the subquery).
fn claim_statement(skip_locked: &str) -> String {
    format!(
        "UPDATE webhook_outbox SET claimed_until = $1, attempts = attempts + 1 \
         WHERE id IN (SELECT id FROM webhook_outbox WHERE state = 'pending' \
         AND next_attempt_at <= $2 AND (claimed_until IS NULL OR claimed_until <= $3) \
         ORDER BY next_attempt_at LIMIT $4{skip_locked}) \
         RETURNING id, event_id, endpoint, body, attempts, created_at"
    )
}

/// An error as kept: its first [`MAX_ERROR_BYTES`].
fn kept(error: &str) -> &str {
    &error[..error.floor_char_boundary(MAX_ERROR_BYTES)]
}

const DELIVERED: &str = "DELETE FROM webhook_outbox WHERE id = $1";
const RETRY: &str = "UPDATE webhook_outbox SET next_attempt_at = $1, claimed_until = NULL, \
    last_error = $2 WHERE id = $3";
const FAILED: &str = "UPDATE webhook_outbox SET state = 'failed', claimed_until = NULL, \
    last_error = $1 WHERE id = $2";
const COUNTS: &str = "SELECT state, COUNT(*) FROM webhook_outbox GROUP BY state";
const OF_SESSION: &str = "SELECT event_id, event_type, endpoint, state, attempts, last_error \
    FROM webhook_outbox WHERE session_id = $1 ORDER BY id LIMIT $2";
const ALL_FAILED: &str = "SELECT event_id, event_type, endpoint, state, attempts, last_error \
    FROM webhook_outbox WHERE state = 'failed' ORDER BY id DESC LIMIT $1";

pub(crate) async fn claim<DB>(
    pool: &Pool<DB>,
    skip_locked: &str,
    now: i64,
    lease_until: i64,
    limit: u32,
) -> Result<Vec<WebhookDelivery>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let statement = claim_statement(skip_locked);
    let rows = sqlx::query::<DB>(&statement)
        .bind(lease_until)
        .bind(now)
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(WebhookDelivery {
                id: row.try_get(0)?,
                event_id: row.try_get(1)?,
                endpoint: row.try_get(2)?,
                body: row.try_get(3)?,
                attempts: u32::try_from(row.try_get::<i64, _>(4)?).unwrap_or(u32::MAX),
                created_at: row.try_get(5)?,
            })
        })
        .collect()
}

pub(crate) async fn finish<DB>(
    pool: &Pool<DB>,
    id: i64,
    outcome: &DeliveryOutcome,
) -> Result<(), StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    let query = match outcome {
        DeliveryOutcome::Delivered => sqlx::query::<DB>(DELIVERED).bind(id),
        DeliveryOutcome::Retry {
            next_attempt_at,
            error,
        } => sqlx::query::<DB>(RETRY)
            .bind(*next_attempt_at)
            .bind(kept(error))
            .bind(id),
        DeliveryOutcome::Failed { error } => sqlx::query::<DB>(FAILED).bind(kept(error)).bind(id),
    };
    query.execute(pool).await?;
    Ok(())
}

pub(crate) async fn counts<DB>(pool: &Pool<DB>) -> Result<OutboxCounts, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut counts = OutboxCounts::default();
    for row in sqlx::query::<DB>(COUNTS).fetch_all(pool).await? {
        let state: String = row.try_get(0)?;
        let n = u64::try_from(row.try_get::<i64, _>(1)?).unwrap_or_default();
        match state.as_str() {
            "pending" => counts.pending = n,
            "failed" => counts.failed = n,
            _ => {}
        }
    }
    Ok(counts)
}

pub(crate) async fn records<DB>(
    pool: &Pool<DB>,
    session: Option<&SessionId>,
    limit: u32,
) -> Result<Vec<DeliveryRecord>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let limit = i64::from(limit);
    let rows = match session {
        Some(id) => {
            sqlx::query::<DB>(OF_SESSION)
                .bind(id.as_str())
                .bind(limit)
                .fetch_all(pool)
                .await?
        }
        None => {
            sqlx::query::<DB>(ALL_FAILED)
                .bind(limit)
                .fetch_all(pool)
                .await?
        }
    };
    rows.iter()
        .map(|row| {
            Ok(DeliveryRecord {
                event_id: row.try_get(0)?,
                event: row.try_get(1)?,
                endpoint: row.try_get(2)?,
                state: row.try_get(3)?,
                attempts: u32::try_from(row.try_get::<i64, _>(4)?).unwrap_or(u32::MAX),
                last_error: row.try_get(5)?,
            })
        })
        .collect()
}
