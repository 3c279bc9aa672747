//! The store for several replicas: one PostgreSQL database. Migrations run under sqlx's
//! advisory lock, so replicas starting together migrate once.

use std::{str::FromStr, sync::Arc};

use async_trait::async_trait;
use sqlx::{
    Connection as _, Row,
    postgres::{PgConnectOptions, PgPool, PgPoolOptions},
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

/// PostgreSQL-backed [`Store`].
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// The live sessions; other replicas write the same rows, so a cached session is used only
    /// after its stored revision is probed.
    cache: Arc<SessionCache>,
    /// Session changes and their audit entries, group-committed.
    changes: Committer,
    /// Audit entries of calls that changed no state, group-committed without waiting for the
    /// WAL flush: they survive a server crash, only not a database host's power loss, and
    /// acknowledge nothing.
    audits: Committer,
}

impl PostgresStore {
    /// Connects to `url` and migrates.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Unavailable, e))?;
        Self::connect_with(options).await
    }

    /// Connects to `url` with every table in `schema` (created if absent), and migrates; tests
    /// use a fresh schema each.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        if !schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(StoreError::new(
                StoreErrorKind::Other,
                "schema names use [a-z0-9_]",
            ));
        }
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Unavailable, e))?;
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        // Concurrent `IF NOT EXISTS` creations can still collide on the catalog's unique index;
        // the loser finds the schema there, which is all it wanted.
        let created = sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .execute(&admin)
            .await;
        if let Err(e) = created {
            let code = e
                .as_database_error()
                .and_then(|d| d.code())
                .map(|c| c.into_owned());
            if !matches!(code.as_deref(), Some("23505" | "42P06")) {
                return Err(e.into());
            }
        }
        admin.close().await;
        // Named after the schema, so a test can find (and terminate) this store's connections.
        let options = options
            .options([("search_path", schema)])
            .application_name(schema);
        Self::connect_with(options).await
    }

    async fn connect_with(options: PgConnectOptions) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| StoreError::new(StoreErrorKind::Migration, e))?;
        let cache = Arc::new(SessionCache::new(SESSION_CACHE_BOUNDS));
        Ok(Self {
            changes: Committer::spawn(
                Transactions {
                    pool: pool.clone(),
                    durable: true,
                },
                Some(cache.clone()),
            ),
            audits: Committer::spawn(
                Transactions {
                    pool: pool.clone(),
                    durable: false,
                },
                None,
            ),
            pool,
            cache,
        })
    }
}

/// Applies a batch of writes in one transaction.
struct Transactions {
    pool: PgPool,
    /// Whether the commit waits for the WAL flush.
    durable: bool,
}

/// PostgreSQL's spelling of the write statements.
const STATEMENTS: Statements = Statements {
    insert_session: "INSERT INTO sessions (id, revision, seq, state, created_at, updated_at, status, \
        workflow, workflow_version, release, harness, principal, organization, step_index, \
        revise_rounds) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    update_session: "UPDATE sessions SET revision = $1, seq = $2, state = $3, updated_at = $4, \
        status = $5, step_index = $6, revise_rounds = $7 WHERE id = $8 AND revision = $9 \
        RETURNING id",
    insert_audit: "INSERT INTO audit_log (session_id, seq, tool, outcome, codes, \
        attestation_sha256, reports_sha256, principal, at, organization, workflow, \
        workflow_version, step, step_index, failed, seconds, checks, decision, chain, \
        chain_index, prev_sha256, entry_sha256) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
        $18, $19, $20, $21, $22)",
    chains_open,
    chains_advance,
    // 64 KiB that do not compress, so they need fresh pages as a change does: a full disk
    // refuses them as it refuses a new session.
    probe: "INSERT INTO writer_probe (id, room) \
        SELECT 1, decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, 4096) \
        ON CONFLICT (id) DO UPDATE SET room = excluded.room",
};

