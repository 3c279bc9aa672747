//! The live sessions, kept in memory so that a call reads the store only when the cache cannot
//! prove it holds the stored revision (`docs/engine.md` §7.1).
//!
//! A store that is the only writer of its database (SQLite: one process holds the file's writer
//! lock) updates the cache with every change it commits, so a cached session is the stored one.
//! A store that shares its database with other replicas (PostgreSQL) uses a cached session only
//! after a probe of its stored revision, which skips reading and decoding the session's state.
//!
//! A session read on a miss is cached only if no change was committed while it was being read,
//! so a slow read can never put back a revision older than one a change already cached.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hashlink::LruCache;

use crate::session::{Session, SessionId};

/// How many live sessions one process keeps, least recently used first out.
pub const SESSION_CACHE_CAPACITY: usize = 1024;

#[derive(Debug)]
struct Inner {
    sessions: LruCache<SessionId, Arc<Session>>,
    /// Bumped by every committed change, so a read that raced one is not cached.
    epoch: u64,
}

/// A bounded map of session id to the latest revision this process has seen.
#[derive(Debug)]
pub(crate) struct SessionCache {
    inner: Mutex<Inner>,
}

/// Taken before a read from the store; it lets the read's result into the cache only if no
/// change was committed meanwhile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadTicket(u64);

impl SessionCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                sessions: LruCache::new(capacity.max(1)),
                epoch: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn get(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.lock().sessions.get(id).cloned()
    }

    pub(crate) fn ticket(&self) -> ReadTicket {
        ReadTicket(self.lock().epoch)
    }

    /// Caches a session read from the store, unless a change committed since `ticket` was
    /// taken, or the cache already holds a later revision.
    pub(crate) fn read(&self, ticket: ReadTicket, session: Arc<Session>) {
        let mut inner = self.lock();
        if inner.epoch == ticket.0 {
            put(&mut inner, session);
        }
    }

    /// Drops sessions the store deleted.
    pub(crate) fn forget(&self, ids: &[SessionId]) {
        let mut inner = self.lock();
        inner.epoch += 1;
        for id in ids {
            inner.sessions.remove(id);
        }
    }

    /// Records a change this process committed.
    pub(crate) fn committed(&self, session: Arc<Session>) {
        let mut inner = self.lock();
        inner.epoch += 1;
        put(&mut inner, session);
    }
}

/// Keeps `session` unless the cache holds a later revision of the same session. A session
/// created at another time under the same id (pruned, then started anew from its idempotency
/// key) is another session, whatever its revision.
fn put(inner: &mut Inner, session: Arc<Session>) {
    let newer = inner.sessions.get(&session.id).is_none_or(|cached| {
        cached.created_at != session.created_at || cached.revision < session.revision
    });
    if newer {
        inner.sessions.insert(session.id.clone(), session);
    }
}
