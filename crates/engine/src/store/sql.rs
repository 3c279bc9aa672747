//! The one [`Store`] both backends are: [`SqlStore`] runs the same statements through sqlx on
//! either database, and a [`Backend`] spells only what differs. Opening differs too, and lives
//! beside each backend (`store/sqlite.rs`, `store/postgres.rs`).

use std::{fs::File, sync::Arc};

use async_trait::async_trait;
use sqlx::{
    ColumnIndex, Connection as _, Database, Decode, Encode, Executor, FromRow, IntoArguments, Pool,
    Row, Type,
};

use super::{
    AuditEntry, Pruned, SessionQuery, SessionSummary, StatsQuery, Store, StoreError,
    StoreErrorKind, WorkflowCount, WorkflowStats, audit_log,
    audit_log::AuditRow,
    cache::{SESSION_CACHE_BOUNDS, SessionCache},
    chains::{self, ChainedRow},
    commit::{Apply, Committer, SessionRow, Took, Write},
    decode_session,
    listing::{self, SummaryRow},
    outbox, seals,
    stats::{self, FailureRow, SessionCountRow, StepRow, WorkflowRow},
    writes::{self, OnConnection, Statements},
};
use crate::{
    model::chain::{ChainHead, ChainLink, StoredLink},
    model::notify::{DeliveryOutcome, DeliveryRecord, Notice, OutboxCounts, WebhookDelivery},
    model::provenance::ProvenanceKey,
    model::session::{Session, SessionId},
};
use rimthan_registry::PublicKeyFile;

/// What one database spells its own way. Everything else the store runs is written once:
/// SQLite reads PostgreSQL's numbered `$1` placeholders too.
pub trait Backend: std::fmt::Debug + Send + Sync + 'static {
    /// The sqlx database.
    type Db: Database;

    /// Whether a store writing this database is its only writer, so a session it cached is the
    /// stored one (SQLite: the process holds the file's writer lock). Otherwise other replicas
    /// write the same rows, and a cached session is used only after a probe of its stored
    /// revision and creation time (PostgreSQL; `docs/engine.md` §7.1).
    const SOLE_WRITER: bool;

    /// The database's name in OpenTelemetry's `db.system.name` (`docs/operations/tracing.md`).
    const SYSTEM: &'static str;

    /// The readiness probe's write: room for 64 KiB in fresh pages, as a change needs, so a
    /// full disk refuses it as it refuses a new session (no values).
    const PROBE: &'static str;

    /// A statement that lets the transaction it begins commit without waiting for the flush to
    /// stable storage, where that is chosen per transaction; SQLite chooses it per connection.
    const UNFLUSHED: Option<&'static str>;

    /// A `FROM` item that spreads audit row `a`'s failed validators (a JSON array of names)
    /// over rows `f`, one `value` each.
    const FAILED_VALIDATORS: &'static str;

    /// What a subquery that picks rows to claim appends so that two replicas claiming at once
    /// take different rows rather than wait for each other (PostgreSQL); SQLite has one writer.
    const SKIP_LOCKED: &'static str;

    /// The placeholder of a write statement's `n`th value (from 1), its values bound in order.
    fn placeholder(n: usize) -> String;
}

/// A [`Store`] on a SQL database: reads on a pool, and, unless opened read-only, writes through
/// two group-committing writers beside a cache of the live sessions.
#[derive(Debug)]
pub struct SqlStore<B: Backend> {
    /// Reads (a read-only store does nothing else).
    pool: Pool<B::Db>,
    /// The writers and the live sessions; none when opened read-only.
    writer: Option<Writer<B>>,
    /// The statistics' failures query ([`stats::failures`]) in the backend's spelling.
    failures: String,
}

#[derive(Debug)]
struct Writer<B: Backend> {
    /// The pool session changes are committed on; retention deletes on it too.
    pool: Pool<B::Db>,
    /// Session changes and their audit entries, group-committed and flushed to stable storage.
    changes: Committer,
    /// Audit entries of calls that changed no state, group-committed without waiting for the
    /// flush: they survive a process crash, only not a power loss, and acknowledge nothing a
    /// harness builds on.
    audits: Committer,
    /// The live sessions; current without a probe only when the backend is the
    /// [`Backend::SOLE_WRITER`], since its change writer records each change it commits here.
    cache: Arc<SessionCache>,
    /// Held open for the store's life: the advisory lock on `PATH.lock` that makes this process
    /// a SQLite file's only writer (none for a memory database or PostgreSQL).
    _lock: Option<Arc<File>>,
}

