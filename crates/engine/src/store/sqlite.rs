//! The embedded default store: one SQLite file in WAL mode with `synchronous=FULL`, so an
//! acknowledged change survives a crash or power loss. One process writes the file (it holds
//! `PATH.lock`), serves its live sessions from memory and group-commits its changes.

use std::{fs::File, path::Path, str::FromStr, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{
    Connection as _, Row,
    sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
    },
};

use super::{
    AuditEntry, Pruned, SessionQuery, SessionSummary, StatsQuery, Store, StoreError,
    StoreErrorKind, WorkflowCount, WorkflowStats, audit_log,
    cache::{SESSION_CACHE_BOUNDS, SessionCache},
    chains::{self, ChainStatements},
    commit::{Apply, Committer, SessionRow, Write},
    decode_session, listing,
    stats::{self, StatsStatements},
    writes::{self, PruneStatements, Statements},
};
use crate::{
    chain::{ChainHead, ChainLink, StoredLink},
    provenance::ProvenanceKey,
    session::{Session, SessionId},
};
use rimthan_registry::PublicKeyFile;

/// SQLite-backed [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// Reads (a read-only store does nothing else).
    pool: SqlitePool,
    /// The writers and the live sessions; none when opened read-only.
    writer: Option<Writer>,
}

#[derive(Debug, Clone)]
struct Writer {
    /// The connection session changes are committed on; retention deletes on it too.
    pool: SqlitePool,
    /// Session changes and their audit entries, group-committed with `synchronous=FULL`.
    changes: Committer,
    /// Audit entries of calls that changed no state, group-committed without the per-commit
    /// fsync: they survive a process crash (WAL), only not a power loss, and acknowledge
    /// nothing a harness builds on.
    audits: Committer,
    /// This process is the database's only writer, and its change writer records each change
    /// it commits here, so these are current.
    cache: Arc<SessionCache>,
    /// Held open for the store's life: the advisory lock on `PATH.lock` that makes this process
    /// the database file's only writer (none for a memory database).
    _lock: Option<Arc<File>>,
}

/// The size the WAL file is cut back to after a checkpoint.
const WAL_LIMIT_BYTES: u64 = 64 << 20;

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database at `url` (`sqlite://PATH` or
    /// `sqlite::memory:`) as its only writer: another process holding it is refused.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Unavailable, e))?;
        let lock = if memory {
            None
        } else {
            Some(Arc::new(writer_lock(options.get_filename())?))
        };
        let options = options
            .create_if_missing(true)
            .journal_mode(if memory {
                SqliteJournalMode::Memory
            } else {
                SqliteJournalMode::Wal
            })
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // Each checkpoint that completes truncates the WAL to this (docs/engine.md §7).
            .pragma("journal_size_limit", WAL_LIMIT_BYTES.to_string());
        // A memory database lives only as long as a connection to it: keep exactly one open,
        // forever, so it neither splits nor vanishes when the pool recycles connections.
        let pool = if memory {
            SqlitePoolOptions::new()
                .min_connections(1)
                .max_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
        } else {
            SqlitePoolOptions::new().max_connections(4)
        };
        let pool = pool.connect_with(options.clone()).await?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|e| StoreError::new(StoreErrorKind::Migration, e))?;
        let (changes, audits) = if memory {
            (pool.clone(), pool.clone())
        } else {
            // One connection each: SQLite has one writer at a time anyway, and a batch needs
            // only one transaction.
            let one = || SqlitePoolOptions::new().max_connections(1);
            (
                one().connect_with(options.clone()).await?,
                one()
                    .connect_with(options.synchronous(SqliteSynchronous::Normal))
                    .await?,
            )
        };
        let cache = Arc::new(SessionCache::new(SESSION_CACHE_BOUNDS));
        Ok(Self {
            pool,
            writer: Some(Writer {
                pool: changes.clone(),
                changes: Committer::spawn(
                    Transactions {
                        pool: changes,
                        file: !memory,
                    },
                    Some(cache.clone()),
                ),
                audits: Committer::spawn(
                    Transactions {
                        pool: audits,
                        file: !memory,
                    },
                    None,
                ),
                cache,
                _lock: lock,
            }),
        })
    }

    /// Opens the database at `url` to read only, beside the process that writes it: no lock,
    /// no cache, no migration; every write is refused.
    pub async fn open_read_only(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Unavailable, e))?
            .read_only(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await?;
        Ok(Self { pool, writer: None })
    }

    fn writer(&self) -> Result<&Writer, StoreError> {
        self.writer.as_ref().ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::Other,
                "this store was opened read-only; only the serving process writes",
            )
        })
    }
}

