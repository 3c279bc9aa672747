//! The embedded default store: one SQLite file in WAL mode with `synchronous=FULL`, so an
//! acknowledged change survives a crash or power loss.

use std::{str::FromStr, time::Duration};

use async_trait::async_trait;
use sqlx::{
    Row,
    sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
    },
};

use super::{
    AuditEntry, Store, StoreError, StoreErrorKind, decode_codes, decode_operation, decode_outcome,
    decode_session, encode_codes, encode_session,
};
use crate::session::{Session, SessionId};

/// SQLite-backed [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Connections without a per-commit fsync, for audit entries of calls that changed no
    /// state: those entries survive a process crash (WAL), only not a power loss, and they
    /// acknowledge nothing a harness builds on.
    audit_pool: SqlitePool,
}

/// The size the WAL file is cut back to after a checkpoint.
const WAL_LIMIT_BYTES: u64 = 64 << 20;

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database at `url` (`sqlite://PATH` or
    /// `sqlite::memory:`).
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Unavailable, e))?
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
        let audit_pool = if memory {
            pool.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(2)
                .connect_with(options.synchronous(SqliteSynchronous::Normal))
                .await?
        };
        Ok(Self { pool, audit_pool })
    }
}

fn decode_audit(row: &sqlx::sqlite::SqliteRow) -> Result<AuditEntry, StoreError> {
    let session: Option<String> = row.try_get("session_id")?;
    let seq: Option<i64> = row.try_get("seq")?;
    Ok(AuditEntry {
        session_id: session
            .map(|s| {
                s.parse()
                    .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, e))
            })
            .transpose()?,
        seq: seq.map(|s| s as u64),
        tool: decode_operation(&row.try_get::<String, _>("tool")?)?,
        outcome: decode_outcome(&row.try_get::<String, _>("outcome")?)?,
        codes: decode_codes(&row.try_get::<String, _>("codes")?)?,
        attestation_sha256: row.try_get("attestation_sha256")?,
        reports_sha256: row.try_get("reports_sha256")?,
        principal: row.try_get("principal")?,
        at: row.try_get("at")?,
    })
}

async fn insert_audit<'e, E>(executor: E, audit: &AuditEntry) -> Result<(), StoreError>
where
    E: sqlx::Executor<'e, Database = sqlx::Sqlite>,
{
    sqlx::query(
        "INSERT INTO audit_log (session_id, seq, tool, outcome, codes, attestation_sha256, \
         reports_sha256, principal, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(audit.session_id.as_ref().map(SessionId::as_str))
    .bind(audit.seq.map(|s| s as i64))
    .bind(audit.tool.as_str())
    .bind(audit.outcome.as_str())
    .bind(encode_codes(&audit.codes))
    .bind(&audit.attestation_sha256)
    .bind(&audit.reports_sha256)
    .bind(&audit.principal)
    .bind(&audit.at)
    .execute(executor)
    .await?;
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    async fn secret(&self, name: &str, generated: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        sqlx::query(
            "INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(generated)
        .execute(&self.pool)
        .await?;
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
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO sessions (id, revision, seq, state, created_at, updated_at, status) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(session.id.as_str())
        .bind(session.revision as i64)
        .bind(session.seq as i64)
        .bind(encode_session(session)?)
        .bind(&session.created_at)
        .bind(&session.updated_at)
        .bind(session.status.as_str())
        .execute(&mut *tx)
        .await?;
        insert_audit(&mut *tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn load_session(&self, id: &SessionId) -> Result<Option<Session>, StoreError> {
        let row = sqlx::query("SELECT state FROM sessions WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| decode_session(&r.try_get::<String, _>("state")?))
            .transpose()
    }

    async fn update_session(
        &self,
        expected_revision: u64,
        session: &Session,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let swapped = sqlx::query(
            "UPDATE sessions SET revision = ?, seq = ?, state = ?, updated_at = ?, status = ? \
             WHERE id = ? AND revision = ?",
        )
        .bind(session.revision as i64)
        .bind(session.seq as i64)
        .bind(encode_session(session)?)
        .bind(&session.updated_at)
        .bind(session.status.as_str())
        .bind(session.id.as_str())
        .bind(expected_revision as i64)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !swapped {
            tx.rollback().await?;
            return Ok(false);
        }
        insert_audit(&mut *tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn append_audit(&self, audit: &AuditEntry) -> Result<(), StoreError> {
        insert_audit(&self.audit_pool, audit).await
    }

    async fn audit_log(&self, session: &SessionId) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = sqlx::query("SELECT * FROM audit_log WHERE session_id = ? ORDER BY id")
            .bind(session.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode_audit).collect()
    }

    async fn open_sessions(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM sessions WHERE status <> 'completed'")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("n")? as u64)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
