//! Durable state behind one trait: sessions (compare-and-swap on their revision), the
//! append-only audit log, and server secrets. SQLite is the embedded default; PostgreSQL serves
//! several replicas. One implementation serves both (`store/sql.rs`), and both run the same
//! behavioural test suite.

mod audit_log;
mod cache;
mod chains;
mod commit;
mod listing;
mod outbox;
mod postgres;
mod seals;
mod sql;
mod sqlite;
mod sqlite_writer;
mod stats;
mod writes;

use std::sync::Arc;

use async_trait::async_trait;
pub use cache::SESSION_CACHE_BOUNDS;
pub use listing::{Age, MAX_PAGE, SessionQuery, SessionSummary, position};
pub use postgres::{Postgres, PostgresStore};
pub use sql::{Backend, SqlStore};
pub use sqlite::{Sqlite, SqliteStore};
pub use stats::{
    REFUSED_STARTS_LISTED, SessionCount, StatsQuery, StepJudgements, ValidatorFailures,
    WorkflowCount, WorkflowStats,
};

pub use crate::model::audit::AuditEntry;
use rimthan_registry::PublicKeyFile;

use crate::{
    model::audit::{Operation, Outcome},
    model::chain::{ChainHead, ChainLink, StoredLink},
    model::codes::Code,
    model::notify::{DeliveryOutcome, DeliveryRecord, Notice, OutboxCounts, WebhookDelivery},
    model::provenance::ProvenanceKey,
    model::session::{Session, SessionId},
};

/// What went wrong in a store, independent of the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The database could not be reached or opened.
    Unavailable,
    /// A migration failed.
    Migration,
    /// A row could not be decoded.
    Corrupt,
    /// The database refused a write that breaks a constraint (a duplicate id): the request's
    /// fault, not the storage's.
    Conflict,
    /// Anything else the database reported.
    Other,
}

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[error("store error ({kind:?}): {message}")]
pub struct StoreError {
    /// The kind.
    pub kind: StoreErrorKind,
    /// What the backend said.
    pub message: String,
}

impl StoreError {
    pub(crate) fn new(kind: StoreErrorKind, message: impl std::fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        let kind = match &e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                StoreErrorKind::Unavailable
            }
            sqlx::Error::Decode(_) | sqlx::Error::ColumnDecode { .. } => StoreErrorKind::Corrupt,
            sqlx::Error::Database(d)
                if matches!(
                    d.kind(),
                    sqlx::error::ErrorKind::UniqueViolation
                        | sqlx::error::ErrorKind::ForeignKeyViolation
                        | sqlx::error::ErrorKind::NotNullViolation
                        | sqlx::error::ErrorKind::CheckViolation
                ) =>
            {
                StoreErrorKind::Conflict
            }
            _ => StoreErrorKind::Other,
        };
        StoreError::new(kind, e)
    }
}

/// What one retention pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Audit entries.
    pub audit_entries: u64,
    /// Completed sessions.
    pub sessions: u64,
}

/// Rows one retention statement deletes at most, so a first prune of a large log does not hold
/// the writer for long.
pub const PRUNE_BATCH: i64 = 10_000;

