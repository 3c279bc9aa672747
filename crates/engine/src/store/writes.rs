//! The statements every write runs, changes and retention alike, the same on both backends.
//! A new row's columns are listed once, each beside how its value is read ([`SESSION_KEPT`],
//! [`SESSION_CHANGED`], [`AUDIT_COLUMNS`]): a statement names its columns and binds its values
//! from that one list, so the two cannot disagree. Only the write statements' placeholders
//! differ by backend ([`Backend::placeholder`]), and they are spelled once per writer.

use std::{collections::BTreeMap, sync::Arc};

use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type, query::Query,
};

use super::{
    AuditEntry, PRUNE_BATCH, Pruned, StoreError,
    cache::SessionCache,
    commit::{SessionRow, Took, Write},
    encode_codes, encode_names,
    sql::Backend,
};
use crate::{
    model::chain::{ChainLink, GENESIS, RetentionAnchor, chain_of, entry_digest},
    model::provenance::ProvenanceKey,
    model::session::SessionId,
};

/// A value a write binds: text or an integer, either maybe null.
#[derive(Clone, Copy)]
pub(crate) enum Value<'a> {
    Text(Option<&'a str>),
    Integer(Option<i64>),
}

fn text(s: &str) -> Value<'_> {
    Value::Text(Some(s))
}

fn integer(n: i64) -> Value<'static> {
    Value::Integer(Some(n))
}

/// A count as stored, `i64::MAX` past it.
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Binds `values` in order.
fn bind<'q, DB>(
    mut query: Query<'q, DB, DB::Arguments<'q>>,
    values: impl IntoIterator<Item = Value<'q>>,
) -> Query<'q, DB, DB::Arguments<'q>>
where
    DB: Database,
    Option<&'q str>: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
{
    for value in values {
        query = match value {
            Value::Text(v) => query.bind(v),
            Value::Integer(v) => query.bind(v),
        };
    }
    query
}

/// A chain's head as a batch opens it: its name, length and head digest.
pub(crate) type Head = (String, i64, String);

