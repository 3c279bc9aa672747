//! Group commit: the writes that arrive while a transaction commits wait for the next one and
//! share it, so concurrent session changes pay one flush to stable storage together instead of
//! one each (`docs/engine.md` §7.2). Each write is answered only after the transaction that holds
//! it committed, so an acknowledged change is as durable as before.
//!
//! A transaction that fails is the hard part. When the database rejected one write of the batch
//! (a duplicate id), the others deserve to commit, so each is retried alone. Any other failure is
//! a storage fault (disk full, an I/O error, a lost connection): every write of the batch fails,
//! none is acknowledged, and the sessions it touched leave the cache, since a commit whose
//! answer was lost may still have happened. The backend leaves its connection clean (SQLite
//! closes it), the fault is kept for `/readyz` until a commit succeeds again, and a readiness
//! probe commits a harmless write through this same queue, so the store recovers by itself once
//! the fault is gone, with or without traffic.

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use std::sync::{Arc, Mutex, PoisonError};

use super::{AuditEntry, StoreError, StoreErrorKind, cache::SessionCache, encode_session};
use crate::model::{
    chain::ChainLink,
    notify::Notice,
    session::{Session, SessionId, unix_seconds},
};

/// Writes one transaction holds at most.
pub(crate) const MAX_BATCH: usize = 256;
/// Writes waiting for a transaction at most; more wait to be queued.
const MAX_QUEUE: usize = 4096;

/// A session row as stored: its state already serialized by the caller, off the writer, and
/// the session itself, for the cache once the row is committed.
#[derive(Debug)]
pub(crate) struct SessionRow {
    pub(crate) session: Arc<Session>,
    pub(crate) id: String,
    pub(crate) revision: i64,
    pub(crate) seq: i64,
    pub(crate) state: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) status: &'static str,
    pub(crate) columns: ListedColumns,
    /// When its next timer is due, in seconds since the Unix epoch.
    pub(crate) due_at: Option<i64>,
}

/// The columns a session list filters and shows without decoding state (`docs/engine.md` §7.4).
#[derive(Debug)]
pub(crate) struct ListedColumns {
    pub(crate) workflow: String,
    pub(crate) workflow_version: String,
    pub(crate) release: String,
    pub(crate) harness: &'static str,
    pub(crate) principal: Option<String>,
    pub(crate) organization: Option<String>,
    pub(crate) step_index: i64,
    pub(crate) revise_rounds: i64,
}

impl SessionRow {
    pub(crate) fn of(session: &Session) -> Result<Self, StoreError> {
        Ok(Self {
            session: Arc::new(session.clone()),
            id: session.id.as_str().to_owned(),
            revision: session.revision as i64,
            seq: session.seq as i64,
            state: encode_session(session)?,
            created_at: session.created_at.clone(),
            updated_at: session.updated_at.clone(),
            status: session.status.as_str(),
            due_at: session.due_at().and_then(unix_seconds),
            columns: ListedColumns {
                workflow: session.workflow.to_string(),
                workflow_version: session.workflow_version.to_string(),
                release: session.release.to_string(),
                harness: session.host.harness.as_str(),
                principal: session.principal.as_ref().map(|p| p.subject.clone()),
                organization: session
                    .principal
                    .as_ref()
                    .and_then(|p| p.organization.clone()),
                step_index: session.step_index as i64,
                revise_rounds: i64::from(session.revise_rounds),
            },
        })
    }
}

/// One write.
#[derive(Debug)]
pub(crate) enum Write {
    /// A new session and its audit entry.
    Insert(SessionRow, AuditEntry),
    /// A session replaced if still at `expected` revision, with its audit entry and the
    /// webhook events it causes if it was.
    Update {
        expected: i64,
        row: SessionRow,
        audit: AuditEntry,
        notices: Vec<Notice>,
    },
    /// An audit entry of a call that changed no state.
    Audit(AuditEntry),
    /// A harmless write that proves the writer can commit again (the readiness probe).
    Probe,
}

impl Write {
    /// The session this write changes, if any.
    fn session(&self) -> Option<&SessionId> {
        match self {
            Write::Insert(row, _) | Write::Update { row, .. } => Some(&row.session.id),
            Write::Audit(_) | Write::Probe => None,
        }
    }
}

/// What one write of a committed transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Took {
    /// A compare-and-swap that lost: nothing of it was written.
    Lost,
    /// Written, its audit entry at this link of its chain: the caller that needs the link
    /// (a completion's provenance statement) has it without reading it back.
    Linked(ChainLink),
    /// The readiness probe, which appends to no chain.
    Probed,
}

impl Took {
    fn took(&self) -> bool {
        *self != Took::Lost
    }
}