/// Storage for sessions, the audit log and server secrets.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// The database behind the store, as OpenTelemetry's `db.system.name` spells it.
    fn system(&self) -> &'static str;

    /// Returns the secret called `name`, storing `generated` first if there is none yet. Of two
    /// racing first calls, both get the same stored value.
    async fn secret(&self, name: &str, generated: Vec<u8>) -> Result<Vec<u8>, StoreError>;

    /// Stores a new session and its audit entry in one transaction.
    async fn insert_session(&self, session: &Session, audit: &AuditEntry)
    -> Result<(), StoreError>;

    /// Loads a session: the stored revision, from memory when the store can prove it is current
    /// (`docs/engine.md` §7.1).
    async fn load_session(&self, id: &SessionId) -> Result<Option<Arc<Session>>, StoreError>;

    /// What the store's cache of live sessions holds and how it has served; `None` for a
    /// store that keeps none.
    fn session_cache(&self) -> Option<crate::cache::CacheStats> {
        None
    }

    /// Replaces a session if its stored revision is still `expected_revision`, appending the
    /// audit entry in the same transaction. Returns the entry's link in the session's chain when
    /// it swapped, `None` when another change came first.
    /// `notices`, the webhook events the change causes, join the outbox in that transaction.
    async fn update_session(
        &self,
        expected_revision: u64,
        session: &Session,
        audit: &AuditEntry,
        notices: &[Notice],
    ) -> Result<Option<ChainLink>, StoreError>;

    /// Appends an audit entry for an outcome that changed no state. Backends may trade the
    /// per-commit flush to stable storage for speed here; never for session changes.
    async fn append_audit(&self, audit: &AuditEntry) -> Result<(), StoreError>;

    /// Applies retention: deletes audit entries recorded before `before` (RFC 3339, UTC) and
    /// completed or expired sessions last changed before it, in bounded batches (`docs/engine.md` §7.3),
    /// leaving for each chain it pruned an anchor signed with `key` (§7.6).
    async fn prune(&self, before: &str, key: &ProvenanceKey) -> Result<Pruned, StoreError>;

    /// Seals every audit chain changed since the last seal, signed with `key` at `at` (RFC
    /// 3339): its number, or `None` when nothing changed or another writer sealed at the same
    /// moment (`docs/engine.md` §7.6).
    async fn seal(&self, key: &ProvenanceKey, at: &str) -> Result<Option<u64>, StoreError>;

    /// Every seal over the chains' heads, in order.
    async fn seals(&self) -> Result<Vec<crate::model::seal::Seal>, StoreError>;

    /// The audit chains with their head rows and retention anchors: every chain, or the one
    /// named (`docs/engine.md` §7.6).
    async fn audit_chains(&self, chain: Option<&str>) -> Result<Vec<ChainHead>, StoreError>;

    /// A chain's entries as stored, in id order.
    async fn chain_entries(&self, chain: &str) -> Result<Vec<StoredLink>, StoreError>;

    /// Entries written since chaining began that name no chain.
    async fn unchained_audit(&self) -> Result<Vec<StoredLink>, StoreError>;

    /// The index and digest of the entry that completed a session, if it completed.
    async fn completion_link(&self, session: &SessionId) -> Result<Option<ChainLink>, StoreError>;

    /// Every provenance public key recorded, oldest first.
    async fn provenance_keys(&self) -> Result<Vec<PublicKeyFile>, StoreError>;

    /// Records a provenance public key, once; a read-only store records nothing.
    async fn add_provenance_key(&self, key: &PublicKeyFile) -> Result<(), StoreError>;

    /// Sessions matching `query`, most recently changed first, read from indexed columns
    /// (`docs/engine.md` §7.4).
    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<SessionSummary>, StoreError>;

    /// One workflow version's statistics, from indexed columns (`docs/engine.md` §7.5).
    async fn workflow_stats(&self, query: &StatsQuery) -> Result<WorkflowStats, StoreError>;

    /// The workflow versions with stored sessions, of one organization or of all.
    async fn workflows(&self, organization: Option<&str>)
    -> Result<Vec<WorkflowCount>, StoreError>;

    /// The audit entries of a session, oldest first.
    async fn audit_log(&self, session: &SessionId) -> Result<Vec<AuditEntry>, StoreError>;

    /// The latest `limit` audit entries of a session, oldest first: what a page shows of a
    /// session whose callers may have been refused any number of times.
    async fn recent_audit(
        &self,
        session: &SessionId,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError>;

    /// Leases at most `limit` webhook deliveries due at `now` (Unix seconds) until
    /// `lease_until`, counting the attempt: rows another replica holds are skipped, and a lease
    /// that ran out is taken again.
    async fn claim_deliveries(
        &self,
        now: i64,
        lease_until: i64,
        limit: u32,
    ) -> Result<Vec<WebhookDelivery>, StoreError>;

    /// Records how an attempt ended: a delivered row is deleted, a retried one waits, a failed
    /// one is kept as failed.
    async fn finish_delivery(&self, id: i64, outcome: &DeliveryOutcome) -> Result<(), StoreError>;

    /// How many deliveries wait and how many failed.
    async fn outbox_counts(&self) -> Result<OutboxCounts, StoreError>;

    /// The undelivered deliveries of a session, or the failed ones of every session, newest
    /// last, at most `limit`.
    async fn deliveries(
        &self,
        session: Option<&SessionId>,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;

    /// The sessions with a timer due at or before `now` (Unix seconds), earliest first, at
    /// most `limit`: read from an indexed column (`docs/engine.md` §6.3).
    async fn due_sessions(&self, now: i64, limit: u32) -> Result<Vec<SessionId>, StoreError>;

    /// How many sessions have not ended (completed or expired).
    async fn open_sessions(&self) -> Result<u64, StoreError>;

    /// Whether the database answers.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// Opens the store a URL names: `sqlite://PATH`, `sqlite::memory:`, or `postgres://…`.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PostgresStore::connect(url).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::open(url).await?))
    } else {
        Err(StoreError::new(
            StoreErrorKind::Unavailable,
            format!("unsupported database URL {url:?}: use sqlite://PATH or postgres://…"),
        ))
    }
}

/// Opens the store a URL names to read only, beside the process that serves it (for inspection
/// commands and tests): SQLite without its writer lock or cache; PostgreSQL as usual, since every
/// replica already reads beside the others.
pub async fn open_read_only(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::open_read_only(url).await?))
    } else {
        open(url).await
    }
}

pub(crate) fn encode_session(session: &Session) -> Result<String, StoreError> {
    serde_json::to_string(session).map_err(|e| StoreError::new(StoreErrorKind::Other, e))
}

pub(crate) fn decode_session(text: &str) -> Result<Session, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::new(StoreErrorKind::Corrupt, e))
}

pub(crate) fn encode_codes(codes: &[Code]) -> String {
    serde_json::to_string(codes).expect("codes serialize")
}

pub(crate) fn encode_names(names: &[String]) -> String {
    serde_json::to_string(names).expect("strings serialize")
}

pub(crate) fn decode_codes(text: &str) -> Result<Vec<Code>, StoreError> {
    let names: Vec<String> =
        serde_json::from_str(text).map_err(|e| StoreError::new(StoreErrorKind::Corrupt, e))?;
    names
        .iter()
        .map(|n| Code::from_wire(n).ok_or_else(|| corrupt("code", n)))
        .collect()
}

pub(crate) fn decode_operation(text: &str) -> Result<Operation, StoreError> {
    Operation::from_wire(text).ok_or_else(|| corrupt("tool", text))
}

pub(crate) fn decode_outcome(text: &str) -> Result<Outcome, StoreError> {
    Outcome::from_wire(text).ok_or_else(|| corrupt("outcome", text))
}

fn corrupt(field: &str, value: &str) -> StoreError {
    let shown: String = value.chars().take(64).collect();
    StoreError::new(
        StoreErrorKind::Corrupt,
        format!("audit {field} {shown:?} is not one this server knows"),
    )
}