/// Where a batch's statements run, inside the transaction its caller began: a sqlx connection,
/// or SQLite's writer thread (`store/sqlite_writer.rs`), whose statements finish without ever
/// waiting. The statements and what a batch does with their answers are written once, in
/// [`apply`].
pub(crate) trait Execute {
    /// Runs a statement that returns nothing.
    async fn execute(&mut self, sql: &str, values: &[Value<'_>]) -> Result<(), StoreError>;
    /// Runs a statement and says whether it returned a row.
    async fn returns_row(&mut self, sql: &str, values: &[Value<'_>]) -> Result<bool, StoreError>;
    /// Runs [`Statements::chains_open`] and returns each chain's head.
    async fn heads(&mut self, sql: &str, values: &[Value<'_>]) -> Result<Vec<Head>, StoreError>;
}

/// A sqlx connection inside its transaction.
pub(crate) struct OnConnection<'c, DB: Database>(pub(crate) &'c mut DB::Connection);

impl<DB> Execute for OnConnection<'_, DB>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    async fn execute(&mut self, sql: &str, values: &[Value<'_>]) -> Result<(), StoreError> {
        bind(sqlx::query::<DB>(sql), values.iter().copied())
            .execute(&mut *self.0)
            .await?;
        Ok(())
    }

    async fn returns_row(&mut self, sql: &str, values: &[Value<'_>]) -> Result<bool, StoreError> {
        Ok(bind(sqlx::query::<DB>(sql), values.iter().copied())
            .fetch_optional(&mut *self.0)
            .await?
            .is_some())
    }

    async fn heads(&mut self, sql: &str, values: &[Value<'_>]) -> Result<Vec<Head>, StoreError> {
        let rows = bind(sqlx::query::<DB>(sql), values.iter().copied())
            .fetch_all(&mut *self.0)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
            .collect()
    }
}

/// A session column and how its value is read from the row.
type SessionColumn = (&'static str, for<'r> fn(&'r SessionRow) -> Value<'r>);

/// The session columns a new row sets and a change never rewrites.
const SESSION_KEPT: [SessionColumn; 8] = [
    ("id", |r| text(&r.id)),
    ("created_at", |r| text(&r.created_at)),
    ("workflow", |r| text(&r.columns.workflow)),
    ("workflow_version", |r| text(&r.columns.workflow_version)),
    ("release", |r| text(&r.columns.release)),
    ("harness", |r| text(r.columns.harness)),
    ("principal", |r| Value::Text(r.columns.principal.as_deref())),
    ("organization", |r| {
        Value::Text(r.columns.organization.as_deref())
    }),
];

/// The session columns a change rewrites.
const SESSION_CHANGED: [SessionColumn; 8] = [
    ("revision", |r| integer(r.revision)),
    ("seq", |r| integer(r.seq)),
    ("state", |r| text(&r.state)),
    ("updated_at", |r| text(&r.updated_at)),
    ("status", |r| text(r.status)),
    ("step_index", |r| integer(r.columns.step_index)),
    ("revise_rounds", |r| integer(r.columns.revise_rounds)),
    ("due_at", |r| Value::Integer(r.due_at)),
];

/// What an audit row holds beside its entry's own fields: the entry's lists and records as
/// JSON, and its place in its chain.
struct Appended {
    codes: String,
    failed: Option<String>,
    checks: Option<String>,
    decision: Option<String>,
    chain: String,
    index: i64,
    prev: String,
    digest: String,
}

/// An audit column and how its value is read from the entry and what is appended with it.
type AuditColumn = (
    &'static str,
    for<'r> fn(&'r AuditEntry, &'r Appended) -> Value<'r>,
);

/// The columns of an audit row: the entry, its workflow and judgement spread over columns,
/// then its chain, index, previous and own digest.
const AUDIT_COLUMNS: [AuditColumn; 22] = [
    ("session_id", |e, _| {
        Value::Text(e.session_id.as_ref().map(SessionId::as_str))
    }),
    ("seq", |e, _| Value::Integer(e.seq.map(count))),
    ("tool", |e, _| text(e.tool.as_str())),
    ("outcome", |e, _| text(e.outcome.as_str())),
    ("codes", |_, a| text(&a.codes)),
    ("attestation_sha256", |e, _| {
        Value::Text(e.attestation_sha256.as_deref())
    }),
    ("reports_sha256", |e, _| {
        Value::Text(e.reports_sha256.as_deref())
    }),
    ("principal", |e, _| Value::Text(e.principal.as_deref())),
    ("at", |e, _| text(&e.at)),
    ("organization", |e, _| {
        Value::Text(e.organization.as_deref())
    }),
    ("workflow", |e, _| {
        Value::Text(e.workflow.as_ref().map(|w| w.id.as_str()))
    }),
    ("workflow_version", |e, _| {
        Value::Text(e.workflow.as_ref().map(|w| w.version.as_str()))
    }),
    ("step", |e, _| {
        Value::Text(e.judgement.as_ref().map(|j| j.step.as_str()))
    }),
    ("step_index", |e, _| {
        Value::Integer(e.judgement.as_ref().map(|j| count(j.step_index)))
    }),
    ("failed", |_, a| Value::Text(a.failed.as_deref())),
    ("seconds", |e, _| {
        Value::Integer(e.judgement.as_ref().and_then(|j| j.seconds).map(count))
    }),
    ("checks", |_, a| Value::Text(a.checks.as_deref())),
    ("decision", |_, a| Value::Text(a.decision.as_deref())),
    ("chain", |_, a| text(&a.chain)),
    ("chain_index", |_, a| integer(a.index)),
    ("prev_sha256", |_, a| text(&a.prev)),
    ("entry_sha256", |_, a| text(&a.digest)),
];

/// One backend's spelling of the write statements, made once per writer: sqlx prepares each
/// statement once per connection, by its text.
pub(crate) struct Statements {
    /// A new session row ([`SESSION_KEPT`], then [`SESSION_CHANGED`]).
    insert_session: String,
    /// A compare-and-swap of a session row, returning its id when it swapped
    /// ([`SESSION_CHANGED`], then the id and the expected revision).
    update_session: String,
    /// An audit entry ([`AUDIT_COLUMNS`]).
    insert_audit: String,
    /// A webhook event for one receiver (7 values).
    insert_notice: String,
    /// See [`Backend::placeholder`].
    placeholder: fn(usize) -> String,
    /// See [`Backend::PROBE`].
    probe: &'static str,
}

impl Statements {
    pub(crate) fn new<B: Backend>() -> Self {
        let insert = |table: &str, columns: &[&str]| {
            let values: Vec<String> = (1..=columns.len()).map(B::placeholder).collect();
            format!(
                "INSERT INTO {table} ({}) VALUES ({})",
                columns.join(", "),
                values.join(", ")
            )
        };
        let session: Vec<&str> = SESSION_KEPT
            .iter()
            .chain(&SESSION_CHANGED)
            .map(|(name, _)| *name)
            .collect();
        let set: Vec<String> = SESSION_CHANGED
            .iter()
            .zip(1..)
            .map(|((name, _), n)| format!("{name} = {}", B::placeholder(n)))
            .collect();
        let changed = SESSION_CHANGED.len();
        Self {
            insert_session: insert("sessions", &session),
            update_session: format!(
                "UPDATE sessions SET {} WHERE id = {} AND revision = {} RETURNING id",
                set.join(", "),
                B::placeholder(changed + 1),
                B::placeholder(changed + 2)
            ),
            insert_audit: insert("audit_log", &AUDIT_COLUMNS.map(|(name, _)| name)),
            insert_notice: insert(
                "webhook_outbox",
                &[
                    "event_id",
                    "endpoint",
                    "session_id",
                    "event_type",
                    "body",
                    "created_at",
                    "next_attempt_at",
                ],
            ),
            placeholder: B::placeholder,
            probe: B::PROBE,
        }
    }

    /// Creates the head rows of `n` chains where there are none and returns each chain's length
    /// and head, locking the rows until the transaction ends, in the order given (2·n values:
    /// each chain and [`GENESIS`]). One statement for the whole batch: an upsert that rewrites
    /// nothing but takes each row's lock, as `SELECT … FOR UPDATE` would. Only these chains'
    /// rows are locked, so appends to other chains go on beside them (PostgreSQL); SQLite has one
    /// writer at a time anyway.
    fn chains_open(&self, n: usize) -> String {
        let p = self.placeholder;
        let rows: Vec<String> = (0..n)
            .map(|i| format!("({}, 0, {})", p(2 * i + 1), p(2 * i + 2)))
            .collect();
        format!(
            "INSERT INTO audit_chains (chain, length, head) VALUES {} \
             ON CONFLICT (chain) DO UPDATE SET chain = excluded.chain RETURNING chain, length, head",
            rows.join(", ")
        )
    }

    /// Records `n` chains' new lengths and heads in one statement (3·n values: each chain, its
    /// length, its head). Both databases name a `VALUES` table's columns `column1`…
    fn chains_advance(&self, n: usize) -> String {
        let p = self.placeholder;
        let rows: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "({}, CAST({} AS BIGINT), {})",
                    p(3 * i + 1),
                    p(3 * i + 2),
                    p(3 * i + 3)
                )
            })
            .collect();
        format!(
            "UPDATE audit_chains SET length = v.column2, head = v.column3 \
             FROM (VALUES {}) AS v WHERE audit_chains.chain = v.column1",
            rows.join(", ")
        )
    }
}

/// Applies writes inside the caller's transaction: what each did.
pub(crate) async fn apply(
    conn: &mut impl Execute,
    sql: &Statements,
    writes: &[Arc<Write>],
) -> Result<Vec<Took>, StoreError> {
    // Every chain this batch appends to, locked in one order (sorted), so two transactions that
    // share chains never wait for each other in a cycle (`docs/engine.md` §7.6).
    let mut chains: BTreeMap<String, OpenChain> = writes
        .iter()
        .filter_map(|w| match &**w {
            Write::Insert(_, audit) | Write::Update { audit, .. } | Write::Audit(audit) => {
                Some((chain_of(audit), OpenChain::default()))
            }
            Write::Probe => None,
        })
        .collect();
    if !chains.is_empty() {
        let open = sql.chains_open(chains.len());
        let heads: Vec<Value<'_>> = chains
            .keys()
            .flat_map(|chain| [text(chain), text(GENESIS)])
            .collect();
        for (chain, length, digest) in conn.heads(&open, &heads).await? {
            if let Some(head) = chains.get_mut(&chain) {
                head.length = length;
                head.digest = digest;
            }
        }
    }
    let mut took = Vec::with_capacity(writes.len());
    for write in writes {
        took.push(match &**write {
            Write::Insert(row, audit) => {
                let values: Vec<Value<'_>> = SESSION_KEPT
                    .iter()
                    .chain(&SESSION_CHANGED)
                    .map(|(_, value)| value(row))
                    .collect();
                conn.execute(&sql.insert_session, &values).await?;
                Took::Linked(insert_audit(conn, sql, audit, &mut chains).await?)
            }
            Write::Update {
                expected,
                row,
                audit,
                notices,
            } => {
                let values: Vec<Value<'_>> = SESSION_CHANGED
                    .iter()
                    .map(|(_, value)| value(row))
                    .chain([text(&row.id), integer(*expected)])
                    .collect();
                if conn.returns_row(&sql.update_session, &values).await? {
                    let link = insert_audit(conn, sql, audit, &mut chains).await?;
                    for notice in notices {
                        let values = [
                            text(&notice.event_id),
                            text(&notice.endpoint),
                            text(&notice.session_id),
                            text(notice.kind.as_str()),
                            text(&notice.body),
                            integer(notice.created_at),
                            integer(notice.created_at),
                        ];
                        conn.execute(&sql.insert_notice, &values).await?;
                    }
                    Took::Linked(link)
                } else {
                    Took::Lost
                }
            }
            Write::Audit(audit) => Took::Linked(insert_audit(conn, sql, audit, &mut chains).await?),
            Write::Probe => {
                conn.execute(sql.probe, &[]).await?;
                Took::Probed
            }
        });
    }
    let moved: Vec<_> = chains.iter().filter(|(_, head)| head.moved).collect();
    if !moved.is_empty() {
        let advance = sql.chains_advance(moved.len());
        let heads: Vec<Value<'_>> = moved
            .iter()
            .flat_map(|(chain, head)| [text(chain), integer(head.length), text(&head.digest)])
            .collect();
        conn.execute(&advance, &heads).await?;
    }
    Ok(took)
}

/// A chain a batch appends to: its length and head digest as this transaction moves them.
#[derive(Default)]
struct OpenChain {
    length: i64,
    digest: String,
    /// Whether the batch appended to it (its head row needs the new length and digest).
    moved: bool,
}

async fn insert_audit(
    conn: &mut impl Execute,
    sql: &Statements,
    audit: &AuditEntry,
    chains: &mut BTreeMap<String, OpenChain>,
) -> Result<ChainLink, StoreError> {
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
    let link = ChainLink {
        index: index as u64,
        sha256: digest.clone(),
    };
    let appended = Appended {
        codes: encode_codes(&audit.codes),
        failed: audit.judgement.as_ref().map(|j| encode_names(&j.failed)),
        checks: (!audit.checks.is_empty())
            .then(|| serde_json::to_string(&audit.checks).expect("check results serialize")),
        decision: audit
            .decision
            .as_ref()
            .map(|d| serde_json::to_string(d).expect("decisions serialize")),
        chain,
        index,
        prev,
        digest,
    };
    let values: Vec<Value<'_>> = AUDIT_COLUMNS
        .iter()
        .map(|(_, value)| value(audit, &appended))
        .collect();
    conn.execute(&sql.insert_audit, &values).await?;
    Ok(link)
}

/// Records the cutoff the delete trigger admits rows below (1 value).
const SET_CUTOFF: &str = "UPDATE retention SET before = $1 WHERE id = 1";
/// Deletes at most a batch of audit rows older than the cutoff, returning their ids, chains,
/// indexes and digests (2 values: cutoff, batch).
const DELETE_AUDIT: &str = "DELETE FROM audit_log WHERE id IN \
    (SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2) \
    RETURNING id, chain, chain_index, entry_sha256";
/// A chain's retention anchor (1 value: the chain).
const ANCHOR_GET: &str = "SELECT anchor FROM audit_chains WHERE chain = $1";
/// Records a chain's retention anchor (2 values: the anchor as JSON, the chain).
const ANCHOR_SET: &str = "UPDATE audit_chains SET anchor = $1 WHERE chain = $2";
/// Deletes at most a batch of completed sessions last changed before the cutoff, returning
/// their ids (2 values: cutoff, batch).
const DELETE_SESSIONS: &str = "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions \
    WHERE status IN ('completed', 'expired') AND updated_at < $1 LIMIT $2) RETURNING id";

/// Applies retention on either backend (`docs/engine.md` §7.3): each batch commits with the
/// cutoff it is allowed by and, for every chain it pruned, a retention anchor signed with `key`
/// (§7.6) in the same transaction; the sessions deleted leave `cache`.
pub(crate) async fn prune<DB>(
    pool: &Pool<DB>,
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
        sqlx::query::<DB>(SET_CUTOFF)
            .bind(before)
            .execute(&mut *tx)
            .await?;
        let rows = sqlx::query::<DB>(DELETE_AUDIT)
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
            let kept: Option<String> = sqlx::query::<DB>(ANCHOR_GET)
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
            sqlx::query::<DB>(ANCHOR_SET)
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
        let rows = sqlx::query::<DB>(DELETE_SESSIONS)
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