// By hand: a derive would ask the sqlx database type to be `Clone`, which it need not be.
impl<B: Backend> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            writer: self.writer.clone(),
            failures: self.failures.clone(),
        }
    }
}

impl<B: Backend> Clone for Writer<B> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            changes: self.changes.clone(),
            audits: self.audits.clone(),
            cache: self.cache.clone(),
            _lock: self._lock.clone(),
        }
    }
}

/// How a store that writes writes: its pools and what it holds while it lives.
pub(super) struct Writing<DB: Database> {
    /// Retention deletes here, and session changes when [`Commits::Pools`] commits them.
    pub(super) changes: Pool<DB>,
    /// How the two writers commit.
    pub(super) commits: Commits<DB>,
    /// The SQLite writer lock.
    pub(super) lock: Option<Arc<File>>,
}

/// How a writing store's two writers commit their batches.
pub(super) enum Commits<DB: Database> {
    /// Transactions on sqlx pools: session changes on [`Writing::changes`], audit entries of
    /// calls that changed no state on `audits`, unflushed on SQLite by that pool's connections,
    /// on PostgreSQL by [`Backend::UNFLUSHED`].
    Pools {
        audits: Pool<DB>,
        /// Whether a connection whose transaction failed is closed: always, except a memory
        /// database's only connection, since the database lives only as long as it.
        close_failed: bool,
    },
    /// Appliers of their own: a SQLite file's two writer threads (`store/sqlite_writer.rs`).
    Own {
        changes: Box<dyn Apply>,
        audits: Box<dyn Apply>,
    },
}

impl<B: Backend> SqlStore<B> {
    /// A store reading on `pool` and, with `writing`, writing: its two writer tasks start on the
    /// current runtime.
    pub(super) fn new(pool: Pool<B::Db>, writing: Option<Writing<B::Db>>) -> Self
    where
        Transactions<B>: Apply,
    {
        let writer = writing.map(|w| {
            let cache = Arc::new(SessionCache::new(SESSION_CACHE_BOUNDS));
            let (changes, audits): (Box<dyn Apply>, Box<dyn Apply>) = match w.commits {
                Commits::Pools {
                    audits,
                    close_failed,
                } => (
                    Box::new(Transactions::<B>::new(
                        w.changes.clone(),
                        None,
                        close_failed,
                    )),
                    Box::new(Transactions::<B>::new(audits, B::UNFLUSHED, close_failed)),
                ),
                Commits::Own { changes, audits } => (changes, audits),
            };
            Writer {
                pool: w.changes,
                changes: Committer::spawn(changes, Some(cache.clone())),
                audits: Committer::spawn(audits, None),
                cache,
                _lock: w.lock,
            }
        });
        Self {
            pool,
            writer,
            failures: stats::failures(B::FAILED_VALIDATORS),
        }
    }

    fn writer(&self) -> Result<&Writer<B>, StoreError> {
        self.writer.as_ref().ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::Other,
                "this store was opened read-only; only the serving process writes",
            )
        })
    }
}

/// Applies a batch of writes in one transaction on one pool.
pub(super) struct Transactions<B: Backend> {
    pool: Pool<B::Db>,
    sql: Statements,
    /// What each transaction begins with, if anything ([`Backend::UNFLUSHED`]).
    begin: Option<&'static str>,
    /// See [`Commits::Pools`].
    close_failed: bool,
}

impl<B: Backend> Transactions<B> {
    fn new(pool: Pool<B::Db>, begin: Option<&'static str>, close_failed: bool) -> Self {
        Self {
            pool,
            sql: Statements::new::<B>(),
            begin,
            close_failed,
        }
    }
}

#[async_trait]
impl<B: Backend> Apply for Transactions<B>
where
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Type<B::Db>,
    for<'r> String: Decode<'r, B::Db> + Type<B::Db>,
    for<'r> i64: Decode<'r, B::Db> + Type<B::Db>,
    usize: ColumnIndex<<B::Db as Database>::Row>,
{
    async fn apply(&self, writes: &[Arc<Write>]) -> Result<Vec<Took>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let applied = async {
            let mut tx = conn.begin().await?;
            if let Some(begin) = self.begin {
                sqlx::query::<B::Db>(begin).execute(&mut *tx).await?;
            }
            let took =
                writes::apply(&mut OnConnection::<B::Db>(&mut *tx), &self.sql, writes).await?;
            tx.commit().await?;
            Ok(took)
        }
        .await;
        // A connection that failed mid-transaction (lost, or its disk full) is not trusted with
        // the next batch. SQLite rolls a transaction back by itself on some faults (SQLITE_FULL,
        // SQLITE_IOERR) and not on others, so the connection may sit inside a transaction its
        // driver no longer tracks, and later "commits" would only release savepoints in it:
        // close it, and the next batch starts on a fresh one (`docs/engine.md` §7.2).
        if applied.is_err() && self.close_failed {
            conn.close_on_drop();
        }
        applied
    }
}

