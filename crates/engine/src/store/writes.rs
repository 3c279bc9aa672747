//! The statements every write runs, changes and retention alike, the same on both backends: only
//! the placeholder syntax of their SQL differs ([`Statements`], [`PruneStatements`]).

use std::collections::BTreeMap;

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::{
    AuditEntry, PRUNE_BATCH, Pruned, StoreError,
    cache::SessionCache,
    commit::{SessionRow, Write},
    encode_codes, encode_names,
};
use crate::{
    chain::{GENESIS, RetentionAnchor, chain_of, entry_digest},
    provenance::ProvenanceKey,
    session::SessionId,
};

/// One backend's spelling of the write statements.
pub(crate) struct Statements {
    /// A new session row (15 values, in [`SessionRow`]'s order).
    pub(crate) insert_session: &'static str,
    /// A compare-and-swap of a session row, returning its id when it swapped (9 values).
    pub(crate) update_session: &'static str,
    /// An audit entry (21 values, in [`AuditEntry`]'s order, its workflow and judgement
    /// spread over columns, then its chain, index, previous and own digest).
    pub(crate) insert_audit: &'static str,
    /// Creates the head rows of `n` chains where there are none and returns each chain's length
    /// and head, locking the rows until the transaction ends, in the order given (2·n values:
    /// each chain and [`GENESIS`]). One statement for the whole batch: an upsert that rewrites
    /// nothing but takes each row's lock, as `SELECT … FOR UPDATE` would.
    pub(crate) chains_open: fn(usize) -> String,
    /// Records `n` chains' new lengths and heads in one statement (3·n values: each chain, its
    /// length, its head).
    pub(crate) chains_advance: fn(usize) -> String,
    /// The readiness probe's write, which needs room as a change does (no values).
    pub(crate) probe: &'static str,
}

/// Applies writes on one connection (inside the caller's transaction): whether each took effect.
pub(crate) async fn apply<DB>(
    conn: &mut DB::Connection,
    sql: &Statements,
    writes: &[&Write],
) -> Result<Vec<bool>, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    // Every chain this batch appends to, locked in one order (sorted), so two transactions that
    // share chains never wait for each other in a cycle (`docs/engine.md` §7.6).
    let mut chains: BTreeMap<String, OpenChain> = writes
        .iter()
        .filter_map(|w| match w {
            Write::Insert(_, audit) | Write::Update { audit, .. } | Write::Audit(audit) => {
                Some((chain_of(audit), OpenChain::default()))
            }
            Write::Probe => None,
        })
        .collect();
    if !chains.is_empty() {
        let open = (sql.chains_open)(chains.len());
        let mut query = sqlx::query::<DB>(&open);
        for chain in chains.keys() {
            query = query.bind(chain.as_str()).bind(GENESIS);
        }
        for row in query.fetch_all(&mut *conn).await? {
            let chain: String = row.try_get(0)?;
            let length: i64 = row.try_get(1)?;
            let digest: String = row.try_get(2)?;
            if let Some(head) = chains.get_mut(&chain) {
                head.length = length;
                head.digest = digest;
            }
        }
    }
    let mut took = Vec::with_capacity(writes.len());
    for write in writes {
        took.push(match write {
            Write::Insert(row, audit) => {
                insert_session::<DB>(&mut *conn, sql, row).await?;
                insert_audit::<DB>(&mut *conn, sql, audit, &mut chains).await?;
                true
            }
            Write::Update {
                expected,
                row,
                audit,
            } => {
                let swapped = sqlx::query::<DB>(sql.update_session)
                    .bind(row.revision)
                    .bind(row.seq)
                    .bind(row.state.as_str())
                    .bind(row.updated_at.as_str())
                    .bind(row.status)
                    .bind(row.columns.step_index)
                    .bind(row.columns.revise_rounds)
                    .bind(row.id.as_str())
                    .bind(*expected)
                    .fetch_optional(&mut *conn)
                    .await?
                    .is_some();
                if swapped {
                    insert_audit::<DB>(&mut *conn, sql, audit, &mut chains).await?;
                }
                swapped
            }
            Write::Audit(audit) => {
                insert_audit::<DB>(&mut *conn, sql, audit, &mut chains).await?;
                true
            }
            Write::Probe => {
                sqlx::query::<DB>(sql.probe).execute(&mut *conn).await?;
                true
            }
        });
    }
    let moved: Vec<_> = chains.iter().filter(|(_, head)| head.moved).collect();
    if !moved.is_empty() {
        let advance = (sql.chains_advance)(moved.len());
        let mut query = sqlx::query::<DB>(&advance);
        for (chain, head) in moved {
            query = query
                .bind(chain.as_str())
                .bind(head.length)
                .bind(head.digest.as_str());
        }
        query.execute(&mut *conn).await?;
    }
    Ok(took)
}

