//! The store for several replicas: one PostgreSQL database. Migrations run under sqlx's
//! advisory lock, so replicas starting together migrate once.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{
    StoreError, StoreErrorKind,
    sql::{Backend, Commits, SqlStore, Writing},
};

/// PostgreSQL's spellings ([`Backend`]).
#[derive(Debug, Clone, Copy)]
pub struct Postgres;

impl Backend for Postgres {
    type Db = sqlx::Postgres;

    const SOLE_WRITER: bool = false;

    const SYSTEM: &'static str = "postgresql";

    // Bytes that do not compress, so they need fresh pages as a change does.
    const PROBE: &'static str = "INSERT INTO writer_probe (id, room) \
        SELECT 1, decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, 4096) \
        ON CONFLICT (id) DO UPDATE SET room = excluded.room";

    // They survive a server crash, only not a database host's power loss.
    const UNFLUSHED: Option<&'static str> = Some("SET LOCAL synchronous_commit TO OFF");

    const FAILED_VALIDATORS: &'static str =
        "LATERAL jsonb_array_elements_text(a.failed::jsonb) AS f(value)";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";

    fn placeholder(n: usize) -> String {
        format!("${n}")
    }
}

/// PostgreSQL-backed [`Store`](super::Store).
pub type PostgresStore = SqlStore<Postgres>;

impl SqlStore<Postgres> {
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
            let found: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
                    .bind(schema)
                    .fetch_one(&admin)
                    .await?;
            if !found {
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
        let pool: PgPool = PgPoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| StoreError::new(StoreErrorKind::Migration, e))?;
        let writing = Writing {
            changes: pool.clone(),
            commits: Commits::Pools {
                audits: pool.clone(),
                close_failed: true,
            },
            lock: None,
        };
        Ok(Self::new(pool, Some(writing)))
    }
}