/// Takes the advisory lock that makes this process the only writer of the database at `path`,
/// so sessions can be served from memory. SQLite serves one process; replicas share PostgreSQL.
///
/// The lock is named after the file, not after its spelling: `PATH.lock` beside the path with
/// every symlink resolved, so another spelling of the same file (through a symlinked folder or
/// file) takes the same lock. A second hard link would be a second name with no way to find the
/// first, and SQLite would keep a second WAL beside it, so a file with more than one link is
/// refused. (The database file itself is not locked: closing any handle of it would drop the
/// locks SQLite holds on it.)
fn writer_lock(path: &Path) -> Result<File, StoreError> {
    let unavailable = |message: String| StoreError::new(StoreErrorKind::Unavailable, message);
    let resolved = match std::fs::metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::MetadataExt as _;
            if meta.nlink() > 1 {
                return Err(unavailable(format!(
                    "the SQLite database {} has {} hard links: give it one name, since two \
                     names could start two writers",
                    path.display(),
                    meta.nlink()
                )));
            }
            std::fs::canonicalize(path)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let name = path
                .file_name()
                .ok_or_else(|| unavailable(format!("{} names no database file", path.display())))?;
            std::fs::canonicalize(parent).map(|p| p.join(name))
        }
        Err(e) => Err(e),
    }
    .map_err(|e| unavailable(format!("cannot resolve {}: {e}", path.display())))?;
    let mut name = resolved.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = Path::new(&name);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path)
        .map_err(|e| {
            unavailable(format!(
                "cannot open the writer lock {}: {e}",
                lock_path.display()
            ))
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(unavailable(format!(
            "the SQLite database {} is in use by another process (it holds {}); SQLite \
             serves one process: stop the other one, or share PostgreSQL between replicas",
            path.display(),
            lock_path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(unavailable(format!(
            "cannot lock {}: {e}",
            lock_path.display()
        ))),
    }
}

/// Applies a batch of writes in one transaction on one pool.
struct Transactions {
    pool: SqlitePool,
    /// A file database, whose connections can be replaced; a memory database lives only as
    /// long as its one connection.
    file: bool,
}

/// SQLite's spelling of the write statements.
const STATEMENTS: Statements = Statements {
    insert_session: "INSERT INTO sessions (id, revision, seq, state, created_at, updated_at, status, \
        workflow, workflow_version, release, harness, principal, organization, step_index, \
        revise_rounds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    update_session: "UPDATE sessions SET revision = ?, seq = ?, state = ?, updated_at = ?, \
        status = ?, step_index = ?, revise_rounds = ? WHERE id = ? AND revision = ? RETURNING id",
    insert_audit: "INSERT INTO audit_log (session_id, seq, tool, outcome, codes, \
        attestation_sha256, reports_sha256, principal, at, organization, workflow, \
        workflow_version, step, step_index, failed, seconds, checks, decision, chain, \
        chain_index, prev_sha256, entry_sha256) \
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    chains_open,
    chains_advance,
    // Fresh pages, as a change's: a full disk refuses this as it refuses a new session.
    probe: "INSERT INTO writer_probe (id, room) VALUES (1, zeroblob(65536)) \
        ON CONFLICT (id) DO UPDATE SET room = excluded.room",
};

/// SQLite's spelling of the chain queries.
const CHAINS: ChainStatements = ChainStatements {
    heads: "SELECT c.chain, h.length, h.head, h.anchor FROM (SELECT chain FROM audit_chains \
        UNION SELECT DISTINCT chain FROM audit_log WHERE chain IS NOT NULL) c \
        LEFT JOIN audit_chains h ON h.chain = c.chain WHERE (?1 IS NULL OR c.chain = ?1) \
        ORDER BY c.chain",
    entries: "SELECT * FROM audit_log WHERE chain = ? ORDER BY id",
    unchained: "SELECT * FROM audit_log WHERE chain IS NULL AND id >= \
        (SELECT first_chained FROM audit_chain_start WHERE id = 1) ORDER BY id",
    completion: "SELECT chain_index, entry_sha256 FROM audit_log WHERE chain = ? \
        AND tool IN ('submit_step_reports', 'approve_step') AND outcome = 'completed' \
        ORDER BY id LIMIT 1",
    keys: "SELECT key_id, public_key FROM provenance_keys ORDER BY added_at, key_id",
    add_key: "INSERT INTO provenance_keys (key_id, public_key, added_at) VALUES (?, ?, ?) \
        ON CONFLICT (key_id) DO NOTHING",
};

/// Opens, locks and reads `n` chains' heads (SQLite has one writer at a time: the transaction
/// that reads a head is the only one that can write it).
fn chains_open(n: usize) -> String {
    let rows = vec!["(?, 0, ?)"; n].join(", ");
    format!(
        "INSERT INTO audit_chains (chain, length, head) VALUES {rows} \
         ON CONFLICT (chain) DO UPDATE SET chain = excluded.chain RETURNING chain, length, head"
    )
}

/// Records `n` chains' heads (SQLite names a `VALUES` table's columns `column1`…).
fn chains_advance(n: usize) -> String {
    let rows = vec!["(?, ?, ?)"; n].join(", ");
    format!(
        "UPDATE audit_chains SET length = v.column2, head = v.column3 \
         FROM (VALUES {rows}) AS v WHERE audit_chains.chain = v.column1"
    )
}

/// SQLite's spelling of the retention statements.
const PRUNE_STATEMENTS: PruneStatements = PruneStatements {
    set_cutoff: "UPDATE retention SET before = ? WHERE id = 1",
    delete_audit: "DELETE FROM audit_log WHERE id IN \
        (SELECT id FROM audit_log WHERE at < ? ORDER BY at LIMIT ?) \
        RETURNING id, chain, chain_index, entry_sha256",
    anchor_get: "SELECT anchor FROM audit_chains WHERE chain = ?",
    anchor_set: "UPDATE audit_chains SET anchor = ? WHERE chain = ?",
    delete_sessions: "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions \
        WHERE status = 'completed' AND updated_at < ? LIMIT ?) RETURNING id",
};

/// SQLite's spelling of the statistics queries.
const STATS: StatsStatements = StatsStatements {
    sessions: "SELECT step_index, status, harness, count(*) AS sessions FROM sessions \
        WHERE workflow = ?1 AND workflow_version = ?2 AND (?3 IS NULL OR organization = ?3) GROUP BY step_index, status, harness",
    steps: "SELECT step_index, count(*) AS judged, \
        sum(CASE WHEN outcome = 'revise' THEN 1 ELSE 0 END) AS revised, count(seconds) AS timed \
        FROM audit_log WHERE step_index IS NOT NULL AND workflow = ?1 AND workflow_version = ?2 AND (?3 IS NULL OR organization = ?3) GROUP BY step_index ORDER BY step_index",
    nth_seconds: "SELECT seconds FROM audit_log WHERE step_index IS NOT NULL AND workflow = ?1 AND workflow_version = ?2 AND (?3 IS NULL OR organization = ?3) \
        AND step_index = ?4 AND seconds IS NOT NULL ORDER BY seconds LIMIT 1 OFFSET ?5",
    failures: "SELECT a.step_index, f.value AS validator, count(*) AS failed FROM audit_log a \
        CROSS JOIN json_each(a.failed) AS f WHERE a.step_index IS NOT NULL AND a.workflow = ?1 \
        AND a.workflow_version = ?2 AND (?3 IS NULL OR a.organization = ?3) AND a.outcome = 'revise' \
        GROUP BY a.step_index, f.value ORDER BY a.step_index, f.value",
    refused: "SELECT count(*) FROM audit_log WHERE tool = 'start_workflow' \
        AND outcome = 'blocked' AND workflow = ?1 AND workflow_version = ?2 AND (?3 IS NULL OR organization = ?3)",
    recent_refused: "SELECT * FROM audit_log WHERE tool = 'start_workflow' \
        AND outcome = 'blocked' AND workflow = ?1 AND workflow_version = ?2 AND (?3 IS NULL OR organization = ?3) ORDER BY id DESC LIMIT ?4",
    workflows: "SELECT workflow, workflow_version, count(*) AS sessions, \
        sum(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS completed FROM sessions \
        WHERE (?1 IS NULL OR organization = ?1) \
        GROUP BY workflow, workflow_version ORDER BY workflow, workflow_version",
};

const RECENT_AUDIT: &str = "SELECT * FROM audit_log WHERE session_id = ? ORDER BY id DESC LIMIT ?";

const AUDIT_LOG: &str = "SELECT * FROM audit_log WHERE session_id = ? ORDER BY id";

/// How SQLite numbers query parameters (`listing::list` builds the list query with it).
const PARAMETER: char = '?';

#[async_trait]
impl Apply for Transactions {
    async fn apply(&self, writes: &[&Write]) -> Result<Vec<bool>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let applied = async {
            let mut tx = conn.begin().await?;
            let took = writes::apply::<sqlx::Sqlite>(&mut tx, &STATEMENTS, writes).await?;
            tx.commit().await?;
            Ok(took)
        }
        .await;
        // SQLite rolls a transaction back by itself on some faults (SQLITE_FULL, SQLITE_IOERR)
        // and not on others, so after a failure the connection may sit inside a transaction its
        // driver no longer tracks, and later "commits" would only release savepoints in it:
        // close it, and the next batch starts on a fresh one (`docs/engine.md` §7.2).
        if applied.is_err() && self.file {
            conn.close_on_drop();
        }
        applied
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn secret(&self, name: &str, generated: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        if self.writer.is_some() {
            sqlx::query(
                "INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(generated)
            .execute(&self.pool)
            .await?;
        }
        let row = sqlx::query("SELECT value FROM secrets WHERE name = ?")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("value")?)
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
        if let Some(cached) = cache.and_then(|c| c.get(id)) {
            return Ok(Some(cached));
        }
        let ticket = cache.map(|c| c.ticket());
        let row = sqlx::query("SELECT state FROM sessions WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let state = row.try_get::<String, _>("state")?;
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
    ) -> Result<bool, StoreError> {
        let writer = self.writer()?;
        let write = Write::Update {
            expected: expected_revision as i64,
            row: SessionRow::of(session)?,
            audit: audit.clone(),
        };
        writer.changes.write(write).await
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
        writes::prune(&writer.pool, &PRUNE_STATEMENTS, before, &writer.cache, key).await
    }

    async fn audit_chains(&self, chain: Option<&str>) -> Result<Vec<ChainHead>, StoreError> {
        chains::heads(&self.pool, &CHAINS, chain).await
    }

    async fn chain_entries(&self, chain: &str) -> Result<Vec<StoredLink>, StoreError> {
        chains::entries(&self.pool, CHAINS.entries, Some(chain)).await
    }

    async fn unchained_audit(&self) -> Result<Vec<StoredLink>, StoreError> {
        chains::entries(&self.pool, CHAINS.unchained, None).await
    }

    async fn completion_link(&self, session: &SessionId) -> Result<Option<ChainLink>, StoreError> {
        chains::completion(&self.pool, &CHAINS, session.as_str()).await
    }

    async fn provenance_keys(&self) -> Result<Vec<PublicKeyFile>, StoreError> {
        chains::keys(&self.pool, &CHAINS).await
    }

    async fn add_provenance_key(&self, key: &PublicKeyFile) -> Result<(), StoreError> {
        if self.writer.is_none() {
            return Ok(());
        }
        chains::add_key(&self.pool, &CHAINS, key, &crate::session::now_rfc3339()).await
    }

    async fn list_sessions(&self, query: &SessionQuery) -> Result<Vec<SessionSummary>, StoreError> {
        listing::list(&self.pool, PARAMETER, query).await
    }

    async fn workflow_stats(&self, query: &StatsQuery) -> Result<WorkflowStats, StoreError> {
        stats::workflow_stats(&self.pool, &STATS, query).await
    }

    async fn workflows(
        &self,
        organization: Option<&str>,
    ) -> Result<Vec<WorkflowCount>, StoreError> {
        stats::workflows(&self.pool, &STATS, organization).await
    }

    async fn audit_log(&self, session: &SessionId) -> Result<Vec<AuditEntry>, StoreError> {
        audit_log::of_session(&self.pool, AUDIT_LOG, session).await
    }

    async fn recent_audit(
        &self,
        session: &SessionId,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        audit_log::recent(&self.pool, RECENT_AUDIT, session, limit).await
    }

    async fn open_sessions(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM sessions WHERE status <> 'completed'")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("n")? as u64)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        if let Some(writer) = &self.writer {
            writer.changes.ready().await?;
        }
        Ok(())
    }
}