async fn insert_session<DB>(
    conn: &mut DB::Connection,
    sql: &Statements,
    row: &SessionRow,
) -> Result<(), StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
{
    let columns = &row.columns;
    sqlx::query::<DB>(sql.insert_session)
        .bind(row.id.as_str())
        .bind(row.revision)
        .bind(row.seq)
        .bind(row.state.as_str())
        .bind(row.created_at.as_str())
        .bind(row.updated_at.as_str())
        .bind(row.status)
        .bind(columns.workflow.as_str())
        .bind(columns.workflow_version.as_str())
        .bind(columns.release.as_str())
        .bind(columns.harness)
        .bind(columns.principal.as_deref())
        .bind(columns.organization.as_deref())
        .bind(columns.step_index)
        .bind(columns.revise_rounds)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A chain a batch appends to: its length and head digest as this transaction moves them.
#[derive(Default)]
struct OpenChain {
    length: i64,
    digest: String,
    /// Whether the batch appended to it (its head row needs the new length and digest).
    moved: bool,
}

async fn insert_audit<DB>(
    conn: &mut DB::Connection,
    sql: &Statements,
    audit: &AuditEntry,
    chains: &mut BTreeMap<String, OpenChain>,
) -> Result<(), StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB>,
{
    let codes = encode_codes(&audit.codes);
    let workflow = audit.workflow.as_ref();
    let judgement = audit.judgement.as_ref();
    let failed = judgement.map(|j| encode_names(&j.failed));
    let checks = (!audit.checks.is_empty())
        .then(|| serde_json::to_string(&audit.checks).expect("check results serialize"));
    let decision = audit
        .decision
        .as_ref()
        .map(|d| serde_json::to_string(d).expect("decisions serialize"));
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let chain = chain_of(audit);
    let head = chains
        .get_mut(&chain)
        .expect("every chain of the batch was opened");
    let prev = std::mem::take(&mut head.digest);
    let index = head.length + 1;
    let digest = entry_digest(&chain, index as u64, &prev, audit);
    head.length = index;
    head.digest = digest.clone();
    head.moved = true;
    sqlx::query::<DB>(sql.insert_audit)
        .bind(audit.session_id.as_ref().map(SessionId::as_str))
        .bind(audit.seq.map(count))
        .bind(audit.tool.as_str())
        .bind(audit.outcome.as_str())
        .bind(codes.as_str())
        .bind(audit.attestation_sha256.as_deref())
        .bind(audit.reports_sha256.as_deref())
        .bind(audit.principal.as_deref())
        .bind(audit.at.as_str())
        .bind(audit.organization.as_deref())
        .bind(workflow.map(|w| w.id.as_str()))
        .bind(workflow.map(|w| w.version.as_str()))
        .bind(judgement.map(|j| j.step.as_str()))
        .bind(judgement.map(|j| count(j.step_index)))
        .bind(failed.as_deref())
        .bind(judgement.and_then(|j| j.seconds).map(count))
        .bind(checks.as_deref())
        .bind(decision.as_deref())
        .bind(chain.as_str())
        .bind(Some(index))
        .bind(Some(prev.as_str()))
        .bind(Some(digest.as_str()))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// One backend's spelling of the retention statements.
pub(crate) struct PruneStatements {
    /// Records the cutoff the delete trigger admits rows below (1 value).
    pub(crate) set_cutoff: &'static str,
    /// Deletes at most a batch of audit rows older than the cutoff, returning their ids, chains,
    /// indexes and digests (2 values: cutoff, batch).
    pub(crate) delete_audit: &'static str,
    /// A chain's retention anchor (1 value: the chain).
    pub(crate) anchor_get: &'static str,
    /// Records a chain's retention anchor (2 values: the anchor as JSON, the chain).
    pub(crate) anchor_set: &'static str,
    /// Deletes at most a batch of completed sessions last changed before the cutoff, returning
    /// their ids (2 values: cutoff, batch).
    pub(crate) delete_sessions: &'static str,
}

/// Applies retention on either backend (`docs/engine.md` §7.3): each batch commits with the
/// cutoff it is allowed by and, for every chain it pruned, a retention anchor signed with `key`
/// (§7.6) in the same transaction; the sessions deleted leave `cache`.
pub(crate) async fn prune<DB>(
    pool: &Pool<DB>,
    sql: &PruneStatements,
    before: &str,
    cache: &SessionCache,
    key: &ProvenanceKey,
) -> Result<Pruned, StoreError>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB> + Type<DB>,
    for<'r> Option<i64>: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let batch = |rows: usize| rows < PRUNE_BATCH as usize;
    let mut pruned = Pruned::default();
    loop {
        let mut tx = pool.begin().await?;
        sqlx::query::<DB>(sql.set_cutoff)
            .bind(before)
            .execute(&mut *tx)
            .await?;
        let rows = sqlx::query::<DB>(sql.delete_audit)
            .bind(before)
            .bind(PRUNE_BATCH)
            .fetch_all(&mut *tx)
            .await?;
        let deleted = rows.len();
        // The last entry pruned of each chain, in chain order (the order appends lock in).
        let mut last: BTreeMap<String, (i64, String)> = BTreeMap::new();
        for row in &rows {
            let (Some(chain), Some(index), Some(sha256)) = (
                row.try_get::<Option<String>, _>(1)?,
                row.try_get::<Option<i64>, _>(2)?,
                row.try_get::<Option<String>, _>(3)?,
            ) else {
                continue;
            };
            let entry = last.entry(chain).or_insert((index, sha256.clone()));
            if index > entry.0 {
                *entry = (index, sha256);
            }
        }
        for (chain, (index, sha256)) in &last {
            let kept: Option<String> = sqlx::query::<DB>(sql.anchor_get)
                .bind(chain.as_str())
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| row.try_get::<Option<String>, _>(0))
                .transpose()?
                .flatten();
            let kept = kept.and_then(|json| serde_json::from_str::<RetentionAnchor>(&json).ok());
            if kept.is_some_and(|a| a.pruned_through >= *index as u64) {
                continue;
            }
            let anchor = RetentionAnchor::sign(key, chain, *index as u64, sha256, before);
            let json = serde_json::to_string(&anchor).expect("anchors serialize");
            sqlx::query::<DB>(sql.anchor_set)
                .bind(json.as_str())
                .bind(chain.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        pruned.audit_entries += deleted as u64;
        if batch(deleted) {
            break;
        }
    }
    loop {
        let rows = sqlx::query::<DB>(sql.delete_sessions)
            .bind(before)
            .bind(PRUNE_BATCH)
            .fetch_all(pool)
            .await?;
        let ids: Vec<SessionId> = rows
            .iter()
            .filter_map(|row| row.try_get::<String, _>(0).ok()?.parse().ok())
            .collect();
        cache.forget(&ids);
        pruned.sessions += rows.len() as u64;
        if batch(rows.len()) {
            break;
        }
    }
    Ok(pruned)
}
