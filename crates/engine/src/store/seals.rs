//! Writing and reading the seals over the audit chains' heads (`model/seal.rs`,
//! `docs/engine.md` §7.6), the same on both backends.
//!
//! A seal is written in one transaction: the last seal (for its number and digest), the chains
//! whose length differs from what the last seal recorded, the new seal, and each chain's
//! `sealed_length`. An append racing the transaction is either in the seal or, its length now
//! past `sealed_length`, in the next one. Two replicas sealing at once both try the same
//! number; the second insert does nothing and its transaction is rolled back.

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::{StoreError, StoreErrorKind};
use crate::model::{
    chain::GENESIS,
    provenance::ProvenanceKey,
    seal::{Seal, SealedHead},
};

/// The last seal (no values).
const LAST: &str = "SELECT body FROM audit_seals ORDER BY seq DESC LIMIT 1";
/// Chains changed since their last seal (no values).
const CHANGED: &str = "SELECT chain, length, head FROM audit_chains \
    WHERE sealed_length IS NULL OR sealed_length <> length ORDER BY chain";
/// Records a seal unless its number is taken (2 values: seq, body).
const INSERT: &str = "INSERT INTO audit_seals (seq, body) VALUES ($1, $2) \
    ON CONFLICT (seq) DO NOTHING RETURNING seq";
/// Marks what a chain's seal recorded (2 values: length, chain).
const MARK: &str = "UPDATE audit_chains SET sealed_length = $1 WHERE chain = $2";
/// Every seal in order (no values).
const ALL: &str = "SELECT body FROM audit_seals ORDER BY seq";

fn corrupt(e: serde_json::Error) -> StoreError {
    StoreError::new(StoreErrorKind::Corrupt, format!("audit seal: {e}"))
}

/// Seals every chain changed since the last seal, signed with `key` at `at`; `None` when no
/// chain changed or another writer sealed at the same moment.
pub(crate) async fn seal<DB>(
    pool: &Pool<DB>,
    key: &ProvenanceKey,
    at: &str,
) -> Result<Option<u64>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut tx = pool.begin().await?;
    let last = match sqlx::query::<DB>(LAST).fetch_optional(&mut *tx).await? {
        Some(row) => {
            Some(serde_json::from_str::<Seal>(&row.try_get::<String, _>(0)?).map_err(corrupt)?)
        }
        None => None,
    };
    let rows = sqlx::query::<DB>(CHANGED).fetch_all(&mut *tx).await?;
    let mut heads = Vec::with_capacity(rows.len());
    for row in &rows {
        let length: i64 = row.try_get(1)?;
        heads.push(SealedHead {
            chain: row.try_get(0)?,
            length: u64::try_from(length).unwrap_or(0),
            head: row.try_get(2)?,
        });
    }
    if heads.is_empty() {
        return Ok(None);
    }
    let (seq, previous) = match &last {
        Some(last) => (last.seq + 1, last.digest()),
        None => (1, GENESIS.to_owned()),
    };
    let seal = Seal::sign(key, seq, &previous, at, heads);
    let body = serde_json::to_string(&seal).expect("seals serialize");
    let inserted = sqlx::query::<DB>(INSERT)
        .bind(i64::try_from(seq).unwrap_or(i64::MAX))
        .bind(body.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    if inserted.is_none() {
        return Ok(None);
    }
    for head in &seal.heads {
        sqlx::query::<DB>(MARK)
            .bind(i64::try_from(head.length).unwrap_or(i64::MAX))
            .bind(head.chain.as_str())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(Some(seq))
}

/// Every seal, in order.
pub(crate) async fn all<DB>(pool: &Pool<DB>) -> Result<Vec<Seal>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let rows = sqlx::query::<DB>(ALL).fetch_all(pool).await?;
    rows.iter()
        .map(|row| serde_json::from_str::<Seal>(&row.try_get::<String, _>(0)?).map_err(corrupt))
        .collect()
}
