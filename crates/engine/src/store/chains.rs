//! Reading the audit chains back (`docs/engine.md` §7.6), and the provenance keys, the same on
//! both backends.

use rimthan_registry::PublicKeyFile;
use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, FromRow, IntoArguments, Pool, Row, Type,
};

use super::{StoreError, StoreErrorKind, audit_log::AuditRow};
use crate::{
    model::audit::AuditEntry,
    model::chain::{ChainHead, ChainLink, RetentionAnchor, StoredLink},
};

/// Every chain, of the head rows and of the entries, with its head row if any (1 value: one
/// chain, or null for all).
const HEADS: &str = "SELECT c.chain, h.length, h.head, h.anchor FROM (SELECT chain FROM audit_chains \
    UNION SELECT DISTINCT chain FROM audit_log WHERE chain IS NOT NULL) c \
    LEFT JOIN audit_chains h ON h.chain = c.chain WHERE (CAST($1 AS TEXT) IS NULL OR c.chain = $1) \
    ORDER BY c.chain";
/// A chain's entries in id order (1 value: the chain).
const ENTRIES: &str = "SELECT * FROM audit_log WHERE chain = $1 ORDER BY id";
/// Entries without a chain written since chaining began (no values).
const UNCHAINED: &str = "SELECT * FROM audit_log WHERE chain IS NULL AND id >= \
    (SELECT first_chained FROM audit_chain_start WHERE id = 1) ORDER BY id";
/// The index and digest of a session's completing entry (1 value: the chain).
const COMPLETION: &str = "SELECT chain_index, entry_sha256 FROM audit_log WHERE chain = $1 \
    AND tool IN ('submit_step_reports', 'approve_step') AND outcome = 'completed' \
    ORDER BY id LIMIT 1";
/// The provenance keys (no values).
const KEYS: &str = "SELECT key_id, public_key FROM provenance_keys ORDER BY added_at, key_id";
/// Records a provenance key once (3 values: key id, public key, time).
const ADD_KEY: &str = "INSERT INTO provenance_keys (key_id, public_key, added_at) \
    VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING";

/// A chained audit row as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ChainedRow {
    id: i64,
    session_id: Option<String>,
    chain_index: Option<i64>,
    prev_sha256: Option<String>,
    entry_sha256: Option<String>,
    #[sqlx(flatten)]
    row: AuditRow,
}

impl From<ChainedRow> for StoredLink {
    fn from(row: ChainedRow) -> Self {
        StoredLink {
            id: row.id,
            session: row.session_id,
            index: row.chain_index.and_then(|i| u64::try_from(i).ok()),
            prev: row.prev_sha256,
            sha256: row.entry_sha256,
            entry: AuditEntry::try_from(row.row).map_err(|e| e.message),
        }
    }
}

pub(crate) async fn heads<DB>(
    pool: &Pool<DB>,
    chain: Option<&str>,
) -> Result<Vec<ChainHead>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB> + Type<DB>,
    for<'r> Option<i64>: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let rows = sqlx::query::<DB>(HEADS).bind(chain).fetch_all(pool).await?;
    rows.iter()
        .map(|row| {
            let chain: String = row.try_get(0)?;
            let length: Option<i64> = row.try_get(1)?;
            let head: Option<String> = row.try_get(2)?;
            let anchor: Option<String> = row.try_get(3)?;
            let parsed = anchor
                .as_deref()
                .map(serde_json::from_str::<RetentionAnchor>);
            Ok(ChainHead {
                chain,
                head: length.zip(head).map(|(length, sha256)| ChainLink {
                    index: u64::try_from(length).unwrap_or(0),
                    sha256,
                }),
                anchor_unreadable: matches!(parsed, Some(Err(_))),
                anchor: parsed.and_then(Result::ok),
            })
        })
        .collect()
}

/// A chain's entries as stored, in id order.
pub(crate) async fn entries<DB>(pool: &Pool<DB>, chain: &str) -> Result<Vec<StoredLink>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> ChainedRow: FromRow<'r, DB::Row>,
{
    let rows = sqlx::query_as::<DB, ChainedRow>(ENTRIES)
        .bind(chain)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(StoredLink::from).collect())
}

/// Entries written since chaining began that name no chain.
pub(crate) async fn unchained<DB>(pool: &Pool<DB>) -> Result<Vec<StoredLink>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'r> ChainedRow: FromRow<'r, DB::Row>,
{
    let rows = sqlx::query_as::<DB, ChainedRow>(UNCHAINED)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(StoredLink::from).collect())
}

pub(crate) async fn completion<DB>(
    pool: &Pool<DB>,
    chain: &str,
) -> Result<Option<ChainLink>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB> + Type<DB>,
    for<'r> Option<i64>: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let row = sqlx::query::<DB>(COMPLETION)
        .bind(chain)
        .fetch_optional(pool)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let index: Option<i64> = row.try_get(0)?;
    let sha256: Option<String> = row.try_get(1)?;
    Ok(index.zip(sha256).map(|(index, sha256)| ChainLink {
        index: u64::try_from(index).unwrap_or(0),
        sha256,
    }))
}

pub(crate) async fn keys<DB>(pool: &Pool<DB>) -> Result<Vec<PublicKeyFile>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let rows = sqlx::query::<DB>(KEYS).fetch_all(pool).await?;
    rows.iter()
        .map(|row| {
            let key_id: String = row.try_get(0)?;
            Ok(PublicKeyFile {
                algorithm: "ed25519".into(),
                key_id: key_id.parse().map_err(|e: String| {
                    StoreError::new(StoreErrorKind::Corrupt, format!("provenance key: {e}"))
                })?,
                public_key: row.try_get(1)?,
            })
        })
        .collect()
}

pub(crate) async fn add_key<DB>(
    pool: &Pool<DB>,
    key: &PublicKeyFile,
    at: &str,
) -> Result<(), StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    sqlx::query::<DB>(ADD_KEY)
        .bind(key.key_id.as_str())
        .bind(key.public_key.as_str())
        .bind(at)
        .execute(pool)
        .await?;
    Ok(())
}
