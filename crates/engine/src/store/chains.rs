//! Reading the audit chains back (`docs/engine.md` §7.6), and the provenance keys, the same on
//! both backends: only the SQL's placeholders differ ([`ChainStatements`]).

use rimthan_registry::PublicKeyFile;
use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, FromRow, IntoArguments, Pool, Row, Type,
};

use super::{StoreError, StoreErrorKind, audit_log::AuditRow};
use crate::{
    audit::AuditEntry,
    chain::{ChainHead, ChainLink, RetentionAnchor, StoredLink},
};

/// One backend's spelling of the chain queries.
pub(crate) struct ChainStatements {
    /// Every chain, of the head rows and of the entries, with its head row if any (1 value:
    /// one chain, or null for all).
    pub(crate) heads: &'static str,
    /// A chain's entries in id order (1 value: the chain).
    pub(crate) entries: &'static str,
    /// Entries without a chain written since chaining began (no values).
    pub(crate) unchained: &'static str,
    /// The index and digest of a session's completing entry (1 value: the chain).
    pub(crate) completion: &'static str,
    /// The provenance keys (no values).
    pub(crate) keys: &'static str,
    /// Records a provenance key once (3 values: key id, public key, time).
    pub(crate) add_key: &'static str,
}

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
    sql: &ChainStatements,
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
    let rows = sqlx::query::<DB>(sql.heads)
        .bind(chain)
        .fetch_all(pool)
        .await?;
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

pub(crate) async fn entries<DB>(
    pool: &Pool<DB>,
    sql: &str,
    chain: Option<&str>,
) -> Result<Vec<StoredLink>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'r> ChainedRow: FromRow<'r, DB::Row>,
    ChainedRow: Send + Unpin,
{
    let query = sqlx::query_as::<DB, ChainedRow>(sql);
    let query = match chain {
        Some(chain) => query.bind(chain),
        None => query,
    };
    Ok(query
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(StoredLink::from)
        .collect())
}

pub(crate) async fn completion<DB>(
    pool: &Pool<DB>,
    sql: &ChainStatements,
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
    let row = sqlx::query::<DB>(sql.completion)
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

pub(crate) async fn keys<DB>(
    pool: &Pool<DB>,
    sql: &ChainStatements,
) -> Result<Vec<PublicKeyFile>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let rows = sqlx::query::<DB>(sql.keys).fetch_all(pool).await?;
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
    sql: &ChainStatements,
    key: &PublicKeyFile,
    at: &str,
) -> Result<(), StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
{
    sqlx::query::<DB>(sql.add_key)
        .bind(key.key_id.as_str())
        .bind(key.public_key.as_str())
        .bind(at)
        .execute(pool)
        .await?;
    Ok(())
}