/// PostgreSQL's spelling of the chain queries.
const CHAINS: ChainStatements = ChainStatements {
    heads: "SELECT c.chain, h.length, h.head, h.anchor FROM (SELECT chain FROM audit_chains \
        UNION SELECT DISTINCT chain FROM audit_log WHERE chain IS NOT NULL) c \
        LEFT JOIN audit_chains h ON h.chain = c.chain WHERE ($1::text IS NULL OR c.chain = $1) \
        ORDER BY c.chain",
    entries: "SELECT * FROM audit_log WHERE chain = $1 ORDER BY id",
    unchained: "SELECT * FROM audit_log WHERE chain IS NULL AND id >= \
        (SELECT first_chained FROM audit_chain_start WHERE id = 1) ORDER BY id",
    completion: "SELECT chain_index, entry_sha256 FROM audit_log WHERE chain = $1 \
        AND tool IN ('submit_step_reports', 'approve_step') AND outcome = 'completed' \
        ORDER BY id LIMIT 1",
    keys: "SELECT key_id, public_key FROM provenance_keys ORDER BY added_at, key_id",
    add_key: "INSERT INTO provenance_keys (key_id, public_key, added_at) VALUES ($1, $2, $3) \
        ON CONFLICT (key_id) DO NOTHING",
};

/// Opens, locks and reads `n` chains' heads: only these chains' rows are locked, so appends to
/// other sessions go on beside them; rows are taken in the order given (sorted).
fn chains_open(n: usize) -> String {
    let rows: Vec<String> = (0..n)
        .map(|i| format!("(${}, 0, ${})", 2 * i + 1, 2 * i + 2))
        .collect();
    format!(
        "INSERT INTO audit_chains (chain, length, head) VALUES {} \
         ON CONFLICT (chain) DO UPDATE SET chain = excluded.chain RETURNING chain, length, head",
        rows.join(", ")
    )
}