/// A backend's way of applying writes in one transaction: `Ok` holds what each write did;
/// `Err` means nothing was committed. The writes are shared, so an applier may hand them to a
/// thread of its own (`store/sqlite_writer.rs`).
#[async_trait]
pub(crate) trait Apply: Send + Sync + 'static {
    async fn apply(&self, writes: &[Arc<Write>]) -> Result<Vec<Took>, StoreError>;
}

#[async_trait]
impl Apply for Box<dyn Apply> {
    async fn apply(&self, writes: &[Arc<Write>]) -> Result<Vec<Took>, StoreError> {
        (**self).apply(writes).await
    }
}

struct Job {
    write: Arc<Write>,
    reply: oneshot::Sender<Result<Took, StoreError>>,
}

/// The queue in front of one writer task.
#[derive(Debug, Clone)]
pub(crate) struct Committer {
    jobs: mpsc::Sender<Job>,
    /// The storage fault the last transaction failed with; none once one commits.
    fault: Arc<Mutex<Option<String>>>,
}

impl Committer {
    /// Starts the writer task on the current runtime; it ends when the last handle is dropped.
    /// With a `cache`, the task itself records every session change it committed there, before
    /// answering: a caller that is gone by then (its client hung up) cannot leave the cache
    /// behind the store.
    pub(crate) fn spawn(apply: impl Apply, cache: Option<Arc<SessionCache>>) -> Self {
        let (jobs, queue) = mpsc::channel(MAX_QUEUE);
        let fault = Arc::new(Mutex::new(None));
        tokio::spawn(run(apply, cache, fault.clone(), queue));
        Self { jobs, fault }
    }

    /// Whether this writer commits: while its last transaction failed on a storage fault, it
    /// commits a probe, and says why it is unready if that fails too (`/readyz`).
    pub(crate) async fn ready(&self) -> Result<(), StoreError> {
        if self.fault().is_none() {
            return Ok(());
        }
        self.write(Write::Probe).await.map(|_| ()).map_err(|e| {
            StoreError::new(
                e.kind,
                format!(
                    "the store cannot commit ({}); changes are refused until a commit succeeds",
                    e.message
                ),
            )
        })
    }

    fn fault(&self) -> Option<String> {
        self.fault
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Queues a write and waits until the transaction holding it committed.
    pub(crate) async fn write(&self, write: Write) -> Result<Took, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job {
                write: Arc::new(write),
                reply,
            })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> StoreError {
    StoreError::new(
        StoreErrorKind::Unavailable,
        "the store's writer stopped; restart the server",
    )
}

/// Records a committed session change in the cache.
fn remember(cache: Option<&SessionCache>, write: &Write) {
    if let (Some(cache), Write::Insert(row, _) | Write::Update { row, .. }) = (cache, write) {
        cache.committed(row.session.clone(), row.state.len());
    }
}

async fn run(
    apply: impl Apply,
    cache: Option<Arc<SessionCache>>,
    fault: Arc<Mutex<Option<String>>>,
    mut queue: mpsc::Receiver<Job>,
) {
    let cache = cache.as_deref();
    let record = |result: &Result<Vec<Took>, StoreError>| {
        let mut fault = fault.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(_) => *fault = None,
            Err(e) if e.kind != StoreErrorKind::Conflict => *fault = Some(e.message.clone()),
            Err(_) => {}
        }
    };
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let writes: Vec<Arc<Write>> = batch.iter().map(|j| j.write.clone()).collect();
        let applied = apply.apply(&writes).await;
        drop(writes);
        record(&applied);
        match applied {
            Ok(results) => {
                for (job, took) in batch.drain(..).zip(results) {
                    if took.took() {
                        remember(cache, &job.write);
                    }
                    let _ = job.reply.send(Ok(took));
                }
            }
            // One write the database rejected (a duplicate id, say) must not fail the others:
            // each alone.
            Err(e) if e.kind == StoreErrorKind::Conflict && batch.len() > 1 => {
                for job in batch.drain(..) {
                    let result = apply.apply(std::slice::from_ref(&job.write)).await;
                    record(&result);
                    let result = result.map(|r| r.into_iter().next().unwrap_or(Took::Lost));
                    match &result {
                        Ok(took) if took.took() => remember(cache, &job.write),
                        Ok(_) => {}
                        Err(_) => forget(cache, &job.write),
                    }
                    let _ = job.reply.send(result);
                }
            }
            Err(e) => {
                for job in batch.drain(..) {
                    forget(cache, &job.write);
                    let _ = job.reply.send(Err(StoreError::new(e.kind, &e.message)));
                }
            }
        }
    }
}

/// Drops the cached session a failed write touched: its commit may have happened after all,
/// so the next call reads the stored row.
fn forget(cache: Option<&SessionCache>, write: &Write) {
    if let (Some(cache), Some(id)) = (cache, write.session()) {
        cache.forget(std::slice::from_ref(id));
    }
}
