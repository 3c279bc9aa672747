//! Group commit: the writes that arrive while a transaction commits wait for the next one and
//! share it, so concurrent session changes pay one flush to stable storage together instead of
//! one each (`docs/engine.md` §7.2). Each write is answered only after the transaction that holds
//! it committed, so an acknowledged change is as durable as before.

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};

use std::sync::Arc;

use super::{AuditEntry, StoreError, StoreErrorKind, cache::SessionCache, encode_session};
use crate::session::Session;

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
    /// A session replaced if still at `expected` revision, with its audit entry if it was.
    Update {
        expected: i64,
        row: SessionRow,
        audit: AuditEntry,
    },
    /// An audit entry of a call that changed no state.
    Audit(AuditEntry),
}

/// A backend's way of applying writes in one transaction: `Ok` holds, per write, whether it
/// took effect (a compare-and-swap that lost does not); `Err` means nothing was committed.
#[async_trait]
pub(crate) trait Apply: Send + Sync + 'static {
    async fn apply(&self, writes: &[&Write]) -> Result<Vec<bool>, StoreError>;
}

struct Job {
    write: Write,
    reply: oneshot::Sender<Result<bool, StoreError>>,
}

/// The queue in front of one writer task.
#[derive(Debug, Clone)]
pub(crate) struct Committer {
    jobs: mpsc::Sender<Job>,
}

impl Committer {
    /// Starts the writer task on the current runtime; it ends when the last handle is dropped.
    /// With a `cache`, the task itself records every session change it committed there, before
    /// answering: a caller that is gone by then (its client hung up) cannot leave the cache
    /// behind the store.
    pub(crate) fn spawn(apply: impl Apply, cache: Option<Arc<SessionCache>>) -> Self {
        let (jobs, queue) = mpsc::channel(MAX_QUEUE);
        tokio::spawn(run(apply, cache, queue));
        Self { jobs }
    }

    /// Queues a write and waits until the transaction holding it committed.
    pub(crate) async fn write(&self, write: Write) -> Result<bool, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job { write, reply })
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
        cache.committed(row.session.clone());
    }
}

async fn run(apply: impl Apply, cache: Option<Arc<SessionCache>>, mut queue: mpsc::Receiver<Job>) {
    let cache = cache.as_deref();
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let writes: Vec<&Write> = batch.iter().map(|j| &j.write).collect();
        let applied = apply.apply(&writes).await;
        drop(writes);
        match applied {
            Ok(results) => {
                for (job, took) in batch.drain(..).zip(results) {
                    if took {
                        remember(cache, &job.write);
                    }
                    let _ = job.reply.send(Ok(took));
                }
            }
            // One bad write (a duplicate id, say) must not fail the others: each alone.
            Err(e) if batch.len() == 1 => {
                let _ = batch.remove(0).reply.send(Err(e));
            }
            Err(_) => {
                for job in batch.drain(..) {
                    let result = apply
                        .apply(&[&job.write])
                        .await
                        .map(|r| r.first().copied().unwrap_or(false));
                    if matches!(result, Ok(true)) {
                        remember(cache, &job.write);
                    }
                    let _ = job.reply.send(result);
                }
            }
        }
    }
}
