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

use crate::{
    cache::{CacheBounds, CacheStats, Weighed},
    model::session::{Session, SessionId},
};

/// What one process keeps of the live sessions, least recently used first out, weighed by their
/// stored state: sized for a fleet (thousands of live sessions at a few KiB each), so a
/// round-robin over more sessions than a count-bounded cache holds does not miss on every call.
pub const SESSION_CACHE_BOUNDS: CacheBounds = CacheBounds {
    max_bytes: 64 * 1024 * 1024,
    max_entries: 65_536,
};

#[derive(Debug)]
struct Inner {
    sessions: Weighed<SessionId, Arc<Session>>,
    /// Bumped by every committed change, so a read that raced one is not cached.
    epoch: u64,
    hits: u64,
    misses: u64,
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
    pub(crate) fn new(bounds: CacheBounds) -> Self {
        Self {
            inner: Mutex::new(Inner {
                sessions: Weighed::new(bounds),
                epoch: 0,
                hits: 0,
                misses: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn get(&self, id: &SessionId) -> Option<Arc<Session>> {
        let mut inner = self.lock();
        let found = inner.sessions.get(id).cloned();
        if found.is_some() {
            inner.hits += 1;
        } else {
            inner.misses += 1;
        }
        found
    }

    pub(crate) fn ticket(&self) -> ReadTicket {
        ReadTicket(self.lock().epoch)
    }

    /// Caches a session read from the store (its state `weight` bytes long), unless a change
    /// committed since `ticket` was taken, or the cache already holds a later revision.
    pub(crate) fn read(&self, ticket: ReadTicket, session: Arc<Session>, weight: usize) {
        let mut inner = self.lock();
        if inner.epoch == ticket.0 {
            put(&mut inner, session, weight);
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

    /// Records a change this process committed (the session's state `weight` bytes long).
    pub(crate) fn committed(&self, session: Arc<Session>, weight: usize) {
        let mut inner = self.lock();
        inner.epoch += 1;
        put(&mut inner, session, weight);
    }

    /// What the cache holds and how it has served.
    pub(crate) fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            hits: inner.hits,
            misses: inner.misses,
            ..inner.sessions.stats()
        }
    }
}

/// Keeps `session` unless the cache holds a later revision of the same session. A session
/// created at another time under the same id (pruned, then started anew from its idempotency
/// key) is another session, whatever its revision.
fn put(inner: &mut Inner, session: Arc<Session>, weight: usize) {
    let newer = inner.sessions.get(&session.id).is_none_or(|cached| {
        cached.created_at != session.created_at || cached.revision < session.revision
    });
    if newer {
        inner.sessions.insert(session.id.clone(), session, weight);
    }
}