/// Records `n` chains' heads.
fn chains_advance(n: usize) -> String {
    let rows: Vec<String> = (0..n)
        .map(|i| format!("(${}, ${}::bigint, ${})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
        .collect();
    format!(
        "UPDATE audit_chains SET length = v.length, head = v.head FROM (VALUES {}) \
         AS v(chain, length, head) WHERE audit_chains.chain = v.chain",
        rows.join(", ")
    )
}

/// PostgreSQL's spelling of the retention statements.
const PRUNE_STATEMENTS: PruneStatements = PruneStatements {
    set_cutoff: "UPDATE retention SET before = $1 WHERE id = 1",
    delete_audit: "DELETE FROM audit_log WHERE id IN \
        (SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2) \
        RETURNING id, chain, chain_index, entry_sha256",
    anchor_get: "SELECT anchor FROM audit_chains WHERE chain = $1",
    anchor_set: "UPDATE audit_chains SET anchor = $1 WHERE chain = $2",
    delete_sessions: "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions \
        WHERE status = 'completed' AND updated_at < $1 LIMIT $2) RETURNING id",
};

/// PostgreSQL's spelling of the statistics queries.
const STATS: StatsStatements = StatsStatements {
    sessions: "SELECT step_index, status, harness, count(*) AS sessions FROM sessions \
        WHERE workflow = $1 AND workflow_version = $2 AND ($3::text IS NULL OR organization = $3) GROUP BY step_index, status, harness",
    steps: "SELECT step_index, count(*) AS judged, \
        sum(CASE WHEN outcome = 'revise' THEN 1 ELSE 0 END) AS revised, count(seconds) AS timed \
        FROM audit_log WHERE step_index IS NOT NULL AND workflow = $1 AND workflow_version = $2 AND ($3::text IS NULL OR organization = $3) GROUP BY step_index ORDER BY step_index",
    nth_seconds: "SELECT seconds FROM audit_log WHERE step_index IS NOT NULL AND workflow = $1 AND workflow_version = $2 AND ($3::text IS NULL OR organization = $3) \
        AND step_index = $4 AND seconds IS NOT NULL ORDER BY seconds LIMIT 1 OFFSET $5",
    failures: "SELECT a.step_index, f.value AS validator, count(*) AS failed FROM audit_log a \
        CROSS JOIN LATERAL jsonb_array_elements_text(a.failed::jsonb) AS f(value) WHERE a.step_index IS NOT NULL AND a.workflow = $1 \
        AND a.workflow_version = $2 AND ($3::text IS NULL OR a.organization = $3) AND a.outcome = 'revise' \
        GROUP BY a.step_index, f.value ORDER BY a.step_index, f.value",
    refused: "SELECT count(*) FROM audit_log WHERE tool = 'start_workflow' \
        AND outcome = 'blocked' AND workflow = $1 AND workflow_version = $2 AND ($3::text IS NULL OR organization = $3)",
    recent_refused: "SELECT * FROM audit_log WHERE tool = 'start_workflow' \
        AND outcome = 'blocked' AND workflow = $1 AND workflow_version = $2 AND ($3::text IS NULL OR organization = $3) ORDER BY id DESC LIMIT $4",
    workflows: "SELECT workflow, workflow_version, count(*) AS sessions, \
        sum(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS completed FROM sessions \
        WHERE ($1::text IS NULL OR organization = $1) \
        GROUP BY workflow, workflow_version ORDER BY workflow, workflow_version",
};

const RECENT_AUDIT: &str =
    "SELECT * FROM audit_log WHERE session_id = $1 ORDER BY id DESC LIMIT $2";

const AUDIT_LOG: &str = "SELECT * FROM audit_log WHERE session_id = $1 ORDER BY id";

/// How PostgreSQL numbers query parameters (`listing::list` builds the list query with it).
const PARAMETER: char = '$';

#[async_trait]
impl Apply for Transactions {
    async fn apply(&self, writes: &[&Write]) -> Result<Vec<bool>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let applied = async {
            let mut tx = conn.begin().await?;
            if !self.durable {
                sqlx::query("SET LOCAL synchronous_commit TO OFF")
                    .execute(&mut *tx)
                    .await?;
            }
            let took = writes::apply::<sqlx::Postgres>(&mut tx, &STATEMENTS, writes).await?;
            tx.commit().await?;
            Ok(took)
        }
        .await;
        // A connection that failed mid-transaction (lost, or its server out of disk) is not
        // trusted with the next batch: it is closed and the pool opens a fresh one.
        if applied.is_err() {
            conn.close_on_drop();
        }
        applied
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn secret(&self, name: &str, generated: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        sqlx::query(
            "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(generated)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT value FROM secrets WHERE name = $1")
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
        let row = SessionRow::of(session)?;
        self.changes
            .write(Write::Insert(row, audit.clone()))
            .await?;
        Ok(())
    }

    fn session_cache(&self) -> Option<crate::cache::CacheStats> {
        Some(self.cache.stats())
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<Arc<Session>>, StoreError> {
        if let Some(cached) = self.cache.get(id) {
            // Another replica may have changed it, or pruned it and started it anew from the
            // same idempotency key: its revision and creation time together say whether it did.
            // (A pruned session was created over a day before the one that replaces it, since
            // retention keeps at least a day.)
            let stored: Option<(i64, String)> =
                sqlx::query_as("SELECT revision, created_at FROM sessions WHERE id = $1")
                    .bind(id.as_str())
                    .fetch_optional(&self.pool)
                    .await?;
            match stored {
                None => {
                    self.cache.forget(std::slice::from_ref(id));
                    return Ok(None);
                }
                Some((revision, created_at))
                    if revision as u64 == cached.revision && created_at == cached.created_at =>
                {
                    return Ok(Some(cached));
                }
                Some(_) => {}
            }
        }
        let ticket = self.cache.ticket();
        let row = sqlx::query("SELECT state FROM sessions WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let state = row.try_get::<String, _>("state")?;
        let session = Arc::new(decode_session(&state)?);
        self.cache.read(ticket, session.clone(), state.len());
        Ok(Some(session))
    }

    async fn update_session(
        &self,
        expected_revision: u64,
        session: &Session,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError> {
        let write = Write::Update {
            expected: expected_revision as i64,
            row: SessionRow::of(session)?,
            audit: audit.clone(),
        };
        self.changes.write(write).await
    }

    async fn append_audit(&self, audit: &AuditEntry) -> Result<(), StoreError> {
        self.audits
            .write(Write::Audit(audit.clone()))
            .await
            .map(|_| ())
    }

    async fn prune(&self, before: &str, key: &ProvenanceKey) -> Result<Pruned, StoreError> {
        writes::prune(&self.pool, &PRUNE_STATEMENTS, before, &self.cache, key).await
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
        self.changes.ready().await
    }
}
