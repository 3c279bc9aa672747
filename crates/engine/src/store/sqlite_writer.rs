//! A SQLite file's writes, committed on a thread of their own.
//!
//! sqlx runs each SQLite statement on its connection's worker thread and answers it through a
//! channel, so a batch of a dozen statements crossed between a runtime worker and that thread a
//! dozen times, two thread wake-ups each. Here the batch crosses once: the writer task hands it
//! to a thread that owns the connection, which runs the batch's transaction from `BEGIN` to
//! `COMMIT` and answers once. The statements and what a batch does with their answers are
//! [`writes::apply`]'s, the same as on every sqlx connection; here each statement is done when
//! it returns, so that future never waits and the thread polls it to its end.
//!
//! A transaction that failed leaves its connection behind: SQLite rolls back by itself on some
//! faults (`SQLITE_FULL`, `SQLITE_IOERR`) and not on others, so the connection may sit inside a
//! transaction nobody tracks. The thread closes it and opens a fresh one for the next batch, as
//! the sqlx writer does (`docs/engine.md` §7.2).

use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{
    Connection, OpenFlags, TransactionBehavior, params_from_iter,
    types::{ToSql, ToSqlOutput, ValueRef},
};
use tokio::sync::oneshot;

use super::{
    StoreError, StoreErrorKind,
    commit::{Apply, Took, Write},
    writes::{self, Execute, Head, Statements, Value},
};

/// Prepared statements a connection keeps: the four a batch runs, and the chain statements of
/// each batch size seen lately.
const STATEMENT_CACHE: usize = 64;

/// How one writer connection is opened.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The database file.
    pub(crate) path: PathBuf,
    /// Whether a commit waits for the flush to stable storage (`synchronous=FULL`), or only
    /// for the WAL write (`synchronous=NORMAL`: survives a process crash, not a power loss).
    pub(crate) flushed: bool,
    /// How long a statement waits for a lock another connection holds (a retention pass).
    pub(crate) busy_timeout: Duration,
    /// The size the WAL is cut back to after a checkpoint.
    pub(crate) wal_limit_bytes: u64,
}

type Batch = (
    Vec<Arc<Write>>,
    oneshot::Sender<Result<Vec<Took>, StoreError>>,
);

/// An [`Apply`] that commits on its own thread, on its own connection.
#[derive(Debug)]
pub(crate) struct ThreadWriter {
    batches: mpsc::Sender<Batch>,
}

impl ThreadWriter {
    /// Starts the thread; it opens its connection at its first batch and ends when this is
    /// dropped.
    pub(crate) fn spawn(name: &str, options: Options, sql: Statements) -> Result<Self, StoreError> {
        let (batches, queue) = mpsc::channel::<Batch>();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || run(&options, &sql, &queue))
            .map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Unavailable,
                    format!("cannot start the SQLite writer thread: {e}"),
                )
            })?;
        Ok(Self { batches })
    }
}

#[async_trait]
impl Apply for ThreadWriter {
    async fn apply(&self, writes: &[Arc<Write>]) -> Result<Vec<Took>, StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || {
            StoreError::new(
                StoreErrorKind::Unavailable,
                "the SQLite writer thread stopped; restart the server",
            )
        };
        self.batches
            .send((writes.to_vec(), reply))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn run(options: &Options, sql: &Statements, queue: &mpsc::Receiver<Batch>) {
    let mut conn: Option<Connection> = None;
    while let Ok((writes, reply)) = queue.recv() {
        let result = match conn.take().map_or_else(|| open(options), Ok) {
            Ok(mut open) => {
                let result = commit(&mut open, sql, &writes);
                // A connection that failed mid-transaction is not trusted with the next batch.
                if result.is_ok() {
                    conn = Some(open);
                }
                result
            }
            Err(e) => Err(e),
        };
        let _ = reply.send(result);
    }
}

fn open(options: &Options) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        &options.path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| {
        StoreError::new(
            StoreErrorKind::Unavailable,
            format!("cannot open {}: {e}", options.path.display()),
        )
    })?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let synchronous = if options.flushed { "FULL" } else { "NORMAL" };
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = {synchronous}; \
         PRAGMA journal_size_limit = {};",
        options.wal_limit_bytes
    ))?;
    // The file is in WAL mode since the store opened it; a connection that found it otherwise
    // would commit with other guarantees than the store promises.
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::new(
            StoreErrorKind::Unavailable,
            format!(
                "{} is in journal mode {mode}, not WAL",
                options.path.display()
            ),
        ));
    }
    Ok(conn)
}

fn commit(
    conn: &mut Connection,
    sql: &Statements,
    writes: &[Arc<Write>],
) -> Result<Vec<Took>, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let took = futures::executor::block_on(writes::apply(&mut OnThread(&tx), sql, writes))?;
    tx.commit()?;
    Ok(took)
}

/// The writer thread's connection inside its transaction.
struct OnThread<'c>(&'c Connection);

impl Execute for OnThread<'_> {
    async fn execute(&mut self, sql: &str, values: &[Value<'_>]) -> Result<(), StoreError> {
        self.0
            .prepare_cached(sql)?
            .execute(params_from_iter(values))?;
        Ok(())
    }

    async fn returns_row(&mut self, sql: &str, values: &[Value<'_>]) -> Result<bool, StoreError> {
        let mut statement = self.0.prepare_cached(sql)?;
        let mut rows = statement.query(params_from_iter(values))?;
        Ok(rows.next()?.is_some())
    }

    async fn heads(&mut self, sql: &str, values: &[Value<'_>]) -> Result<Vec<Head>, StoreError> {
        let mut statement = self.0.prepare_cached(sql)?;
        let rows = statement.query_map(params_from_iter(values), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Value::Text(Some(s)) => ValueRef::Text(s.as_bytes()),
            Value::Integer(Some(n)) => ValueRef::Integer(n),
            Value::Text(None) | Value::Integer(None) => ValueRef::Null,
        }))
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        let kind = match &e {
            rusqlite::Error::SqliteFailure(code, _)
                if code.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                StoreErrorKind::Conflict
            }
            rusqlite::Error::SqliteFailure(code, _)
                if code.code == rusqlite::ErrorCode::CannotOpen =>
            {
                StoreErrorKind::Unavailable
            }
            rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::IntegralValueOutOfRange(..) => StoreErrorKind::Corrupt,
            _ => StoreErrorKind::Other,
        };
        StoreError::new(kind, e)
    }
}
