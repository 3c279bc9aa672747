//! The embedded default store: one SQLite file in WAL mode with `synchronous=FULL`, so an
//! acknowledged change survives a crash or power loss. One process writes the file (it holds
//! `PATH.lock`), serves its live sessions from memory and group-commits its changes.

use std::{fs::File, path::Path, str::FromStr, sync::Arc, time::Duration};

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::{
    StoreError, StoreErrorKind,
    commit::Apply,
    sql::{Backend, Commits, SqlStore, Writing},
    sqlite_writer::{self, ThreadWriter},
    writes::Statements,
};

/// SQLite's spellings ([`Backend`]).
#[derive(Debug, Clone, Copy)]
pub struct Sqlite;

impl Backend for Sqlite {
    type Db = sqlx::Sqlite;

    const SOLE_WRITER: bool = true;

    const SYSTEM: &'static str = "sqlite";

    // Zeros, in fresh pages as a change's.
    const PROBE: &'static str = "INSERT INTO writer_probe (id, room) VALUES (1, zeroblob(65536)) \
        ON CONFLICT (id) DO UPDATE SET room = excluded.room";

    const UNFLUSHED: Option<&'static str> = None;

    const FAILED_VALIDATORS: &'static str = "json_each(a.failed) AS f";
    const SKIP_LOCKED: &'static str = "";

    /// Plain `?`: SQLite binds them in order, without looking up each value's name.
    fn placeholder(_: usize) -> String {
        "?".to_owned()
    }
}

/// SQLite-backed [`Store`](super::Store).
pub type SqliteStore = SqlStore<Sqlite>;

/// The size the WAL file is cut back to after a checkpoint.
const WAL_LIMIT_BYTES: u64 = 64 << 20;

/// How long a statement waits for a lock another connection of this process holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

impl SqlStore<Sqlite> {
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
            .busy_timeout(BUSY_TIMEOUT)
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
        let writing = if memory {
            Writing {
                changes: pool.clone(),
                commits: Commits::Pools {
                    audits: pool.clone(),
                    close_failed: false,
                },
                lock,
            }
        } else {
            // Each writer commits on a thread and connection of its own (one hand-over per
            // batch, not per statement). SQLite has one writer at a time anyway. Audit entries
            // of calls that changed no state skip the per-commit fsync: they survive a process
            // crash (WAL), only not a power loss. Retention deletes on a pool of one.
            let writer = |flushed: bool, name: &str| {
                let options = sqlite_writer::Options {
                    path: options.get_filename().to_owned(),
                    flushed,
                    busy_timeout: BUSY_TIMEOUT,
                    wal_limit_bytes: WAL_LIMIT_BYTES,
                };
                ThreadWriter::spawn(name, options, Statements::new::<Sqlite>())
                    .map(|w| Box::new(w) as Box<dyn Apply>)
            };
            Writing {
                changes: SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(options.clone())
                    .await?,
                commits: Commits::Own {
                    changes: writer(true, "rimthan-sqlite-changes")?,
                    audits: writer(false, "rimthan-sqlite-audits")?,
                },
                lock,
            }
        };
        Ok(Self::new(pool, Some(writing)))
    }

    /// Opens the database at `url` to read only, beside the process that writes it: no lock,
    /// no cache, no migration; every write is refused.
    pub async fn open_read_only(url: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Unavailable, e))?
            .read_only(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await?;
        Ok(Self::new(pool, None))
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