const INSERT_SECRET: &str =
    "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
const SECRET: &str = "SELECT value FROM secrets WHERE name = $1";
const STATE: &str = "SELECT state FROM sessions WHERE id = $1";
/// What says whether a cached session is still the stored one, without its state.
const REVISION: &str = "SELECT revision, created_at FROM sessions WHERE id = $1";
const OPEN_SESSIONS: &str =
    "SELECT COUNT(*) FROM sessions WHERE status NOT IN ('completed', 'expired')";
/// The sessions with a timer due, earliest first (2 values: now in Unix seconds, limit).
const DUE_SESSIONS: &str = "SELECT id FROM sessions WHERE due_at <= $1 ORDER BY due_at LIMIT $2";

#[async_trait]
impl<B: Backend> Store for SqlStore<B>
where
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> i64: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> Vec<u8>: Encode<'q, B::Db> + Type<B::Db>,
    for<'r> String: Decode<'r, B::Db> + Type<B::Db>,
    for<'r> Option<String>: Decode<'r, B::Db> + Type<B::Db>,
    for<'r> i64: Decode<'r, B::Db> + Type<B::Db>,
    for<'r> Option<i64>: Decode<'r, B::Db> + Type<B::Db>,
    for<'r> Vec<u8>: Decode<'r, B::Db> + Type<B::Db>,
    usize: ColumnIndex<<B::Db as Database>::Row>,
    for<'r> AuditRow: FromRow<'r, <B::Db as Database>::Row>,
    for<'r> ChainedRow: FromRow<'r, <B::Db as Database>::Row>,
    for<'r> SummaryRow: FromRow<'r, <B::Db as Database>::Row>,
    for<'r> SessionCountRow: FromRow<'r, <B::Db as Database>::Row>,
    for<'r> StepRow: FromRow<'r, <B::Db as Database>::Row>,
    for<'r> FailureRow: FromRow<'r, <B::Db as Database>::Row>,
    for<'r> WorkflowRow: FromRow<'r, <B::Db as Database>::Row>,
{
    fn system(&self) -> &'static str {
        B::SYSTEM
    }

    async fn secret(&self, name: &str, generated: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        if self.writer.is_some() {
            sqlx::query::<B::Db>(INSERT_SECRET)
                .bind(name)
                .bind(generated)
                .execute(&self.pool)
                .await?;
        }
        let row = sqlx::query::<B::Db>(SECRET)
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get(0)?)
    }

    async fn insert_session(
        &self,
        session: &Session,
        audit: &AuditEntry,
    ) -> Result<(), StoreError> {
        let writer = self.writer()?;
        let row = SessionRow::of(session)?;
        writer
            .changes
            .write(Write::Insert(row, audit.clone()))
            .await?;
        Ok(())
    }

    fn session_cache(&self) -> Option<crate::cache::CacheStats> {
        self.writer.as_ref().map(|w| w.cache.stats())
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<Arc<Session>>, StoreError> {
        let cache = self.writer.as_ref().map(|w| &w.cache);
        if let Some(cache) = cache
            && let Some(cached) = cache.get(id)
        {
            if B::SOLE_WRITER {
                return Ok(Some(cached));
            }
            // Another replica may have changed it, or pruned it and started it anew from the
            // same idempotency key: its revision and creation time together say whether it did.
            // (A pruned session was created over a day before the one that replaces it, since
            // retention keeps at least a day.)
            let stored = sqlx::query::<B::Db>(REVISION)
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await?;
            match stored {
                None => {
                    cache.forget(std::slice::from_ref(id));
                    return Ok(None);
                }
                Some(row)
                    if row.try_get::<i64, _>(0)? as u64 == cached.revision
                        && row.try_get::<String, _>(1)? == cached.created_at =>
                {
                    return Ok(Some(cached));
                }
                Some(_) => {}
            }
        }
        let ticket = cache.map(|c| c.ticket());
        let row = sqlx::query::<B::Db>(STATE)
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let state = row.try_get::<String, _>(0)?;
        let session = Arc::new(decode_session(&state)?);
        if let (Some(cache), Some(ticket)) = (cache, ticket) {
            cache.read(ticket, session.clone(), state.len());
        }
        Ok(Some(session))
    }

    async fn update_session(
        &self,
        expected_revision: u64,
        session: &Session,
        audit: &AuditEntry,
        notices: &[Notice],
    ) -> Result<Option<ChainLink>, StoreError> {
        let writer = self.writer()?;
        let write = Write::Update {
            expected: expected_revision as i64,
            row: SessionRow::of(session)?,
            audit: audit.clone(),
            notices: notices.to_vec(),
        };
        Ok(match writer.changes.write(write).await? {
            Took::Linked(link) => Some(link),
            Took::Lost | Took::Probed => None,
        })
    }

    async fn append_audit(&self, audit: &AuditEntry) -> Result<(), StoreError> {
        self.writer()?
            .audits
            .write(Write::Audit(audit.clone()))
            .await
            .map(|_| ())
    }

    async fn prune(&self, before: &str, key: &ProvenanceKey) -> Result<Pruned, StoreError> {
        let writer = self.writer()?;
        writes::prune(&writer.pool, before, &writer.cache, key).await
    }

    async fn seal(&self, key: &ProvenanceKey, at: &str) -> Result<Option<u64>, StoreError> {
        let writer = self.writer()?;
        seals::seal(&writer.pool, key, at).await
    }

    async fn seals(&self) -> Result<Vec<crate::model::seal::Seal>, StoreError> {
        seals::all(&self.pool).await
    }

    async fn audit_chains(&self, chain: Option<&str>) -> Result<Vec<ChainHead>, StoreError> {
        chains::heads(&self.pool, chain).await
    }

    async fn chain_entries(&self, chain: &str) -> Result<Vec<StoredLink>, StoreError> {
        chains::entries(&self.pool, chain).await
    }

    async fn unchained_audit(&self) -> Result<Vec<StoredLink>, StoreError> {
        chains::unchained(&self.pool).await
    }

    async fn completion_link(&self, session: &SessionId) -> Result<Option<ChainLink>, StoreError> {
        chains::completion(&self.pool, session.as_str()).await
    }

    async fn provenance_keys(&self) -> Result<Vec<PublicKeyFile>, StoreError> {
        chains::keys(&self.pool).await
    }

    async fn add_provenance_key(&self, key: &PublicKeyFile) -> Result<(), StoreError> {
        if self.writer.is_none() {
            return Ok(());
        }
        chains::add_key(&self.pool, key, &crate::model::session::now_rfc3339()).await
    }

    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<SessionSummary>, StoreError> {
        listing::list(&self.pool, query).await
    }

    async fn workflow_stats(&self, query: &StatsQuery) -> Result<WorkflowStats, StoreError> {
        stats::workflow_stats(&self.pool, &self.failures, query).await
    }

    async fn workflows(
        &self,
        organization: Option<&str>,
    ) -> Result<Vec<WorkflowCount>, StoreError> {
        stats::workflows(&self.pool, organization).await
    }

    async fn audit_log(&self, session: &SessionId) -> Result<Vec<AuditEntry>, StoreError> {
        audit_log::of_session(&self.pool, session).await
    }

    async fn recent_audit(
        &self,
        session: &SessionId,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        audit_log::recent(&self.pool, session, limit).await
    }

    async fn claim_deliveries(
        &self,
        now: i64,
        lease_until: i64,
        limit: u32,
    ) -> Result<Vec<WebhookDelivery>, StoreError> {
        outbox::claim::<B::Db>(&self.pool, B::SKIP_LOCKED, now, lease_until, limit).await
    }

    async fn finish_delivery(&self, id: i64, outcome: &DeliveryOutcome) -> Result<(), StoreError> {
        outbox::finish::<B::Db>(&self.pool, id, outcome).await
    }

    async fn outbox_counts(&self) -> Result<OutboxCounts, StoreError> {
        outbox::counts::<B::Db>(&self.pool).await
    }

    async fn deliveries(
        &self,
        session: Option<&SessionId>,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        outbox::records::<B::Db>(&self.pool, session, limit).await
    }

    async fn due_sessions(&self, now: i64, limit: u32) -> Result<Vec<SessionId>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar::<B::Db, String>(DUE_SESSIONS)
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        ids.iter()
            .map(|id| {
                id.parse()
                    .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, e))
            })
            .collect()
    }

    async fn open_sessions(&self) -> Result<u64, StoreError> {
        let open: i64 = sqlx::query_scalar::<B::Db, i64>(OPEN_SESSIONS)
            .fetch_one(&self.pool)
            .await?;
        Ok(open as u64)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query::<B::Db>("SELECT 1").execute(&self.pool).await?;
        if let Some(writer) = &self.writer {
            writer.changes.ready().await?;
        }
        Ok(())
    }
}
